#include "sched/scheduler.h"

#include <algorithm>
#include <limits>
#include <unordered_map>

#include <fmt/format.h>

#include "sched/job_spec.h"

namespace gpuherd::sched {
namespace {

constexpr TimeMs kNever = std::numeric_limits<TimeMs>::max();

// Who holds a GPU and until when, from running jobs and this pass's starts.
struct Holding {
  JobId id = 0;
  const JobSpec* spec = nullptr;
  TimeMs started = 0;
  TimeMs end = kNever;         // expected release; kNever without a time limit
  bool stopping = false;
  std::vector<size_t> positions;
  int tenths_per_gpu() const { return spec->fractional() ? spec->gpu_tenths : kTenthsPerGpu; }
};

// The one reservation of EASY backfill.
struct Reservation {
  JobId job = 0;
  TimeMs at = kNever;
  std::vector<size_t> gpus;  // sorted positions
};

std::string JoinIds(const std::vector<JobId>& ids) {
  std::string out;
  for (JobId id : ids) out += (out.empty() ? "" : ", ") + std::to_string(id);
  return out;
}

std::string Demand(const JobSpec& spec) {
  if (spec.fractional()) {
    return fmt::format("{} GPU with {}", FormatGpuTenths(spec.gpu_tenths),
                       FormatBytes(spec.gpu_mem_bytes));
  }
  int k = spec.whole_gpus();
  return fmt::format("{} GPU{}", k, k == 1 ? "" : "s");
}

class Pass {
 public:
  Pass(const FleetState& fleet, const std::vector<RunningJob>& running, TimeMs now,
       const SchedulerConfig& config)
      : fleet_(fleet), now_(now), config_(config), index_(fleet, config.placement),
        holders_(fleet.gpus.size()) {
    for (size_t p = 0; p < fleet.gpus.size(); ++p) {
      int gpu = fleet.gpus[p].index;
      if (gpu < 0) continue;
      if (static_cast<size_t>(gpu) >= position_of_.size()) position_of_.resize(gpu + 1, -1);
      position_of_[gpu] = static_cast<int>(p);
    }
    holdings_.reserve(running.size() + 1024);
    for (const RunningJob& job : running) {
      Holding h{job.id, &job.spec, job.started, job.ExpectedEnd().value_or(kNever), job.stopping,
                {}};
      for (int gpu : job.gpus) {
        if (gpu >= 0 && static_cast<size_t>(gpu) < position_of_.size() && position_of_[gpu] >= 0) {
          h.positions.push_back(position_of_[gpu]);
        }
      }
      AddHolding(std::move(h));
      if (job.spec.gpu_tenths > 0) {
        user_tenths_[job.spec.user] += job.spec.gpu_tenths;
      }
    }
  }

  Decisions Run(const std::vector<PendingJob>& pending) {
    struct Entry {
      double priority;
      const PendingJob* job;
    };
    std::vector<Entry> order;
    order.reserve(pending.size());
    for (const PendingJob& job : pending) {
      order.push_back({ComputePriority(config_.weights, PriorityInputsOf(job, now_, config_)).total(),
                       &job});
    }
    std::sort(order.begin(), order.end(), [](const Entry& a, const Entry& b) {
      if (a.priority != b.priority) return a.priority > b.priority;
      if (a.job->submitted != b.job->submitted) return a.job->submitted < b.job->submitted;
      return a.job->id < b.job->id;
    });
    int rank = 0;
    std::vector<const PendingJob*> maintenance;
    for (const Entry& e : order) {
      if (!e.job->spec.pinned_gpus.empty()) maintenance.push_back(e.job);
    }
    std::sort(maintenance.begin(), maintenance.end(), [](const PendingJob* a, const PendingJob* b) {
      return a->submitted != b->submitted ? a->submitted < b->submitted : a->id < b->id;
    });
    for (const PendingJob* job : maintenance) {
      std::string reason = ConsiderPinned(*job);
      if (!reason.empty()) out_.waiting.push_back({job->id, 0, ++rank, std::move(reason)});
    }
    for (const Entry& e : order) {
      if (!e.job->spec.pinned_gpus.empty()) continue;
      std::string reason = Consider(*e.job);
      if (!reason.empty()) out_.waiting.push_back({e.job->id, e.priority, ++rank, std::move(reason)});
    }
    return std::move(out_);
  }

