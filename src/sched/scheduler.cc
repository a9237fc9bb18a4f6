#include "sched/scheduler.h"

#include <algorithm>
#include <iterator>
#include <limits>
#include <map>
#include <string_view>
#include <tuple>
#include <unordered_map>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "sched/job_spec.h"

namespace gpuherd::sched {
namespace {

constexpr TimeMs kNever = std::numeric_limits<TimeMs>::max();
// Rule 11 keeps answers only after this many in a row found nothing changed.
constexpr int kStillBeforeCaching = 8;

// Who holds a GPU and until when, from running jobs and this pass's starts.
struct Holding {
  JobId id = 0;
  const JobSpec* spec = nullptr;
  TimeMs started = 0;
  TimeMs end = kNever;         // expected release; kNever without a time limit
  bool stopping = false;
  std::vector<size_t> positions;
  int twentieths_per_gpu() const { return spec->fractional() ? spec->gpu_twentieths : kTwentiethsPerGpu; }
};

// The one reservation of EASY backfill.
struct Reservation {
  JobId job = 0;
  TimeMs at = kNever;
  std::vector<size_t> gpus;  // sorted positions
};

// What a pending job asks of the GPUs, plus what decides its answer beyond
// the pass's state (rule 11): jobs with equal keys get equal answers.
struct DemandKey {
  int twentieths = 0;
  uint64_t gpu_mem = 0;
  std::string_view model;  // into the job's spec, which outlives the pass
  int min_cc = -1;
  bool mixed = false;
  int urgency = 0;
  bool ends_before = false;
  bool operator==(const DemandKey&) const = default;
};
struct DemandKeyHash {
  size_t operator()(const DemandKey& k) const {
    size_t h = std::hash<std::string_view>()(k.model);
    auto mix = [&h](uint64_t v) { h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2); };
    mix(static_cast<uint64_t>(k.twentieths));
    mix(k.gpu_mem);
    mix(static_cast<uint64_t>(k.min_cc));
    mix(static_cast<uint64_t>(k.urgency) * 4 + k.mixed * 2 + k.ends_before);
    return h;
  }
};

std::string JoinIds(const std::vector<JobId>& ids) {
  std::string out;
  for (JobId id : ids) out += (out.empty() ? "" : ", ") + std::to_string(id);
  return out;
}

std::string Plural(size_t n, const char* word) {
  return fmt::format("{}{}", word, n == 1 ? "" : "s");
}

std::vector<JobId> SortedUnique(std::vector<JobId> ids) {
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  return ids;
}

std::string Demand(const JobSpec& spec) {
  if (spec.fractional()) {
    return fmt::format("{} GPU with {}", FormatGpuTwentieths(spec.gpu_twentieths),
                       FormatBytes(spec.gpu_mem_bytes));
  }
  int k = spec.whole_gpus();
  return fmt::format("{} GPU{}", k, k == 1 ? "" : "s");
}

int NeedOf(const JobSpec& spec) { return spec.fractional() ? 1 : spec.whole_gpus(); }
int TwentiethsOf(const JobSpec& spec) { return spec.fractional() ? spec.gpu_twentieths : kTwentiethsPerGpu; }

int GroupAt(const GpuState& g, int level) {
  switch (level) {
    case 0: return g.nvlink_island;
    case 1: return g.pcie_switch;
    case 2: return g.host_bridge;
    default: return g.numa_node ? *g.numa_node : -1;
  }
}

class Pass {
 public:
  Pass(const FleetState& fleet, const std::vector<RunningJob>& running, TimeMs now,
       const SchedulerConfig& config)
      : fleet_(fleet), now_(now), config_(config), index_(fleet, config.placement),
        holders_(fleet.gpus.size()), claimed_(fleet.gpus.size()),
        claim_owner_(fleet.gpus.size()), model_of_(fleet.gpus.size()) {
    std::unordered_map<std::string, int> models;
    for (size_t p = 0; p < fleet.gpus.size(); ++p) {
      // Neighbours are mostly of one model: compare before hashing.
      if (p > 0 && fleet.gpus[p].name == fleet.gpus[p - 1].name) {
        model_of_[p] = model_of_[p - 1];
      } else {
        model_of_[p] = models.try_emplace(fleet.gpus[p].name, static_cast<int>(models.size()))
                           .first->second;
      }
      if (fleet.gpus[p].suspect) suspect_.push_back(p);  // sorted: p rises
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
        if (std::optional<size_t> p = PositionOf(gpu)) h.positions.push_back(*p);
      }
      AddHolding(std::move(h));
      if (job.spec.gpu_twentieths > 0) {
        user_twentieths_[job.spec.user] += job.spec.gpu_twentieths;
      }
      cpus_used_ += job.spec.cpus;
      mem_used_ += job.spec.mem_bytes;
      if (job.stopping && job.stopping_for != 0) stopping_for_[job.stopping_for].push_back(job.id);
    }
  }

