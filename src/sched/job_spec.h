// Reading and checking a job spec: the JSON form that the API, the CLI and
// YAML files (converted to JSON) share, and whether a spec can ever run on
// this fleet. Every error names the field and says what to write instead.
#pragma once

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "core/status.h"
#include "sched/fleet_state.h"
#include "sched/job.h"

namespace gpuherd::sched {

// The most tasks one job array (`submit --array N`) may have.
inline constexpr int kMaxArraySize = 100000;

// Fields: command (required: an array of strings, the program and its
// arguments, or a string, a shell command line run with /bin/sh -c), cwd, env {NAME: value},
// gpus (0, 0.05..0.95 in steps of 0.05, or a whole number), gpu_mem ("8GiB",
// "512MiB", "20G" or a number of MiB), model, min_cc ("8.0"), cpus, mem,
// priority (-100..100), time_limit ("2h" or seconds), checkpoint {grace},
// preemptible, max_restarts, after [ids] (completed; depends_on is its older
// name), after_any [ids] (ended), after_not_ok [ids] (failed or cancelled),
// name, labels {key: value},
// mixed_models (true lets a multi-GPU job span GPU models).
// The user comes from the caller's credentials, never from the spec.
Result<JobSpec> ParseJobSpec(const nlohmann::json& j);

// The spec in the form ParseJobSpec reads, with the fields that differ from
// a default JobSpec: ParseJobSpec(JobSpecToJson(s)) gives `s` back (less
// user, uid, gid and pinned_gpus, which never come from a spec). What the
// queue stores for a job it was handed as a typed spec.
nlohmann::json JobSpecToJson(const JobSpec& spec);

// One field of a spec into `spec`, checked as ParseJobSpec checks it: for
// readers that know where each field came from (a YAML file's line).
Status ParseJobSpecField(const std::string& key, const nlohmann::json& value, JobSpec* spec);

// The spec alone: ranges, gpu_mem present for a fraction. ParseJobSpec calls
// it; callers that build a JobSpec from flags call it themselves.
Status ValidateJobSpec(const JobSpec& spec);

// Whether the spec could ever run here, whatever the GPUs are doing now:
// enough GPUs, a card with enough memory, the model and compute capability.
Status CheckFits(const JobSpec& spec, const FleetState& fleet);

// "8GiB", "512MiB", "20G" (G = GiB), "1.5TB", "4096" (MiB) → bytes.
Result<uint64_t> ParseMemorySize(const std::string& text);
// 0.5 → 10, 0.25 → 5, 2 → 40; refuses 0.33, 1.5 and negatives.
Result<int> ParseGpuTwentieths(double gpus);
// "8.0" → 80, "9" → 90.
Result<int> ParseComputeCapability(const std::string& text);

// "24 GiB", "512 MiB".
std::string FormatBytes(uint64_t bytes);
// 80 → "8.0".
std::string FormatComputeCapability(int cc);
// 10 → "0.5", 5 → "0.25", 40 → "2".
std::string FormatGpuTwentieths(int twentieths);

}  // namespace gpuherd::sched