 private:
  // A maintenance job: claims its GPUs, starts when they are all idle.
  std::string ConsiderPinned(const PendingJob& job) {
    std::vector<size_t> positions;
    std::vector<std::string> problems;
    std::vector<JobId> holders;
    for (const std::string& uuid : job.spec.pinned_gpus) {
      auto it = std::find_if(fleet_.gpus.begin(), fleet_.gpus.end(),
                             [&](const GpuState& g) { return g.uuid == uuid; });
      if (it == fleet_.gpus.end()) {
        problems.push_back(fmt::format("GPU {} is not in this machine", uuid));
        continue;
      }
      size_t p = static_cast<size_t>(it - fleet_.gpus.begin());
      if (it->lost) problems.push_back(fmt::format("GPU {} is lost", it->index));
      if (claimed_.size() < fleet_.gpus.size()) claimed_.resize(fleet_.gpus.size());
      if (claimed_[p]) {
        problems.push_back(fmt::format("GPU {} is claimed by an earlier maintenance job", it->index));
      }
      for (size_t h : holders_[p]) holders.push_back(holdings_[h].id);
      positions.push_back(p);
    }
    for (size_t p : positions) {
      claimed_[p] = true;
      index_.Claim(p);
    }
    if (!problems.empty()) return "maintenance job waits: " + Join(problems);
    if (!holders.empty()) {
      std::sort(holders.begin(), holders.end());
      holders.erase(std::unique(holders.begin(), holders.end()), holders.end());
      return fmt::format("maintenance job waits for job{} {} to leave its GPUs; no new work "
                         "starts there meanwhile",
                         holders.size() == 1 ? "" : "s", JoinIds(holders));
    }
    StartDecision start{job.id, {}};
    for (size_t p : positions) start.gpus.push_back(fleet_.gpus[p].index);
    out_.starts.push_back(std::move(start));
    AddHolding({job.id, &job.spec, now_,
                job.spec.time_limit > 0 ? now_ + job.spec.time_limit : kNever, false, positions});
    return "";
  }

  static std::string Join(const std::vector<std::string>& parts) {
    std::string out;
    for (const std::string& s : parts) out += (out.empty() ? "" : "; ") + s;
    return out;
  }

  // Starts the job or returns why it waits.
  std::string Consider(const PendingJob& job) {
    const JobSpec& spec = job.spec;
    if (job.deps == Dependencies::kFailed) {
      return fmt::format("dependency job {} {}: this job cannot start; cancel it, or requeue job {}",
                         job.blocking_dep, JobStateName(job.blocking_dep_state), job.blocking_dep);
    }
    if (job.deps == Dependencies::kWaiting) {
      return fmt::format("depends on job {} ({})", job.blocking_dep,
                         JobStateName(job.blocking_dep_state));
    }
    if (config_.max_queued_jobs_per_user > 0 &&
        ++user_queued_[spec.user] > config_.max_queued_jobs_per_user) {
      return fmt::format("user limit: {} queued jobs are considered at a time; {} has more waiting "
                         "ahead of this one",
                         config_.max_queued_jobs_per_user, spec.user);
    }
    if (config_.max_running_gpus_per_user > 0 && spec.gpu_tenths > 0) {
      int held = user_tenths_[spec.user];
      if (held + spec.gpu_tenths > config_.max_running_gpus_per_user * kTenthsPerGpu) {
        return fmt::format("user limit: {} running GPUs ({} holds {})",
                           config_.max_running_gpus_per_user, spec.user, FormatGpuTenths(held));
      }
    }
    if (spec.gpu_tenths == 0) {
      Start(job, {});
      return "";
    }
    if (reservation_ && !config_.backfill) {
      return fmt::format("waits behind job {} (backfill is off)", reservation_->job);
    }
    const int need = spec.fractional() ? 1 : spec.whole_gpus();
    // Cheap test first: most of a long queue stops here once the GPUs are full.
    bool may_fit = spec.fractional() ? index_.AnyRoomFor(spec.gpu_tenths)
                                     : index_.FreeMatching(spec) >= need;
    if (may_fit) {
      bool ends_before = reservation_ && spec.time_limit > 0 && reservation_->at != kNever &&
                         now_ + spec.time_limit <= reservation_->at;
      std::span<const size_t> avoid;
      if (reservation_ && !ends_before) avoid = reservation_->gpus;
      // Counting first keeps a long queue behind a reservation cheap.
      bool room_beside = spec.fractional() || index_.FreeMatching(spec, avoid) >= need;
      if (room_beside) {
        if (std::optional<std::vector<size_t>> gpus = index_.Find(spec, avoid)) {
          Start(job, std::move(*gpus));
          return "";
        }
      }
      // A whole-GPU job got here with enough idle GPUs, so only `avoid` stops it.
      if (!avoid.empty() && (!spec.fractional() || index_.Find(spec))) return ReservationBlocks();
    }
    MatchCounts counts = index_.Count(spec);
    std::string waiting = fmt::format("waiting for {}: {}", Demand(spec), DescribeCounts(counts));
    if (counts.matching < need) {
      return fmt::format("{}; only {} GPU(s) here match its model, min_cc and gpu_mem, so it "
                         "cannot start: resubmit it asking for less",
                         waiting, counts.matching);
    }
    if (counts.free + counts.busy + counts.shared < need) return waiting;  // unusable GPUs
    if (reservation_) return waiting;
    // The highest job that fits here but not now: preempt for it, or reserve.
    if (std::string preempting = TryPreempt(job); !preempting.empty()) {
      return waiting + "; " + preempting;
    }
    if (!Reserve(job)) {
      return waiting + "; the GPUs it could use are claimed by a maintenance job (a burn-in) that runs first";
    }
    if (reservation_->at == kNever) {
      return waiting + "; next in line, but the jobs on the GPUs it needs have no time limit";
    }
    return waiting + fmt::format("; next in line, expected to start by {}",
                                 FormatClock(reservation_->at, now_));
  }

