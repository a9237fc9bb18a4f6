#include "daemon/queue/fair_share.h"

#include <nlohmann/json.hpp>

namespace gpuherd::daemon::queue {

using sched::JobState;

void FairShare::Load(const std::vector<store::JobRecord>& finished) {
  for (const auto& r : finished) {
    // The stored spec's GPU share: "gpu_twentieths" beside the spec, or
    // gpu_tenths in a spec stored before twentieths.
    nlohmann::json spec = nlohmann::json::parse(r.spec_json, nullptr, false);
    double gpus = !spec.is_object() ? 0
                  : spec.contains("gpu_twentieths") ? spec.value("gpu_twentieths", 0) / 20.0
                                                    : spec.value("gpu_tenths", 0) / 10.0;
    if (r.started > 0 && r.ended > r.started) {
      usage_.emplace(r.user, std::make_pair(r.ended, gpus * (r.ended - r.started) / 3.6e6));
    }
  }
}

void FairShare::AttemptEnded(const sched::Job& job, TimeMs end) {
  if (job.state != JobState::kRunning && job.state != JobState::kStopping) return;
  if (job.started <= 0 || end <= job.started) return;
  gpu_seconds_done_[job.spec.user] += job.spec.gpu_twentieths / 20.0 * static_cast<double>(end - job.started) / 1000.0;
}

void FairShare::Finished(const sched::Job& job) {
  if (job.started > 0 && job.spec.gpu_twentieths > 0) {
    usage_.emplace(job.spec.user,
                   std::make_pair(job.ended, job.spec.gpu_twentieths / 20.0 * (job.ended - job.started) / 3.6e6));
  }
}

void FairShare::Expire(TimeMs now) {
  std::erase_if(usage_, [&](const auto& u) { return u.second.first < now - window_; });
}

double FairShare::EndedGpuHours(const std::string& user, TimeMs now) const {
  double hours = 0;
  auto [lo, hi] = usage_.equal_range(user);
  for (auto it = lo; it != hi; ++it) {
    if (it->second.first >= now - window_) hours += it->second.second;
  }
  return hours;
}

double FairShare::RunningGpuHours(const sched::Job& job, TimeMs now) {
  return job.spec.gpu_twentieths / 20.0 * (now - job.started) / 3.6e6;
}

double FairShare::RunningGpuSeconds(const sched::Job& job, TimeMs now) {
  if (job.started <= 0 || now <= job.started) return 0;
  return job.spec.gpu_twentieths / 20.0 * static_cast<double>(now - job.started) / 1000.0;
}

}  // namespace gpuherd::daemon::queue