  Decisions Run(const std::vector<PendingJob>& pending) {
    // The sort keys sit in the entry: a deep queue sorts without chasing pointers.
    struct Entry {
      double priority;
      TimeMs submitted;
      JobId id;
      const PendingJob* job;
    };
    std::vector<Entry> order;
    order.reserve(pending.size());
    for (const PendingJob& job : pending) {
      order.push_back({ComputePriority(config_.weights, PriorityInputsOf(job, now_, config_)).total(),
                       job.submitted, job.id, &job});
    }
    std::sort(order.begin(), order.end(), [](const Entry& a, const Entry& b) {
      if (a.priority != b.priority) return a.priority > b.priority;
      if (a.submitted != b.submitted) return a.submitted < b.submitted;
      return a.id < b.id;
    });
    out_.waiting.reserve(pending.size());
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
    // Rule 6: claims from earlier passes, in queue order (the first wins a
    // GPU two claims name, which the daemon never sends).
    for (const Entry& e : order) {
      if (e.job->claimed_gpus.empty() || !e.job->spec.pinned_gpus.empty()) continue;
      if (std::optional<std::vector<size_t>> positions = ValidClaim(*e.job)) {
        for (size_t p : *positions) ClaimFor(e.job->id, p);
        claims_[e.job->id] = std::move(*positions);
      } else {
        out_.dropped_claims.push_back(e.job->id);
      }
    }
    for (const Entry& e : order) {
      if (!e.job->spec.pinned_gpus.empty()) continue;
      std::string reason = Consider(*e.job);
      if (!reason.empty()) out_.waiting.push_back({e.job->id, e.priority, ++rank, std::move(reason)});
    }
    if (reservation_) {
      ReservationDecision r{reservation_->job, std::nullopt, {}};
      if (reservation_->at != kNever) r.at = reservation_->at;
      for (size_t p : reservation_->gpus) r.gpus.push_back(fleet_.gpus[p].index);
      out_.reservation = std::move(r);
    }
    return std::move(out_);
  }