  std::string ReservationBlocks() const {
    if (reservation_->at == kNever) {
      return fmt::format("reservation for job {} blocks it (the GPUs it could use are held for "
                         "job {})",
                         reservation_->job, reservation_->job);
    }
    return fmt::format("reservation for job {} blocks it until {}; with a time limit under {} it "
                       "could start now",
                       reservation_->job, FormatClock(reservation_->at, now_),
                       FormatDuration(reservation_->at - now_));
  }

  void Start(const PendingJob& job, std::vector<size_t> positions) {
    index_.Take(job.spec, positions);
    StartDecision start{job.id, {}};
    for (size_t p : positions) start.gpus.push_back(fleet_.gpus[p].index);
    out_.starts.push_back(std::move(start));
    user_tenths_[job.spec.user] += job.spec.gpu_tenths;
    TimeMs end = job.spec.time_limit > 0 ? now_ + job.spec.time_limit : kNever;
    AddHolding({job.id, &job.spec, now_, end, false, std::move(positions)});
  }

  void AddHolding(Holding h) {
    for (size_t p : h.positions) holders_[p].push_back(holdings_.size());
    holdings_.push_back(std::move(h));
  }

  bool Suitable(size_t p, const JobSpec& spec) const {
    if (p < claimed_.size() && claimed_[p]) return false;
    return index_.usable(p) && MatchesJob(fleet_.gpus[p], spec);
  }

  std::tuple<int, double, size_t> PreferenceOf(size_t p) const {
    const GpuState& g = fleet_.gpus[p];
    return {-g.health_score.value_or(100), g.temp_c.value_or(0), p};
  }

  // Healthiest, then coolest first.
  std::vector<size_t> ByPreference(std::vector<size_t> positions) const {
    std::sort(positions.begin(), positions.end(),
              [this](size_t a, size_t b) { return PreferenceOf(a) < PreferenceOf(b); });
    return positions;
  }

  // When `p` has room for `tenths` (a whole GPU: 10): releases in end order.
  TimeMs RoomAt(size_t p, int tenths) const {
    int used = index_.tenths_in_use(p);
    if (used + tenths <= kTenthsPerGpu) return now_;
    std::vector<const Holding*> on;
    for (size_t h : holders_[p]) on.push_back(&holdings_[h]);
    std::sort(on.begin(), on.end(), [](auto* a, auto* b) { return a->end < b->end; });
    for (const Holding* h : on) {
      used -= h->tenths_per_gpu();
      if (used + tenths <= kTenthsPerGpu) return std::max(h->end, now_);
    }
    return kNever;
  }

