#include "daemon/queue/fair_share.h"

#include <algorithm>
#include <iterator>

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
      Add(r.user, r.ended, gpus * (r.ended - r.started) / 3.6e6);
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
    Add(job.spec.user, job.ended, job.spec.gpu_twentieths / 20.0 * (job.ended - job.started) / 3.6e6);
  }
}

void FairShare::Add(const std::string& user, TimeMs end, double hours) {
  Usage& u = usage_[user];
  if (u.ended.empty() || end < u.oldest) u.oldest = end;
  u.ended.emplace_back(end, hours);
  u.sum += hours;
}

void FairShare::Expire(TimeMs now) {
  for (auto it = usage_.begin(); it != usage_.end();) {
    Usage& u = it->second;
    if (u.oldest < now - window_) {
      std::erase_if(u.ended, [&](const auto& e) { return e.first < now - window_; });
      u.sum = 0;
      for (const auto& [end, hours] : u.ended) u.sum += hours;
      u.oldest = u.ended.empty() ? 0 : std::min_element(u.ended.begin(), u.ended.end())->first;
    }
    it = u.ended.empty() ? usage_.erase(it) : std::next(it);
  }
}

double FairShare::EndedGpuHours(const std::string& user, TimeMs now) const {
  auto it = usage_.find(user);
  if (it == usage_.end()) return 0;
  const Usage& u = it->second;
  if (u.oldest >= now - window_) return u.sum;  // every one counts: the sum of the walk below
  double hours = 0;
  for (const auto& [end, h] : u.ended) {
    if (end >= now - window_) hours += h;
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