 private:
  std::optional<size_t> PositionOf(int gpu) const {
    if (gpu < 0 || static_cast<size_t>(gpu) >= position_of_.size() || position_of_[gpu] < 0) {
      return std::nullopt;
    }
    return static_cast<size_t>(position_of_[gpu]);
  }

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
    Changed();
    if (!problems.empty()) return "maintenance job waits: " + Join(problems);
    if (!holders.empty()) {
      holders = SortedUnique(std::move(holders));
      return fmt::format("maintenance job waits for job{} {} to leave its GPUs; no new work "
                         "starts there meanwhile",
                         holders.size() == 1 ? "" : "s", JoinIds(holders));
    }
    StartDecision start{job.id, {}};
    for (size_t p : positions) start.gpus.push_back(fleet_.gpus[p].index);
    out_.starts.push_back(std::move(start));
    cpus_used_ += job.spec.cpus;
    mem_used_ += job.spec.mem_bytes;
    AddHolding({job.id, &job.spec, now_,
                job.spec.time_limit > 0 ? now_ + job.spec.time_limit : kNever, false, positions});
    return "";
  }

  static std::string Join(const std::vector<std::string>& parts) {
    std::string out;
    for (const std::string& s : parts) out += (out.empty() ? "" : "; ") + s;
    return out;
  }

  // The twentieths that jobs not stopping hold on `p`.
  int StayingTwentieths(size_t p) const {
    int used = 0;
    for (size_t h : holders_[p]) {
      if (!holdings_[h].stopping) used += holdings_[h].twentieths_per_gpu();
    }
    return used;
  }

  // Rule 6: the claimed positions, or std::nullopt when the claim must go.
  std::optional<std::vector<size_t>> ValidClaim(const PendingJob& job) const {
    const JobSpec& spec = job.spec;
    if (spec.gpu_twentieths <= 0 || job.claimed_gpus.size() != static_cast<size_t>(NeedOf(spec))) {
      return std::nullopt;
    }
    std::vector<size_t> positions;
    for (int gpu : job.claimed_gpus) {
      std::optional<size_t> p = PositionOf(gpu);
      if (!p || claimed_[*p] || claim_owner_[*p] != 0) return std::nullopt;
      const GpuState& g = fleet_.gpus[*p];
      GpuBlock block = CheckGpu(g, config_.placement);
      // Heat passes; a lost, drained or unhealthy GPU does not come back soon.
      if (block == GpuBlock::kLost || block == GpuBlock::kDrained || block == GpuBlock::kUnhealthy) {
        return std::nullopt;
      }
      if (!MatchesJob(g, spec)) return std::nullopt;
      if (StayingTwentieths(*p) + TwentiethsOf(spec) > kTwentiethsPerGpu) return std::nullopt;
      if (!positions.empty() && spec.one_model() && model_of_[*p] != model_of_[positions[0]]) {
        return std::nullopt;
      }
      positions.push_back(*p);
    }
    std::sort(positions.begin(), positions.end());
    if (std::adjacent_find(positions.begin(), positions.end()) != positions.end()) return std::nullopt;
    return positions;
  }

  void ClaimFor(JobId job, size_t p) {
    claim_owner_[p] = job;
    index_.Claim(p);
    claim_positions_.push_back(p);
    Changed();
  }

  // Rule 10: whether the machine's CPUs and memory have room; else why not.
  std::string CheckHost(const JobSpec& spec) const {
    if (fleet_.host_cpus > 0 && spec.cpus > 0) {
      if (spec.cpus > fleet_.host_cpus) {
        return fmt::format("asks for {} CPUs but this machine has {}, so it cannot start: "
                           "resubmit it asking for less",
                           spec.cpus, fleet_.host_cpus);
      }
      if (cpus_used_ + spec.cpus > fleet_.host_cpus) {
        return fmt::format("waiting for {} {}: {} of {} free", spec.cpus, Plural(spec.cpus, "CPU"),
                           std::max<int64_t>(fleet_.host_cpus - cpus_used_, 0), fleet_.host_cpus);
      }
    }
    if (fleet_.host_mem_bytes > 0 && spec.mem_bytes > 0) {
      if (spec.mem_bytes > fleet_.host_mem_bytes) {
        return fmt::format("asks for {} of host memory but this machine has {}, so it cannot "
                           "start: resubmit it asking for less",
                           FormatBytes(spec.mem_bytes), FormatBytes(fleet_.host_mem_bytes));
      }
      if (mem_used_ + spec.mem_bytes > fleet_.host_mem_bytes) {
        uint64_t free = mem_used_ < fleet_.host_mem_bytes ? fleet_.host_mem_bytes - mem_used_ : 0;
        return fmt::format("waiting for {} of host memory: {} of {} free",
                           FormatBytes(spec.mem_bytes), FormatBytes(free),
                           FormatBytes(fleet_.host_mem_bytes));
      }
    }
    return "";
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
    if (config_.max_running_gpus_per_user > 0 && spec.gpu_twentieths > 0) {
      int held = user_twentieths_[spec.user];
      if (held + spec.gpu_twentieths > config_.max_running_gpus_per_user * kTwentiethsPerGpu) {
        return fmt::format("user limit: {} running GPUs ({} holds {})",
                           config_.max_running_gpus_per_user, spec.user, FormatGpuTwentieths(held));
      }
    }
    if (std::string host = CheckHost(spec); !host.empty()) return host;
    if (auto claim = claims_.find(job.id); claim != claims_.end()) {
      return ConsiderClaimed(job, claim->second);
    }
    if (spec.gpu_twentieths == 0) {
      Start(job, {});
      return "";
    }
    if (reservation_ && !config_.backfill) {
      return fmt::format("waits behind job {} (backfill is off)", reservation_->job);
    }
    const bool ends_before = reservation_ && spec.time_limit > 0 && reservation_->at != kNever &&
                             now_ + spec.time_limit <= reservation_->at;
    // Rule 11: the same demand in an unchanged pass gets the same answer.
    // A job with victims of its own stopping is answered for itself.
    const bool cacheable = !stopping_for_.count(job.id);
    DemandKey key;
    if (cacheable) {
      // Urgency counts only for preemption, which waits while a reservation stands.
      key = {spec.gpu_twentieths, spec.gpu_mem_bytes, spec.model, spec.min_cc.value_or(-1),
             spec.mixed_models, reservation_ ? 0 : spec.priority, ends_before};
      if (!answers_.empty()) {
        if (auto hit = answers_.find(key); hit != answers_.end()) return hit->second;
      }
    }
    const uint64_t generation = generation_;
    std::string reason = ConsiderGpus(job, ends_before);
    // Kept once the pass has been still for a while: while jobs keep starting
    // the answers would be thrown away before anyone asks again.
    if (cacheable && !reason.empty() && generation == generation_ &&
        ++still_for_ >= kStillBeforeCaching) {
      answers_.emplace(key, reason);
    }
    return reason;
  }

  // The GPU part of Consider: starts, preempts, reserves or explains.
  std::string ConsiderGpus(const PendingJob& job, bool ends_before) {
    const JobSpec& spec = job.spec;
    const int need = NeedOf(spec);
    // Cheap test first: most of a long queue stops here once the GPUs are full.
    bool may_fit = spec.fractional() ? index_.AnyRoomFor(spec.gpu_twentieths)
                                     : index_.FreeMatching(spec) >= need;
    if (may_fit) {
      std::span<const size_t> avoid;
      if (reservation_ && !ends_before) avoid = reservation_->gpus;
      // Rule 12: a long job tries the GPUs that are not suspect first.
      if (!suspect_.empty() && IsLong(spec)) {
        std::vector<size_t> elsewhere;
        std::set_union(avoid.begin(), avoid.end(), suspect_.begin(), suspect_.end(),
                       std::back_inserter(elsewhere));
        if (spec.fractional() || index_.FreeMatching(spec, elsewhere) >= need) {
          if (std::optional<std::vector<size_t>> gpus = index_.Find(spec, elsewhere)) {
            Start(job, std::move(*gpus));
            return "";
          }
        }
      }
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
    if (spec.one_model() && index_.model_count() > 1) {
      // Rule 9: said only where the models split what the counts show.
      PlacementIndex::ModelCounts models = index_.LargestModel(spec);
      if (models.most < need) {
        return fmt::format("{}; needs {} GPUs of one model; at most {} are {} (submit it with "
                           "--mixed-models, or mixed_models: true in its spec, to mix), so it cannot start as it is",
                           waiting, need, models.most, models.name);
      }
      const int usable = counts.free + counts.busy + counts.shared;
      if (models.most_usable < need && usable >= need) {
        return fmt::format("{}; needs {} GPUs of one model; at most {} usable are {}", waiting,
                           need, models.most_usable, models.usable_name);
      }
    }
    waiting += ClaimNote(spec);
    if (counts.free + counts.busy + counts.shared < need) return waiting;  // unusable GPUs
    if (reservation_) return waiting;
    // The highest job that fits here but not now: preempt for it, or reserve.
    std::vector<JobId> stopping;
    if (std::string preempting = TryPreempt(job, &stopping); !preempting.empty()) {
      return waiting + "; " + preempting;
    }
    if (!Reserve(job)) {
      if (HasMaintenanceClaim(spec)) {
        return waiting + "; the GPUs it could use are claimed by a maintenance job (a burn-in) "
                         "that runs first";
      }
      return waiting;
    }
    std::string stop_note;
    if (!stopping.empty()) {
      stop_note = fmt::format("; waiting for {} {} to stop", Plural(stopping.size(), "job"),
                              JoinIds(stopping));
    }
    if (reservation_->at == kNever) {
      return waiting + stop_note + "; next in line, but the jobs on the GPUs it needs have no time limit";
    }
    return waiting + fmt::format("{}{} expected to start by {}", stop_note,
                                 stop_note.empty() ? "; next in line," : ",",
                                 FormatClock(reservation_->at, now_));
  }

  // Rule 6: the job starts on its claimed GPUs once they are all free.
  std::string ConsiderClaimed(const PendingJob& job, const std::vector<size_t>& positions) {
    const JobSpec& spec = job.spec;
    std::vector<JobId> holders;
    std::vector<std::string> problems;
    for (size_t p : positions) {
      const GpuState& g = fleet_.gpus[p];
      int used = 0;
      uint64_t promised = 0;
      std::vector<JobId> here, leaving;  // leaving: the stopping ones it waits for
      for (size_t h : holders_[p]) {
        used += holdings_[h].twentieths_per_gpu();
        if (holdings_[h].spec->fractional()) promised += holdings_[h].spec->gpu_mem_bytes;
        here.push_back(holdings_[h].id);
        if (holdings_[h].stopping) leaving.push_back(holdings_[h].id);
      }
      if (!leaving.empty()) here = std::move(leaving);
      // A whole GPU needs every holder gone; a fraction only its room.
      bool room = spec.fractional()
                      ? used + spec.gpu_twentieths <= kTwentiethsPerGpu &&
                            g.memory_total_bytes >=
                                std::max(g.memory_used_bytes, promised) + spec.gpu_mem_bytes
                      : here.empty();
      if (!room) holders.insert(holders.end(), here.begin(), here.end());
      if (!index_.usable(p)) {
        problems.push_back(fmt::format("GPU {} is {}", g.index,
                                       CheckGpu(g, config_.placement) == GpuBlock::kTooHot
                                           ? "too hot" : "throttling for heat"));
      }
    }
    if (holders.empty() && problems.empty()) {
      Start(job, positions);
      return "";
    }
    std::vector<int> indices;
    for (size_t p : positions) indices.push_back(fleet_.gpus[p].index);
    if (!holders.empty()) {
      holders = SortedUnique(std::move(holders));
      problems.insert(problems.begin(),
                      fmt::format("waiting for {} {} to leave {} {}", Plural(holders.size(), "job"),
                                  JoinIds(holders), Plural(indices.size(), "GPU"),
                                  fmt::join(indices, ", ")));
    }
    return fmt::format("{}, held for it since it preempted jobs to get them", Join(problems));
  }

  // "; GPU 3 is claimed for job 12" for matching GPUs claimed by preemptors.
  std::string ClaimNote(const JobSpec& spec) const {
    if (claim_positions_.empty()) return "";
    std::map<JobId, std::vector<int>> by_owner;
    for (size_t p : claim_positions_) {
      if (MatchesJob(fleet_.gpus[p], spec)) by_owner[claim_owner_[p]].push_back(fleet_.gpus[p].index);
    }
    std::string out;
    for (const auto& [owner, gpus] : by_owner) {
      out += fmt::format("; {} {} {} claimed for job {}", Plural(gpus.size(), "GPU"),
                         fmt::join(gpus, ", "), gpus.size() == 1 ? "is" : "are", owner);
    }
    return out;
  }

  bool HasMaintenanceClaim(const JobSpec& spec) const {
    for (size_t p = 0; p < claimed_.size(); ++p) {
      if (claimed_[p] && MatchesJob(fleet_.gpus[p], spec)) return true;
    }
    return false;
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
    user_twentieths_[job.spec.user] += job.spec.gpu_twentieths;
    cpus_used_ += job.spec.cpus;
    mem_used_ += job.spec.mem_bytes;
    TimeMs end = job.spec.time_limit > 0 ? now_ + job.spec.time_limit : kNever;
    if (!positions.empty()) Changed();
    AddHolding({job.id, &job.spec, now_, end, false, std::move(positions)});
  }

  void AddHolding(Holding h) {
    for (size_t p : h.positions) holders_[p].push_back(holdings_.size());
    holdings_.push_back(std::move(h));
  }

  // Anything a cached answer (rule 11) depends on changed.
  void Changed() {
    ++generation_;
    still_for_ = 0;
    if (!answers_.empty()) answers_.clear();
  }

  // Rule 12: no time limit, or one above short_job_max.
  bool IsLong(const JobSpec& spec) const {
    return spec.time_limit <= 0 || spec.time_limit > config_.short_job_max;
  }
  // Rule 12 applies: a long job, and some GPU is suspect.
  bool AvoidsSuspect(const JobSpec& spec) const { return !suspect_.empty() && IsLong(spec); }
  bool Suspect(size_t p) const { return std::binary_search(suspect_.begin(), suspect_.end(), p); }
  int SuspectIn(const std::vector<size_t>& positions) const {
    return static_cast<int>(std::count_if(positions.begin(), positions.end(), [this](size_t p) { return Suspect(p); }));
  }
  // `positions` less the suspect ones, in the same order.
  std::vector<size_t> WithoutSuspect(const std::vector<size_t>& positions) const {
    std::vector<size_t> out;
    out.reserve(positions.size());
    for (size_t p : positions) {
      if (!Suspect(p)) out.push_back(p);
    }
    return out;
  }

  bool Suitable(size_t p, const JobSpec& spec) const {
    if (claimed_[p] || claim_owner_[p] != 0) return false;
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

  // How well a set is connected: its worst pair, then the sum of its pairs
  // (lower is better), as placement ranks sets.
  std::pair<int, int> Connectivity(const std::vector<size_t>& set) const {
    int worst = 0, sum = 0;
    for (size_t i = 0; i < set.size(); ++i) {
      for (size_t j = i + 1; j < set.size(); ++j) {
        int link = static_cast<int>(fleet_.LinkBetween(set[i], set[j]));
        worst = std::max(worst, link);
        sum += link;
      }
    }
    return {worst, sum};
  }

  // When `p` has room for `twentieths` (a whole GPU: 20): releases in end order.
  TimeMs RoomAt(size_t p, int twentieths) const {
    int used = index_.twentieths_in_use(p);
    if (used + twentieths <= kTwentiethsPerGpu) return now_;
    std::vector<const Holding*> on;
    for (size_t h : holders_[p]) on.push_back(&holdings_[h]);
    std::sort(on.begin(), on.end(), [](auto* a, auto* b) { return a->end < b->end; });
    for (const Holding* h : on) {
      used -= h->twentieths_per_gpu();
      if (used + twentieths <= kTwentiethsPerGpu) return std::max(h->end, now_);
    }
    return kNever;
  }

  // False, reserving nothing, when too few suitable GPUs are left outside
  // the claims (maintenance jobs' and preemptors').
  bool Reserve(const PendingJob& job) {
    const JobSpec& spec = job.spec;
    const int need = NeedOf(spec);
    const int twentieths = TwentiethsOf(spec);
    const bool avoid_suspect = AvoidsSuspect(spec);
    // Per model when the job keeps to one (rule 9), else one group.
    std::unordered_map<int, std::vector<std::pair<TimeMs, size_t>>> times;
    for (size_t p = 0; p < fleet_.gpus.size(); ++p) {
      if (Suitable(p, spec)) times[spec.one_model() ? model_of_[p] : 0].push_back({RoomAt(p, twentieths), p});
    }
    std::optional<Reservation> best;
    std::pair<int, int> best_links;
    int best_suspect = 0;
    for (auto& [model, list] : times) {
      if (list.size() < static_cast<size_t>(need)) continue;
      // Earliest free first; the same time by preference, worst first, so
      // that walking backwards below meets the most preferred first.
      std::sort(list.begin(), list.end(), [this](const auto& a, const auto& b) {
        if (a.first != b.first) return a.first < b.first;
        return PreferenceOf(a.second) > PreferenceOf(b.second);
      });
      Reservation r;
      r.job = job.id;
      r.at = list[need - 1].first;
      // Among the GPUs free by then, those busy now come first: free ones
      // left out of the reservation are what later jobs can backfill onto.
      std::vector<size_t> candidates;
      for (auto it = list.rbegin(); it != list.rend(); ++it) {
        if (it->first <= r.at) candidates.push_back(it->second);
      }
      // Rule 12: a long job's GPUs are chosen as if the suspect ones were not
      // there, as it will be placed when they are free; the time stays.
      if (avoid_suspect) r.gpus = ChooseConnectedSet(fleet_, WithoutSuspect(candidates), need);
      if (r.gpus.empty()) r.gpus = ChooseConnectedSet(fleet_, candidates, need);
      std::sort(r.gpus.begin(), r.gpus.end());
      std::pair<int, int> links = Connectivity(r.gpus);
      const int suspect = avoid_suspect ? SuspectIn(r.gpus) : 0;
      if (!best || std::tie(r.at, suspect, links, r.gpus) <
                       std::tie(best->at, best_suspect, best_links, best->gpus)) {
        best = std::move(r);
        best_links = links;
        best_suspect = suspect;
      }
    }
    if (!best) return false;
    reservation_ = std::move(best);
    Changed();
    return true;
  }

  // One way to free GPUs for a preemptor within one group of GPUs.
  struct Option {
    std::vector<size_t> victims;  // holdings_ entries
    std::vector<size_t> gpus;     // sorted positions
    std::pair<int, int> links;
    double cost = 0;
    int urgency = 0;  // sum of the victims'
    int suspect = 0;  // suspect GPUs in `gpus`, counted for long jobs (rule 12)
    auto tie() const { return std::tie(links, cost, urgency, suspect, gpus); }
  };

  // Lost work if `h` is preempted: GPU-seconds since it started.
  double Cost(size_t h) const {
    const Holding& hold = holdings_[h];
    return static_cast<double>(hold.spec->gpu_twentieths) / kTwentiethsPerGpu *
           static_cast<double>(now_ - hold.started) / kSecondMs;
  }

  // The cheapest victims that free `need` GPUs of `group` (rule 5's greedy:
  // by lost work per GPU freed, then lowest urgency; then the ones not
  // needed are dropped, dearest first). `remaining` holds the twentieths of
  // staying jobs per position and is restored before returning.
  std::optional<Option> CheapestIn(const std::vector<size_t>& group, const JobSpec& spec,
                                   std::vector<int>& remaining) {
    const int need = NeedOf(spec);
    const int twentieths = TwentiethsOf(spec);
    std::vector<size_t> candidates;
    for (size_t p : group) {
      in_group_[p] = true;
      for (size_t h : holders_[p]) {
        if (IsCandidate(h, spec)) candidates.push_back(h);
      }
    }
    std::sort(candidates.begin(), candidates.end());
    candidates.erase(std::unique(candidates.begin(), candidates.end()), candidates.end());
    int room = 0;
    for (size_t p : group) room += remaining[p] + twentieths <= kTwentiethsPerGpu;
    auto held_here = [&](size_t h) {
      int n = 0;
      for (size_t p : holdings_[h].positions) n += in_group_[p];
      return std::max(n, 1);
    };
    const bool avoid_suspect = AvoidsSuspect(spec);
    // Rule 12: of victims otherwise equal, a long job stops the one whose GPUs
    // are not suspect.
    auto suspect_here = [&](size_t h) {
      int n = 0;
      for (size_t p : holdings_[h].positions) n += in_group_[p] && Suspect(p);
      return n;
    };
    std::vector<std::pair<double, size_t>> by_rate;  // (lost work per GPU freed, holding)
    for (size_t h : candidates) by_rate.push_back({Cost(h) / held_here(h), h});
    std::sort(by_rate.begin(), by_rate.end(), [&](const auto& a, const auto& b) {
      if (a.first != b.first) return a.first < b.first;
      const Holding& x = holdings_[a.second];
      const Holding& y = holdings_[b.second];
      if (x.spec->priority != y.spec->priority) return x.spec->priority < y.spec->priority;
      if (avoid_suspect) {
        if (int sx = suspect_here(a.second), sy = suspect_here(b.second); sx != sy) return sx < sy;
      }
      return x.id < y.id;
    });
    for (size_t i = 0; i < by_rate.size(); ++i) candidates[i] = by_rate[i].second;
    auto apply = [&](size_t h, int sign) {
      for (size_t p : holdings_[h].positions) {
        if (!in_group_[p]) continue;
        bool had_room = remaining[p] + twentieths <= kTwentiethsPerGpu;
        remaining[p] -= sign * holdings_[h].twentieths_per_gpu();
        room += (remaining[p] + twentieths <= kTwentiethsPerGpu) - had_room;
      }
    };
    std::vector<size_t> victims;
    for (size_t h : candidates) {
      if (room >= need) break;
      victims.push_back(h);
      apply(h, +1);
    }
    std::optional<Option> option;
    if (room >= need) {
      std::vector<size_t> by_cost = victims;
      std::stable_sort(by_cost.begin(), by_cost.end(),
                       [&](size_t a, size_t b) { return Cost(a) > Cost(b); });
      for (size_t h : by_cost) {
        apply(h, -1);
        if (room >= need) {
          std::erase(victims, h);
        } else {
          apply(h, +1);
        }
      }
      std::vector<size_t> with_room;
      for (size_t p : group) {
        if (remaining[p] + twentieths <= kTwentiethsPerGpu) with_room.push_back(p);
      }
      with_room = ByPreference(std::move(with_room));
      option = OptionOn(ChooseConnectedSet(fleet_, with_room, need), victims, avoid_suspect);
      // Rule 12: the same room without the suspect GPUs, where it is as good.
      if (avoid_suspect && option->suspect > 0) {
        std::vector<size_t> set = ChooseConnectedSet(fleet_, WithoutSuspect(with_room), need);
        if (!set.empty()) {
          Option other = OptionOn(std::move(set), victims, avoid_suspect);
          if (other.tie() < option->tie()) option = std::move(other);
        }
      }
    }
    for (size_t h : victims) apply(h, -1);
    for (size_t p : group) in_group_[p] = false;
    return option;
  }

  // An Option on `gpus`: the victims of `victims` that hold some of them.
  Option OptionOn(std::vector<size_t> gpus, const std::vector<size_t>& victims, bool count_suspect) const {
    Option option;
    option.gpus = std::move(gpus);
    std::sort(option.gpus.begin(), option.gpus.end());
    // Victims on GPUs the set left out are not needed.
    for (size_t h : victims) {
      bool touches = std::any_of(holdings_[h].positions.begin(), holdings_[h].positions.end(), [&](size_t p) {
        return std::binary_search(option.gpus.begin(), option.gpus.end(), p);
      });
      if (!touches) continue;
      option.victims.push_back(h);
      option.cost += Cost(h);
      option.urgency += holdings_[h].spec->priority;
    }
    option.links = Connectivity(option.gpus);
    if (count_suspect) option.suspect = SuspectIn(option.gpus);
    return option;
  }

  bool IsCandidate(size_t h, const JobSpec& spec) const {
    const Holding& hold = holdings_[h];
    return !hold.stopping && hold.spec->preemptible && hold.spec->priority < spec.priority &&
           hold.started < now_;
  }

  // Rules 5 and 7: preempts for `job` and claims the GPUs it will take.
  // Returns the reason text, or "" when preemption does not apply; then
  // `stopping` lists the stopping jobs whose GPUs it waits for, if any.
  std::string TryPreempt(const PendingJob& job, std::vector<JobId>* stopping) {
    const JobSpec& spec = job.spec;
    const int need = NeedOf(spec);
    const int twentieths = TwentiethsOf(spec);
    // Rule 6: never a second preemption while victims stop for this job.
    if (auto it = stopping_for_.find(job.id); it != stopping_for_.end()) {
      *stopping = SortedUnique(it->second);
      return "";
    }
    std::vector<size_t> suitable;
    for (size_t p = 0; p < fleet_.gpus.size(); ++p) {
      if (Suitable(p, spec)) suitable.push_back(p);
    }
    // Twentieths of staying jobs per position: stopping ones free theirs anyway.
    std::vector<int> remaining(fleet_.gpus.size());
    std::unordered_map<int, int> room_per_model;
    int room = 0;
    bool any_candidate = false;
    for (size_t p : suitable) {
      remaining[p] = StayingTwentieths(p);
      if (remaining[p] + twentieths <= kTwentiethsPerGpu) {
        int n = ++room_per_model[spec.one_model() ? model_of_[p] : 0];
        room = std::max(room, n);
        for (size_t h : holders_[p]) {
          if (holdings_[h].stopping) stopping->push_back(holdings_[h].id);
        }
      }
      for (size_t h : holders_[p]) any_candidate |= IsCandidate(h, spec);
    }
    if (room >= need) {
      *stopping = SortedUnique(std::move(*stopping));
      return "";
    }
    stopping->clear();
    if (!config_.preemption || !any_candidate) return "";
    in_group_.assign(fleet_.gpus.size(), false);
    // Rule 7: the best-connected level where preemption can free a set
    // wins; within it, the cheapest set. One GPU needs no connection.
    std::optional<Option> best;
    std::vector<std::tuple<int, int, size_t>> keyed;  // (model, group, position)
    std::vector<size_t> group;
    for (int level = need == 1 ? 4 : 0; level <= 4 && !best; ++level) {
      keyed.clear();
      for (size_t p : suitable) {
        int id = level == 4 ? 0 : GroupAt(fleet_.gpus[p], level);
        if (id >= 0) keyed.emplace_back(spec.one_model() ? model_of_[p] : 0, id, p);
      }
      std::sort(keyed.begin(), keyed.end());
      for (size_t i = 0; i < keyed.size();) {
        size_t j = i;
        group.clear();
        for (; j < keyed.size() && std::get<0>(keyed[j]) == std::get<0>(keyed[i]) &&
               std::get<1>(keyed[j]) == std::get<1>(keyed[i]);
             ++j) {
          group.push_back(std::get<2>(keyed[j]));
        }
        i = j;
        if (group.size() < static_cast<size_t>(need)) continue;
        std::optional<Option> option = CheapestIn(group, spec, remaining);
        if (option && (!best || option->tie() < best->tie())) best = std::move(option);
      }
    }
    if (!best || best->victims.empty()) return "";
    PreemptDecision decision;
    decision.for_job = job.id;
    TimeMs at = now_;
    for (size_t h : best->victims) {
      decision.victims.push_back(holdings_[h].id);
      at = std::max(at, now_ + holdings_[h].spec->checkpoint_grace);
    }
    std::sort(decision.victims.begin(), decision.victims.end());
    for (size_t p : best->gpus) {
      decision.gpus.push_back(fleet_.gpus[p].index);
      for (size_t h : holders_[p]) {  // stopping already: gone by their deadline
        if (holdings_[h].stopping) at = std::max(at, holdings_[h].end);
      }
    }
    Reservation r;
    r.job = job.id;
    r.at = at;
    r.gpus = best->gpus;
    reservation_ = std::move(r);
    for (size_t p : best->gpus) ClaimFor(job.id, p);
    std::string reason = fmt::format("preempting {} {} (lower urgency, preemptible) to make room "
                                     "on {} {}",
                                     Plural(decision.victims.size(), "job"),
                                     JoinIds(decision.victims), Plural(decision.gpus.size(), "GPU"),
                                     fmt::join(decision.gpus, ", "));
    out_.preemptions.push_back(std::move(decision));
    return reason;
  }

  const FleetState& fleet_;
  const TimeMs now_;
  const SchedulerConfig& config_;
  PlacementIndex index_;
  std::vector<int> position_of_;             // GPU index → position
  std::vector<size_t> suspect_;              // sorted positions of suspect GPUs (rule 12)
  std::vector<Holding> holdings_;
  std::vector<std::vector<size_t>> holders_; // position → holdings_ entries
  std::unordered_map<std::string, int> user_twentieths_;
  std::unordered_map<std::string, int> user_queued_;
  std::optional<Reservation> reservation_;
  std::vector<bool> claimed_;                // positions held for maintenance jobs
  std::vector<JobId> claim_owner_;           // position → preemptor holding it (rule 6)
  std::unordered_map<JobId, std::vector<size_t>> claims_;  // valid claims by preemptor
  std::unordered_map<JobId, std::vector<JobId>> stopping_for_;  // preemptor → its stopping victims
  std::vector<size_t> claim_positions_;     // every position in claim_owner_
  std::vector<int> model_of_;                // position → model id (GPU name)
  std::vector<bool> in_group_;               // scratch for CheapestIn
  int64_t cpus_used_ = 0;
  uint64_t mem_used_ = 0;
  uint64_t generation_ = 0;
  int still_for_ = 0;  // GPU answers computed since the last change
  std::unordered_map<DemandKey, std::string, DemandKeyHash> answers_;  // rule 11
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

Status CheckQueueLimit(const std::string& user, int unfinished, int adding, const SchedulerConfig& config) {
  const int64_t limit = config.max_queued_jobs_per_user;
  if (limit <= 0 || int64_t{unfinished} + adding <= limit) return Status::Ok();
  // The numbers are the user's own count and the limit as configured, never
  // the count plus what was asked for (an array's tasks used to be added in).
  std::string message = fmt::format("a user may have at most {} unfinished jobs; {} has {}", limit, user, unfinished);
  if (adding > 1) {
    message += fmt::format(", and this array adds {} ({} more fit)", adding, std::max<int64_t>(0, limit - unfinished));
  }
  return ResourceExhausted(message + ": wait for some to finish or cancel some");
}

std::string FormatClock(TimeMs t, TimeMs now) {
  std::string iso = FormatTimeUtc(t);  // 2026-12-02T12:33:26.123Z
  if (t >= now - kHourMs * 24 && t <= now + kHourMs * 24) return iso.substr(11, 5) + " UTC";
  return iso.substr(0, 10) + " " + iso.substr(11, 5) + " UTC";
}

}  // namespace gpuherd::sched