  // False, reserving nothing, when too few suitable GPUs are left outside
  // the maintenance jobs' claims.
  bool Reserve(const PendingJob& job) {
    const JobSpec& spec = job.spec;
    const int need = spec.fractional() ? 1 : spec.whole_gpus();
    const int tenths = spec.fractional() ? spec.gpu_tenths : kTenthsPerGpu;
    std::vector<std::pair<TimeMs, size_t>> times;
    for (size_t p = 0; p < fleet_.gpus.size(); ++p) {
      if (Suitable(p, spec)) times.push_back({RoomAt(p, tenths), p});
    }
    Reservation r;
    r.job = job.id;
    // Earliest free first; the same time by preference, worst first, so that
    // walking backwards below meets the most preferred first.
    std::sort(times.begin(), times.end(), [this](const auto& a, const auto& b) {
      if (a.first != b.first) return a.first < b.first;
      return PreferenceOf(a.second) > PreferenceOf(b.second);
    });
    if (times.size() < static_cast<size_t>(need)) return false;
    r.at = times[need - 1].first;
    // Among the GPUs free by then, those busy now come first: free ones left
    // out of the reservation are what later jobs can backfill onto.
    std::vector<size_t> candidates;
    for (auto it = times.rbegin(); it != times.rend(); ++it) {
      if (it->first <= r.at) candidates.push_back(it->second);
    }
    r.gpus = ChooseConnectedSet(fleet_, candidates, need);
    std::sort(r.gpus.begin(), r.gpus.end());
    reservation_ = std::move(r);
    return true;
  }

  // Preempts the cheapest victims for `job`, reserving what they free.
  // Returns the reason text, or "" when preemption does not apply.
  std::string TryPreempt(const PendingJob& job) {
    if (!config_.preemption) return "";
    const JobSpec& spec = job.spec;
    const int need = spec.fractional() ? 1 : spec.whole_gpus();
    const int tenths = spec.fractional() ? spec.gpu_tenths : kTenthsPerGpu;
    // Remaining tenths per suitable GPU once the chosen victims (and jobs
    // already stopping) are gone.
    std::unordered_map<size_t, int> remaining;
    std::vector<size_t> candidates_h;
    std::vector<JobId> stopping;
    for (size_t p = 0; p < fleet_.gpus.size(); ++p) {
      if (!Suitable(p, spec)) continue;
      int used = index_.tenths_in_use(p);
      for (size_t h : holders_[p]) {
        if (holdings_[h].stopping) used -= holdings_[h].tenths_per_gpu();
      }
      remaining[p] = std::max(used, 0);
    }
    int room_count = 0;
    for (const auto& [p, used] : remaining) room_count += used + tenths <= kTenthsPerGpu;
    auto satisfied = [&room_count] { return room_count; };
    for (size_t h = 0; h < holdings_.size(); ++h) {
      const Holding& hold = holdings_[h];
      if (hold.stopping) {
        for (size_t p : hold.positions) {
          if (remaining.count(p)) {
            stopping.push_back(hold.id);
            break;
          }
        }
        continue;
      }
      if (!hold.spec->preemptible || hold.spec->priority >= spec.priority || hold.started >= now_) {
        continue;
      }
      bool touches = std::any_of(hold.positions.begin(), hold.positions.end(),
                                 [&](size_t p) { return remaining.count(p) > 0; });
      if (touches) candidates_h.push_back(h);
    }
    if (satisfied() >= need && !stopping.empty()) {
      std::sort(stopping.begin(), stopping.end());
      stopping.erase(std::unique(stopping.begin(), stopping.end()), stopping.end());
      return fmt::format("waiting for job{} {} to stop", stopping.size() == 1 ? "" : "s",
                         JoinIds(stopping));
    }
    if (candidates_h.empty()) return "";
    auto cost = [&](size_t h) {
      const Holding& hold = holdings_[h];
      return static_cast<double>(hold.spec->gpu_tenths) / kTenthsPerGpu *
             static_cast<double>(now_ - hold.started) / kSecondMs;
    };
    auto suitable_held = [&](size_t h) {
      int n = 0;
      for (size_t p : holdings_[h].positions) n += remaining.count(p) > 0;
      return std::max(n, 1);
    };
    // Greedy by lost work per suitable GPU freed, then lowest urgency.
    std::sort(candidates_h.begin(), candidates_h.end(), [&](size_t a, size_t b) {
      double ca = cost(a) / suitable_held(a), cb = cost(b) / suitable_held(b);
      if (ca != cb) return ca < cb;
      if (holdings_[a].spec->priority != holdings_[b].spec->priority) {
        return holdings_[a].spec->priority < holdings_[b].spec->priority;
      }
      return holdings_[a].id < holdings_[b].id;
    });
    auto apply = [&](size_t h, int sign) {
      for (size_t p : holdings_[h].positions) {
        if (auto it = remaining.find(p); it != remaining.end()) {
          bool had_room = it->second + tenths <= kTenthsPerGpu;
          it->second -= sign * holdings_[h].tenths_per_gpu();
          room_count += (it->second + tenths <= kTenthsPerGpu) - had_room;
        }
      }
    };
    std::vector<size_t> victims;
    for (size_t h : candidates_h) {
      if (satisfied() >= need) break;
      victims.push_back(h);
      apply(h, +1);
    }
    if (satisfied() < need) return "";
    // Drop victims that turned out not to be needed, dearest first.
    std::vector<size_t> by_cost = victims;
    std::sort(by_cost.begin(), by_cost.end(), [&](size_t a, size_t b) { return cost(a) > cost(b); });
    for (size_t h : by_cost) {
      apply(h, -1);
      if (satisfied() >= need) {
        std::erase(victims, h);
      } else {
        apply(h, +1);
      }
    }
    PreemptDecision decision;
    decision.for_job = job.id;
    TimeMs at = now_;
    for (size_t h : victims) {
      decision.victims.push_back(holdings_[h].id);
      at = std::max(at, now_ + holdings_[h].spec->checkpoint_grace);
    }
    std::sort(decision.victims.begin(), decision.victims.end());
    std::vector<size_t> room;
    for (const auto& [p, used] : remaining) {
      if (used + tenths <= kTenthsPerGpu) room.push_back(p);
    }
    std::sort(room.begin(), room.end());
    Reservation r;
    r.job = job.id;
    r.at = at;
    r.gpus = ChooseConnectedSet(fleet_, ByPreference(std::move(room)), need);
    std::sort(r.gpus.begin(), r.gpus.end());
    reservation_ = std::move(r);
    std::string reason = fmt::format("preempting job{} {} (lower urgency, preemptible) to make room",
                                     decision.victims.size() == 1 ? "" : "s",
                                     JoinIds(decision.victims));
    out_.preemptions.push_back(std::move(decision));
    return reason;
  }

