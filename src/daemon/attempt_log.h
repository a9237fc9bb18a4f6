// One record per attempt of a job (store::AttemptRecord): where it ran, when,
// why it ended, and what it used of its GPUs as the telemetry saw it. The
// queue tells it when an attempt starts, is launched and ends; after every
// telemetry round it reads the latest sample of each running attempt's GPUs.
// Lives on the event-loop thread; every record goes into the turn's batch,
// so an attempt's end is committed with the job's own change.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/status.h"
#include "daemon/daemon_state.h"
#include "exec/launch_spec.h"
#include "sched/job.h"
#include "store/records.h"

namespace gpuherd::daemon {

// The stop the queue had asked for when an attempt ended (JobService's intent).
enum class AttemptStop { kNone, kCancel, kRequeue, kFault, kMemory };

// Why an attempt ended, as stored (store::AttemptRecord::end_cause): a stop
// the queue asked for names the cause (a requeue whose reason starts with
// "requeued by" is a user's, any other a preemption); otherwise how the
// process ended.
std::string AttemptEndCause(AttemptStop stop, const std::string& stop_reason, const exec::ExitRecord& exit);

class AttemptLog {
 public:
  // How often the records of running attempts are written with what they
  // used so far, so that a restarted daemon goes on from there.
  static constexpr DurationMs kFlushInterval = kMinuteMs;

  explicit AttemptLog(DaemonState* state) : state_(state) {}

  // At start, before the queue's reload: the attempts still open in the store.
  Status Load();
  // A new attempt (the job is running with its GPUs and start time set).
  void Started(const sched::Job& job);
  // Its supervisor's pid: the session that the job's processes live in, by
  // which its GPU memory is told from its neighbours'.
  void Launched(sched::JobId id, int attempt, int shim_pid);
  // The job's current attempt ended; `exit` is null when it never ran.
  void Ended(const sched::Job& job, const std::string& cause, const std::string& reason,
             const exec::ExitRecord* exit);
  // After each telemetry round.
  void OnRound();
  // The record of a running attempt so far; nullopt when none is open.
  std::optional<store::AttemptRecord> Running(sched::JobId id) const;
  size_t running() const { return open_.size(); }

 private:
  struct Open {
    store::AttemptRecord record;
    std::vector<int> gpus;   // fleet positions
    int shim_pid = 0;
    double util_sum = 0;     // of the readings counted in record.util_samples
    TimeMs last_sample = 0;  // the newest sample time counted
  };
  std::vector<int> Positions(const std::vector<std::string>& uuids) const;
  void Sample(Open& open);
  static store::AttemptRecord Snapshot(const Open& open);
  // The record of `job`'s current attempt as it started.
  static store::AttemptRecord StartRecord(const sched::Job& job);

  DaemonState* state_;
  std::map<std::pair<sched::JobId, int>, Open> open_;  // (job, attempt)
  TimeMs last_flush_ = 0;
};

}  // namespace gpuherd::daemon
