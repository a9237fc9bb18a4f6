// Accounting as /v1/acct serves it and `gpuherd acct` prints it, like
// Slurm's sacct: per job and per user, the GPU time held, the GPU
// utilization while running, the peak GPU memory, the wait in the queue and
// the efficiency (GPU time used over GPU time held), from the jobs' attempt
// records (store::AttemptRecord).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/time.h"
#include "store/records.h"

namespace gpuherd::api {

// What the jobs of one row (a job, a user, everyone) add up to.
struct AcctUsage {
  int attempts = 0;
  // GPU time held: the share (a fraction counts its part) times the run time
  // of every attempt, the running ones until now.
  double gpu_hours = 0;
  // The part of gpu_hours whose attempts had utilization readings, and what
  // of it was used: utilization over the share, at most 1 (a fraction is
  // credited its GPU's utilization up to its share: NVML gives no
  // per-process SM use here, so with busy neighbours this is an upper bound).
  double measured_gpu_hours = 0;
  double used_gpu_hours = 0;
  std::optional<double> mean_gpu_util;         // %, weighted by GPU time held
  std::optional<uint64_t> peak_gpu_mem_bytes;  // the most on one GPU
  std::optional<double> efficiency() const {   // used over held, 0..1
    if (measured_gpu_hours <= 0) return std::nullopt;
    return used_gpu_hours / measured_gpu_hours;
  }
};

struct AcctJob {
  int64_t id = 0;
  std::string name, user, state;
  TimeMs submitted = 0;
  TimeMs first_started = 0;  // 0: never started
  TimeMs ended = 0;          // 0: not finished
  // From submission to the first start; for a job that never started, until
  // it ended (cancelled) or until now (pending).
  DurationMs wait_ms = 0;
  AcctUsage usage;
  double util_weight = 0;    // internal: GPU-hours behind mean_gpu_util
};

struct AcctUser {
  std::string user;
  int jobs = 0;
  DurationMs wait_ms_mean = 0;
  AcctUsage usage;
};

struct AcctReport {
  TimeMs since = 0, now = 0;
  std::string user;          // the filter; empty: everyone
  std::vector<AcctJob> jobs;    // by id
  std::vector<AcctUser> users;  // by user name
  AcctUser total;               // user "" : everything listed
};

// Adds up `jobs` (any order) with their `attempts`; a running attempt
// (ended 0) counts until `now`.
AcctReport Account(const std::vector<store::JobRecord>& jobs, const std::vector<store::AttemptRecord>& attempts,
                   TimeMs since, TimeMs now, const std::string& user);

void to_json(nlohmann::json& j, const AcctUsage& u);
void from_json(const nlohmann::json& j, AcctUsage& u);
void to_json(nlohmann::json& j, const AcctJob& a);
void from_json(const nlohmann::json& j, AcctJob& a);
void to_json(nlohmann::json& j, const AcctUser& a);
void from_json(const nlohmann::json& j, AcctUser& a);
void to_json(nlohmann::json& j, const AcctReport& r);
void from_json(const nlohmann::json& j, AcctReport& r);

}  // namespace gpuherd::api
