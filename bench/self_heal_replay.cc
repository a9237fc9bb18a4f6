// A week of 8 GPUs replayed twice on the same fault trace: once with
// self-healing (the XID rules and the GPU state machine of src/alerts/, with a
// requalification burn-in after 10 idle minutes) and once the way a drained GPU
// is handled without it (drained until a person acts). Prints a Markdown table.
//
// Fault rates and repair times come from real fleets (../shared/data/real-fleets):
//  - the InfiniteHBD trace (400 servers, 349 days; read from FAULT_TRACE): GPU
//    fault classes per GPU-year and, per class, the recorded time from fault to
//    repair; a repair that took over 24 h is taken as one that needed hands on
//    the hardware (the fault persists through a reset), a shorter one as a fault
//    a reset clears.
//  - Titan (ORNL K20X, 100,820 GPU-years): double-bit ECC 4.79 and off-the-bus
//    1.53 per 100 GPU-years (derived figures, see that folder's README).
// Time is compressed honestly: every rate is multiplied by COMPRESSION (default
// 500: one simulated week carries the faults 8 GPUs would see in 500 weeks,
// about 9.6 years) and nothing else is; repair times are people's times and
// are not scaled. Figures are averaged over WEEKS independent weeks.
//
// Usage: self_heal_replay FAULT_TRACE [--compression N] [--weeks N] [--seed N]
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "alerts/gpu_state.h"
#include "alerts/self_heal_rules.h"

