// The queue's records (job_service.h): a job to and from its stored row,
// the preemption marks kept in its stored spec so that a restart keeps every
// claim, and the queue read back from the store after a failed commit.
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "daemon/job_service.h"
#include "sched/job_spec.h"

namespace gpuherd::daemon {
namespace {

using nlohmann::json;
using sched::JobState;

}  // namespace

Status JobService::FromRecord(const store::JobRecord& r, Entry* e) const {
  json stored = json::parse(r.spec_json, nullptr, false);
  e->stored_spec = r.spec_json;
  sched::Job& job = e->job;
  auto spec = sched::ParseJobSpec(stored.is_object() ? stored.value("spec", json::object()) : json::object());
  if (spec.ok()) job.spec = *spec;
  job.id = r.id;
  job.spec.name = r.name;
  job.spec.user = r.user;
  job.spec.uid = r.uid;
  job.spec.gid = stored.is_object() ? stored.value("gid", 0u) : 0u;
  if (stored.is_object()) {
    e->extras.checkpoint_dir = stored.value("checkpoint_dir", std::string());
    e->extras.prior_attempts = stored.value("prior_attempts", 0);
    e->extras.pinned_gpus = stored.value("pinned_gpus", std::vector<std::string>());
    if (auto a = stored.find("array"); a != stored.end() && a->is_object()) {
      e->extras.array_id = a->value("id", sched::JobId{0});
      e->extras.array_index = a->value("index", 0);
      e->extras.array_size = a->value("size", 0);
    }
    job.spec.pinned_gpus = e->extras.pinned_gpus;
    // Preemption marks (StoreMarks): bounded by what the daemon wrote.
    if (auto p = stored.find("preempted_for"); p != stored.end() && p->is_array()) {
      for (const auto& id : *p) {
        if (id.is_number_integer()) e->preempted_for.insert(id.get<sched::JobId>());
      }
    }
    if (auto s = stored.find("stopping_for"); s != stored.end() && s->is_number_integer()) {
      e->stopping_for = s->get<sched::JobId>();
    }
    if (auto c = stored.find("claimed_gpus"); c != stored.end() && c->is_array()) {
      for (const auto& u : *c) {
        if (u.is_string()) AppendPositions(u.get<std::string>(), &e->stored_claim);
      }
    }
  }
  job.state = sched::ParseJobState(r.state).value_or(JobState::kFailed);
  job.submitted = r.submitted;
  job.started = r.started;
  job.ended = r.ended;
  job.attempt = r.attempt;
  job.restarts = r.restarts;
  job.exit_code = r.exit_code;
  job.exit_signal = r.exit_signal;
  job.reason = r.reason;
  json uuids = json::parse(r.gpus_json, nullptr, false);
  if (uuids.is_array()) {
    for (const auto& u : uuids) {
      job.gpu_uuids.push_back(u.get<std::string>());
      AppendPositions(job.gpu_uuids.back(), &job.gpus);
    }
  }
  return spec.ok() ? Status::Ok() : spec.status();
}


void JobService::StoreMarks(Entry& e) {
  json stored = json::parse(e.stored_spec, nullptr, false);
  if (!stored.is_object()) return;  // unreadable specs were failed at load
  if (e.preempted_for.empty()) {
    stored.erase("preempted_for");
  } else {
    stored["preempted_for"] = e.preempted_for;
  }
  if (e.job.state == JobState::kStopping && e.stopping_for != 0) {
    stored["stopping_for"] = e.stopping_for;
  } else {
    stored.erase("stopping_for");
  }
  stored.erase("claimed_gpus");
  if (auto c = claims_.find(e.job.id); c != claims_.end()) {
    json uuids = json::array();
    for (int g : c->second) {
      if (g >= 0 && g < static_cast<int>(state_->fleet.gpus.size())) uuids.push_back(state_->fleet.gpus[g].uuid);
    }
    stored["claimed_gpus"] = uuids;
  }
  e.stored_spec = stored.dump();
  Touch(e);
}


void JobService::StoreChangedClaims() {
  if (claims_ == stored_claims_) return;
  std::set<sched::JobId> changed;
  for (const auto& [id, gpus] : claims_) {
    auto s = stored_claims_.find(id);
    if (s == stored_claims_.end() || s->second != gpus) changed.insert(id);
  }
  for (const auto& [id, gpus] : stored_claims_) {
    if (!claims_.count(id)) changed.insert(id);
  }
  for (sched::JobId id : changed) {
    if (auto it = jobs_.find(id); it != jobs_.end()) StoreMarks(it->second);
  }
  stored_claims_ = claims_;
}


void JobService::ClaimsFromMarks() {
  claims_.clear();
  // Only pending jobs hold claims; FromRecord read them from the stored spec.
  for (const auto& [priority, submitted, id] : pending_order_) {
    const Entry& e = jobs_.at(id);
    if (!e.stored_claim.empty()) claims_[id] = e.stored_claim;
  }
  stored_claims_ = claims_;
}


void JobService::AppendPositions(const std::string& uuid, std::vector<int>* positions) const {
  for (const auto& g : state_->fleet.gpus) {
    if (g.uuid == uuid) positions->push_back(g.index);
  }
}


void JobService::RestoreFromStore() {
  auto unfinished = state_->store->ListUnfinishedJobs();
  if (!unfinished.ok()) {
    // Memory stays ahead of the store; the next successful commit writes
    // every job touched since, and nothing of the failed turn ran.
    spdlog::error("cannot read the queue back after a failed commit: {}", unfinished.status().ToString());
    return;
  }
  std::map<sched::JobId, Entry> old;
  old.swap(jobs_);
  active_.clear();
  pending_order_.clear();
  unranked_.clear();
  unfinished_by_uid_.clear();
  touched_.clear();
  for (const auto& r : *unfinished) {
    Entry e;
    (void)FromRecord(r, &e);  // an unreadable spec was failed at load already
    auto was = old.find(r.id);
    const bool holds = e.job.state == JobState::kRunning || e.job.state == JobState::kStopping;
    if (was != old.end() && holds && was->second.job.attempt == e.job.attempt) {
      // The same attempt in memory: what only memory knows about it stays.
      Entry& w = was->second;
      e.shim_pid = w.shim_pid;
      e.adopted = w.adopted;
      e.intent = e.job.state == JobState::kStopping ? (w.intent == StopIntent::kNone ? StopIntent::kRequeue : w.intent)
                                                    : StopIntent::kNone;
      e.stop_deadline = w.stop_deadline;
      if (e.job.state == JobState::kStopping) e.stopping_for = w.stopping_for;
    } else if (e.job.state == JobState::kStopping) {
      e.intent = StopIntent::kRequeue;
    }
    Insert(std::move(e));
  }
  ClaimsFromMarks();
  dirty_ = true;
}


store::JobRecord JobService::ToRecord(const Entry& e) const {
  const sched::Job& job = e.job;
  store::JobRecord r;
  r.id = job.id;
  r.name = job.spec.name;
  r.user = job.spec.user;
  r.uid = job.spec.uid;
  r.state = sched::JobStateName(job.state);
  r.priority = job.spec.priority;
  r.spec_json = e.stored_spec;
  r.submitted = job.submitted;
  r.started = job.started;
  r.ended = job.ended;
  r.attempt = job.attempt;
  r.restarts = job.restarts;
  r.gpus_json = json(job.gpu_uuids).dump();
  r.exit_code = job.exit_code;
  r.exit_signal = job.exit_signal;
  r.reason = job.reason;
  return r;
}

}  // namespace gpuherd::daemon
