// What each user's GPUs have done, for the scheduler's fair share and for
// monitoring: the GPU-hours of attempts that ended within the fair-share
// window (older ones drop out each round), and the GPU-seconds of every
// attempt that ended since the daemon started. A running attempt is counted
// by the caller (RunningGpuHours) until it ends. Loop thread only.
#pragma once

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "core/time.h"
#include "sched/job.h"
#include "store/records.h"

namespace gpuherd::daemon::queue {

class FairShare {
 public:
  // `window`: how long an ended attempt counts (SchedulerConfig's fair_window).
  explicit FairShare(DurationMs window) : window_(window) {}

  // At start: the finished jobs the store has from within the window.
  void Load(const std::vector<store::JobRecord>& finished);
  // An attempt of `job` (running or stopping) ends at `end`: its GPU time
  // counts from now on. A job that never started counts nothing.
  void AttemptEnded(const sched::Job& job, TimeMs end);
  // A job finished at job.ended: the GPU-hours of its last attempt enter the
  // window (AttemptEnded counts the seconds since start).
  void Finished(const sched::Job& job);
  // Each round: ended attempts older than the window no longer count.
  void Expire(TimeMs now);

  // GPU-hours of `user`'s attempts that ended within the window.
  double EndedGpuHours(const std::string& user, TimeMs now) const;
  // GPU-seconds per user of the attempts that ended since the daemon started.
  const std::map<std::string, double>& gpu_seconds_done() const { return gpu_seconds_done_; }

  // A running attempt's GPU-hours so far.
  static double RunningGpuHours(const sched::Job& job, TimeMs now);
  // A running attempt's GPU-seconds so far (0 before it starts).
  static double RunningGpuSeconds(const sched::Job& job, TimeMs now);

 private:
  // A user's recently finished jobs. Every scheduling pass asks for each
  // waiting user's hours: the sum is kept, so that a pass does not walk
  // every job the user ran in the window.
  struct Usage {
    std::vector<std::pair<TimeMs, double>> ended;  // (end time, GPU-hours), in the order added
    double sum = 0;  // of `ended`, added in that order (the same double as a walk gives)
    TimeMs oldest = 0;  // the earliest end time in `ended`
  };
  void Add(const std::string& user, TimeMs end, double hours);

  DurationMs window_;
  std::map<std::string, Usage> usage_;  // user → its usage
  std::map<std::string, double> gpu_seconds_done_;  // user → GPU-seconds of ended attempts
};

}  // namespace gpuherd::daemon::queue