namespace gpuherd::alerts {
namespace {

constexpr int kGpus = 8;
constexpr double kHour = 3600.0 * 1000;
constexpr TimeMs kWeek = 7 * 24 * kHourMs;
constexpr DurationMs kRequalifyAfter = 10 * kMinuteMs;  // daemon --requalify-after default
// Level 1 + level 2 + power transients + peer checks on one card.
constexpr DurationMs kBurnin = 15 * kMinuteMs;
constexpr double kGpusPerNode = 8;  // InfiniteHBD servers carry 8 GPUs each

// One fault class of the simulation: how gpuherd sees it, its rate, and the
// repair times recorded for it.
struct FaultClass {
  std::string name;
  std::string hbd_desc;   // the trace's fault_type.Desc the repair times come from
  int xid = 0;            // 0: seen as a hardware fault without an XID
  std::string hw_kind;    // for xid 0
  double per_gpu_year = 0;
  std::string rate_source;
  std::vector<double> repair_h;  // recorded repairs, hours
};

struct Loaded {
  std::vector<FaultClass> classes;
  double gpu_years = 0;
};

Loaded LoadTrace(const std::string& path) {
  std::ifstream in(path);
  if (!in) {
    std::fprintf(stderr, "cannot read %s\n", path.c_str());
    std::exit(2);
  }
  nlohmann::json events = nlohmann::json::parse(in);
  std::map<std::pair<std::string, std::string>, std::vector<double>> open;
  std::map<std::string, std::vector<double>> repairs;
  std::map<std::string, int> starts;
  std::vector<nlohmann::json> sorted(events.begin(), events.end());
  std::stable_sort(sorted.begin(), sorted.end(), [](const auto& a, const auto& b) {
    return a["event_time"].template get<double>() < b["event_time"].template get<double>();
  });
  double last_day = 0;
  for (const auto& e : sorted) {
    std::string desc = e["fault_type"]["Desc"];
    double t = e["event_time"];
    last_day = std::max(last_day, t);
    auto key = std::make_pair(std::string(e["node_id"]), desc);
    if (e["event_type"] == "fault_start") {
      open[key].push_back(t);
      ++starts[desc];
    } else if (!open[key].empty()) {
      repairs[desc].push_back((t - open[key].front()) * 24);
      open[key].erase(open[key].begin());
    }
  }
  Loaded out;
  out.gpu_years = 400 * kGpusPerNode * last_day / 365.0;
  auto hbd = [&](std::string name, std::string desc, int xid, std::string hw, double per_node) {
    FaultClass c{name, desc, xid, hw, 0, "", repairs[desc]};
    double n = starts[desc];
    c.per_gpu_year = n / out.gpu_years;
    c.rate_source = "InfiniteHBD: " + std::to_string(starts[desc]) + " in " +
                    std::to_string(static_cast<int>(out.gpu_years)) + " GPU-years" +
                    (per_node ? " (a node's fault, on one of its GPUs)" : "");
    out.classes.push_back(std::move(c));
  };
  // Double-bit ECC and off-the-bus at Titan's rates, repair times from the trace.
  out.classes.push_back({"double-bit ECC (XID 48)", "GPU DBE(Double Bit ECC) > Threshold", 48, "",
                         4.79 / 100, "Titan: 4.79 per 100 GPU-years",
                         repairs["GPU DBE(Double Bit ECC) > Threshold"]});
  out.classes.push_back({"fell off the bus (XID 79)", "GPU Lost", 79, "", 1.53 / 100,
                         "Titan: 1.53 per 100 GPU-years", repairs["GPU Lost"]});
  // The trace's labels carry no XID numbers; each is given the XID a driver
  // reports for that symptom.
  hbd("device error / GSP timeout (XID 119)", "GPU device unknow error", 119, "", 0);
  hbd("nvidia-smi timeout (XID 119)", "nvidia-smi Timeout", 119, "", 0);
  hbd("transient XID (XID 46, GPU stopped)", "GPU xid Error", 46, "", 0);
  hbd("dying fan (thermal)", "Speed Critical (Sensor)", 0, "fan_critical", 1);
  hbd("weak power supply (drops off)", "Power Supply Failure detected", 0, "psu_failure", 1);
  return out;
}

struct Fault {
  TimeMs at;
  int gpu;
  const FaultClass* cls;
  double repair_h;  // sampled from the class's recorded repairs
  bool persistent() const { return repair_h > 24; }
};

struct Outcome {
  double down_h = 0;         // GPU-hours out of service
  int interventions = 0;     // times a person had to act
  int faults = 0;
  int retired = 0;
  int requalified = 0;
};

// Drained until a person acts: the recorded repair time, every fault a visit.
Outcome Baseline(const std::vector<Fault>& faults) {
  Outcome o;
  std::vector<TimeMs> up_at(kGpus, 0);
  for (const Fault& f : faults) {
    ++o.faults;
    if (f.at < up_at[f.gpu]) continue;  // already out; the same visit covers it
    TimeMs back = f.at + static_cast<TimeMs>(f.repair_h * kHour);
    o.down_h += (std::min(back, kWeek) - f.at) / kHour;
    up_at[f.gpu] = back;
    ++o.interventions;
  }
  return o;
}

// The same faults through the rules and the state machine. A fault a reset
// clears passes requalification; a persistent one fails it (the burn-in's
// memory test, power transients and peer checks are built to catch exactly
// these) and waits, retired, for the same recorded repair.
Outcome SelfHealing(const std::vector<Fault>& faults) {
  Outcome o;
  SelfHealPolicy rules;
  SelfHealState rule_state;
  std::vector<GpuStateMachine> gpus(kGpus);
  std::vector<TimeMs> down_since(kGpus, -1);
  struct Pending {
    TimeMs at;
    int gpu;
    HealthInputKind kind;
  };
  std::vector<Pending> pending;
  std::vector<const Fault*> cause(kGpus, nullptr);

  auto account = [&](int g, const HealthDecision& d) {
    for (const HealthTransition& t : d.transitions) {
      bool was_down = t.from != GpuHealth::kInService && t.from != GpuHealth::kSuspect;
      bool is_down = t.to != GpuHealth::kInService && t.to != GpuHealth::kSuspect;
      if (!was_down && is_down) down_since[g] = t.time;
      if (was_down && !is_down) {
        o.down_h += (std::min<TimeMs>(t.time, kWeek) - down_since[g]) / kHour;
        down_since[g] = -1;
      }
      if (t.to == GpuHealth::kRetired) {
        ++o.retired;
        // The person comes when the recorded repair is done.
        TimeMs fix = cause[g] ? cause[g]->at + static_cast<TimeMs>(cause[g]->repair_h * kHour)
                              : t.time;
        pending.push_back({std::max(fix, t.time), g, HealthInputKind::kOperatorReturn});
      }
      if (t.from == GpuHealth::kRequalifying && t.to == GpuHealth::kInService) ++o.requalified;
    }
    for (const HealthAction& a : d.actions) {
      if (a.kind == HealthActionKind::kQueueRequalification) {
        pending.push_back({gpus[g].record().since + kRequalifyAfter, g,
                           HealthInputKind::kRequalifyStarted});
      }
    }
  };

  size_t next = 0;
  while (true) {
    // The earliest of the next fault and the next pending step.
    auto p = std::min_element(pending.begin(), pending.end(),
                              [](const Pending& a, const Pending& b) { return a.at < b.at; });
    TimeMs tf = next < faults.size() ? faults[next].at : kWeek * 100;
    TimeMs tp = p != pending.end() ? p->at : kWeek * 100;
    if (std::min(tf, tp) >= kWeek * 100) break;
    if (tf <= tp) {
      const Fault& f = faults[next++];
      ++o.faults;
      RuleOutcome r = f.cls->xid ? EvaluateXid(rules, rule_state,
                                               {f.at, "gpu" + std::to_string(f.gpu), f.cls->xid,
                                                "job", "user"})
                                 : EvaluateHardwareFault(rules, rule_state,
                                                         "gpu" + std::to_string(f.gpu), f.at,
                                                         f.cls->hw_kind, "job", "");
      if (!r.input) continue;
      GpuHealth before = gpus[f.gpu].state();
      if (before == GpuHealth::kInService || before == GpuHealth::kSuspect ||
          !cause[f.gpu] || !cause[f.gpu]->persistent()) {
        cause[f.gpu] = &f;
      }
      HealthDecision d = gpus[f.gpu].Apply(*r.input);
      account(f.gpu, d);
      // Its jobs checkpoint and move; the card is idle from now.
      account(f.gpu, gpus[f.gpu].Apply({HealthInputKind::kGpuIdle, f.at, "", {}}));
      account(f.gpu, gpus[f.gpu].Apply({HealthInputKind::kTick, f.at + kRequalifyAfter, "", {}}));
    } else {
      Pending step = *p;
      pending.erase(p);
      GpuStateMachine& m = gpus[step.gpu];
      if (step.kind == HealthInputKind::kRequalifyStarted) {
        account(step.gpu, m.Apply({HealthInputKind::kRequalifyStarted, step.at, "burn-in", {}}));
        pending.push_back({step.at + kBurnin, step.gpu, HealthInputKind::kTick});
      } else if (step.kind == HealthInputKind::kTick) {
        if (m.state() != GpuHealth::kRequalifying) continue;
        bool fails = cause[step.gpu] && cause[step.gpu]->persistent();
        account(step.gpu, m.Apply({fails ? HealthInputKind::kRequalifyFailed
                                         : HealthInputKind::kRequalifyPassed,
                                   step.at, fails ? "burn-in failed" : "burn-in passed", {}}));
      } else if (step.kind == HealthInputKind::kOperatorReturn) {
        if (m.state() != GpuHealth::kRetired) continue;
        ++o.interventions;
        cause[step.gpu] = nullptr;
        account(step.gpu, m.Apply({HealthInputKind::kOperatorReturn, step.at, "repaired", {}}));
      }
    }
  }
  for (int g = 0; g < kGpus; ++g) {
    if (down_since[g] >= 0) o.down_h += (kWeek - std::min(down_since[g], kWeek)) / kHour;
  }
  return o;
}

std::vector<Fault> MakeWeek(const Loaded& data, double compression, std::mt19937_64& rng) {
  std::vector<Fault> faults;
  std::uniform_real_distribution<double> unit(0, 1);
  for (const FaultClass& c : data.classes) {
    if (c.repair_h.empty() || c.per_gpu_year <= 0) continue;
    double per_ms = c.per_gpu_year * compression / (365.0 * 24 * kHour);
    std::exponential_distribution<double> gap(per_ms);
    std::uniform_int_distribution<size_t> pick(0, c.repair_h.size() - 1);
    for (int g = 0; g < kGpus; ++g) {
      for (double t = gap(rng); t < kWeek; t += gap(rng)) {
        faults.push_back({static_cast<TimeMs>(t), g, &c, c.repair_h[pick(rng)]});
      }
    }
  }
  std::sort(faults.begin(), faults.end(), [](const Fault& a, const Fault& b) { return a.at < b.at; });
  return faults;
}

int Main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s FAULT_TRACE [--compression N] [--weeks N] [--seed N]\n",
                 argv[0]);
    return 2;
  }
  double compression = 500;
  int weeks = 400;
  uint64_t seed = 1;
  for (int i = 2; i + 1 < argc; i += 2) {
    std::string flag = argv[i];
    if (flag == "--compression") compression = std::atof(argv[i + 1]);
    else if (flag == "--weeks") weeks = std::atoi(argv[i + 1]);
    else if (flag == "--seed") seed = std::strtoull(argv[i + 1], nullptr, 10);
  }
  Loaded data = LoadTrace(argv[1]);
  std::printf("Fault classes (InfiniteHBD %.0f GPU-years; rates x %.0f):\n\n", data.gpu_years,
              compression);
  std::printf("| class | per 100 GPU-years | source | repairs recorded | median repair h | "
              "repairs > 24 h |\n|---|---|---|---|---|---|\n");
  for (const FaultClass& c : data.classes) {
    std::vector<double> r = c.repair_h;
    std::sort(r.begin(), r.end());
    double over = std::count_if(r.begin(), r.end(), [](double h) { return h > 24; });
    std::printf("| %s | %.2f | %s | %zu | %.1f | %.0f%% |\n", c.name.c_str(),
                c.per_gpu_year * 100, c.rate_source.c_str(), r.size(),
                r.empty() ? 0 : r[r.size() / 2], r.empty() ? 0 : 100 * over / r.size());
  }
  std::mt19937_64 rng(seed);
  Outcome base_sum, heal_sum;
  for (int w = 0; w < weeks; ++w) {
    std::vector<Fault> faults = MakeWeek(data, compression, rng);
    Outcome b = Baseline(faults), h = SelfHealing(faults);
    base_sum.down_h += b.down_h;
    base_sum.interventions += b.interventions;
    base_sum.faults += b.faults;
    heal_sum.down_h += h.down_h;
    heal_sum.interventions += h.interventions;
    heal_sum.retired += h.retired;
    heal_sum.requalified += h.requalified;
  }
  const double gpu_h = kGpus * 7 * 24.0;
  auto row = [&](const char* name, const Outcome& s) {
    std::printf("| %s | %.1f%% | %.1f | %.2f |\n", name, 100 * (1 - s.down_h / weeks / gpu_h),
                s.down_h / weeks, static_cast<double>(s.interventions) / weeks);
  };
  std::printf("\n%d weeks of %d GPUs, %.2f faults a week on average; self-healing requalified "
              "%.2f and retired %.2f cards a week.\n\n",
              weeks, kGpus, static_cast<double>(base_sum.faults) / weeks,
              static_cast<double>(heal_sum.requalified) / weeks,
              static_cast<double>(heal_sum.retired) / weeks);
  std::printf("| policy | GPU availability | GPU-hours lost a week | person-interventions a week |\n"
              "|---|---|---|---|\n");
  row("drained until a person acts", base_sum);
  row("self-healing (requalify after 10 min idle)", heal_sum);
  std::printf("\nRatios: GPU-hours lost %.2fx fewer, interventions %.2fx fewer.\n",
              base_sum.down_h / std::max(heal_sum.down_h, 1e-9),
              static_cast<double>(base_sum.interventions) / std::max(heal_sum.interventions, 1));
  return 0;
}

}  // namespace
}  // namespace gpuherd::alerts

int main(int argc, char** argv) { return gpuherd::alerts::Main(argc, argv); }
