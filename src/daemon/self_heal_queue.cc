#include "daemon/self_heal_queue.h"

#include <algorithm>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

namespace gpuherd::daemon {

void SelfHealJobQueue::DrainForFault(int position, const std::string& reason) {
  jobs_->MoveJobsOff(position, reason, queue::DrainOrigin::kFault);
}

Status SelfHealJobQueue::LiftFaultDrain(int position, const std::string& by) {
  // The pool refuses an operator's drain (queue/drain_origin.h).
  return jobs_->LiftAfterBurnIn(position, by);
}

bool SelfHealJobQueue::OperatorDrained(int position) const {
  auto drain = jobs_->DrainOf(state_->fleet.gpus.at(position).uuid);
  return drain && drain->origin == queue::DrainOrigin::kOperator;
}

bool SelfHealJobQueue::Drained(int position) const {
  return jobs_->DrainOf(state_->fleet.gpus.at(position).uuid).has_value();
}

Result<sched::JobId> SelfHealJobQueue::QueueRequalification(int position, int level, bool reset_first) {
  const gpu::GpuInfo& info = state_->fleet.gpus.at(position);
  api::BurnInRequest request;
  request.gpus = {info.uuid};
  request.level = level;
  request.reset_first = reset_first;
  auto plan = PlanBurnInJob(request, state_->fleet, launcher_);
  if (!plan.ok()) return plan.status();
  plan->spec.name = fmt::format("requalify-L{}-gpu{}", level, info.index);
  plan->spec.labels["gpuherd.requalify"] = "true";
  return jobs_->Submit(plan->spec, caller_, plan->extras);
}

void SelfHealJobQueue::CancelRequalification(sched::JobId job, const std::string& reason) {
  auto done = jobs_->Act(job, "cancel", caller_);
  if (!done.ok()) spdlog::warn("cannot cancel requalification job {} ({}): {}", job, reason, done.status().message());
}

std::vector<JobOnGpu> SelfHealJobQueue::JobsOn(int position) const {
  // The queue's own listing of unfinished jobs (views kept between changes):
  // an XID is rare, and this needs no new view into the queue.
  std::vector<JobOnGpu> out;
  const int index = state_->fleet.gpus.at(position).index;
  for (const JobService::ListedJob& j : jobs_->List(false, "", "").jobs) {
    if (j.view->state != "running" && j.view->state != "stopping") continue;
    const auto& gpus = j.view->assigned_gpus;
    if (std::find(gpus.begin(), gpus.end(), index) != gpus.end()) out.push_back({j.view->id, j.view->user});
  }
  std::sort(out.begin(), out.end(), [](const JobOnGpu& a, const JobOnGpu& b) { return a.id < b.id; });
  return out;
}

}  // namespace gpuherd::daemon
