// The files of an attempt's record folder (LaunchSpec::record_dir, in the
// daemon's private tree: job_trees.h), which outlive the daemon and are how
// it re-adopts its jobs:
//   shim           the supervisor's identity: pid and start time (written by
//                  the launcher before Launch returns, so a daemon that
//                  recorded the launch finds it)
//   exit.reserved  room for the exit record, made by the shim at its start
//   exit           the exit record (written by the shim just before it exits)
// The job's own files (stdout, stderr, the fence's) are in its output folder,
// made by the job's user. Thread-safe: every function works on files only.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "core/status.h"
#include "exec/launch_spec.h"

namespace gpuherd::exec {

std::string ShimFilePath(const std::string& dir);
std::string ExitFilePath(const std::string& dir);

// A process is known by its pid and its start time (clock ticks after boot,
// /proc/<pid>/stat field 22), so that a recycled pid is never taken for it.
struct ShimIdentity {
  int pid = 0;
  uint64_t start_time = 0;
};

// Start time of a live process; NotFound when there is no such process.
Result<uint64_t> ProcessStartTime(int pid);
// True when `id.pid` is alive and is still the process that was recorded.
bool IsAlive(const ShimIdentity& id);

Status WriteShimFile(const std::string& dir, const ShimIdentity& shim);
// nullopt when the file does not exist; DataLoss when it cannot be parsed.
Result<std::optional<ShimIdentity>> ReadShimFile(const std::string& dir);

std::string ExitRecordToJson(const ExitRecord& record);
// A disk that fills up while a job runs must not turn its exit into "the
// supervisor was lost": the shim reserves the exit record's space when it
// starts (<dir>/exit.reserved, kExitReserveBytes of blanks). WriteExitRecord
// writes the record over the blanks in place (no new blocks) and renames that
// file to <dir>/exit; a record too long for it is written and renamed as any
// file is, and on a full disk cut to fit the reservation. Failing to reserve
// is not an error of the launch.
constexpr size_t kExitReserveBytes = 8192;
Status ReserveExitRecord(const std::string& dir);
Status WriteExitRecord(const std::string& dir, const ExitRecord& record);
// nullopt when the file does not exist; DataLoss when it cannot be parsed.
Result<std::optional<ExitRecord>> ReadExitRecord(const std::string& dir);

}  // namespace gpuherd::exec