  const FleetState& fleet_;
  const TimeMs now_;
  const SchedulerConfig& config_;
  PlacementIndex index_;
  std::vector<int> position_of_;             // GPU index → position
  std::vector<Holding> holdings_;
  std::vector<std::vector<size_t>> holders_; // position → holdings_ entries
  std::unordered_map<std::string, int> user_tenths_;
  std::unordered_map<std::string, int> user_queued_;
  std::optional<Reservation> reservation_;
  std::vector<bool> claimed_;                // positions held for maintenance jobs
  Decisions out_;
};

}  // namespace

PriorityInputs PriorityInputsOf(const PendingJob& job, TimeMs now, const SchedulerConfig& config) {
  PriorityInputs in;
  in.urgency = job.spec.priority;
  if (auto it = config.user_levels.find(job.spec.user); it != config.user_levels.end()) {
    in.user_level = it->second;
  }
  in.waited = now - job.submitted;
  in.user_gpu_hours = job.user_gpu_hours;
  return in;
}

Decisions Schedule(const FleetState& fleet, const std::vector<PendingJob>& pending,
                   const std::vector<RunningJob>& running, TimeMs now,
                   const SchedulerConfig& config) {
  return Pass(fleet, running, now, config).Run(pending);
}

Status CheckQueueLimit(const std::string& user, int queued_jobs, const SchedulerConfig& config) {
  if (config.max_queued_jobs_per_user > 0 && queued_jobs >= config.max_queued_jobs_per_user) {
    return ResourceExhausted(fmt::format(
        "user {} already has {} queued jobs, the limit is {}; wait for some to start or cancel "
        "some",
        user, queued_jobs, config.max_queued_jobs_per_user));
  }
  return Status::Ok();
}

std::string FormatClock(TimeMs t, TimeMs now) {
  std::string iso = FormatTimeUtc(t);  // 2026-12-02T12:33:26.123Z
  if (t >= now - kHourMs * 24 && t <= now + kHourMs * 24) return iso.substr(11, 5) + " UTC";
  return iso.substr(0, 10) + " " + iso.substr(11, 5) + " UTC";
}

}  // namespace gpuherd::sched
