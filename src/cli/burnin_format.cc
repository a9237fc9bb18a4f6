#include "cli/burnin_format.h"

#include <algorithm>
#include <optional>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "cli/table.h"

namespace gpuherd::cli {
namespace {

using burnin::BurnInRun;
using burnin::CheckOutcome;
using burnin::RunOutcome;
using burnin::Verdict;

constexpr size_t kReasonWidth = 72;

bool Finished(const BurnInRun& run) {
  return run.outcome == RunOutcome::kPassed || run.outcome == RunOutcome::kFaultsFound;
}

// Cuts at a code point boundary and marks the cut, so a cell stays one line.
std::string Shorten(const std::string& text, size_t width) {
  std::string flat = text;
  std::replace(flat.begin(), flat.end(), '\n', ' ');
  if (DisplayWidth(flat) <= width) return flat;
  size_t points = 0, i = 0;
  for (; i < flat.size(); ++i) {
    if ((static_cast<unsigned char>(flat[i]) & 0xC0) != 0x80 && ++points == width) break;
  }
  return flat.substr(0, i) + "…";
}

std::string Dash(const std::optional<double>& v, const char* format) {
  return v ? fmt::format(fmt::runtime(format), *v) : "-";
}

std::string Percent(const std::optional<double>& ratio) {
  return ratio ? fmt::format("{:.0f}%", *ratio * 100) : "-";
}

std::string OutcomeCell(RunOutcome outcome, bool color) {
  const char* name = burnin::RunOutcomeName(outcome);
  switch (outcome) {
    case RunOutcome::kPassed: return Colored(name, kGreen, color);
    case RunOutcome::kFaultsFound: return Colored(name, kRed, color);
    case RunOutcome::kCouldNotRun:
    case RunOutcome::kAborted: return Colored(name, kYellow, color);
  }
  return name;
}

// A check this run left out (a level 3 too short for the thermal trend), as
// opposed to one the card or the machine cannot answer (no ECC on a GeForce,
// no peers: fewer than 3 cards of the model in the machine).
bool LeftOut(const burnin::Check& c) {
  return c.outcome == CheckOutcome::kSkipped && c.reason != "not_supported" && c.reason != "too_few_peers";
}

}  // namespace

std::string VerdictText(const BurnInRun& run) {
  std::string name = burnin::VerdictName(run.health.verdict);
  if (run.health.verdict != Verdict::kHealthy) return name;
  std::vector<std::string> skipped;
  for (const burnin::Check& c : run.checks) {
    if (!LeftOut(c)) continue;
    std::string what = c.name.substr(0, c.name.find('.'));
    if (std::find(skipped.begin(), skipped.end(), what) == skipped.end()) skipped.push_back(what);
  }
  if (skipped.empty()) return name;
  std::string list;
  for (const std::string& w : skipped) list += (list.empty() ? "" : ", ") + w;
  return "passed; " + list + " not checked";
}

namespace {

std::string VerdictCell(const BurnInRun& run, bool color) {
  const std::string name = VerdictText(run);
  switch (run.health.verdict) {
    case Verdict::kHealthy:
      return Colored(name, name == burnin::VerdictName(Verdict::kHealthy) ? kGreen : kYellow, color);
    case Verdict::kDegraded: return Colored(name, kYellow, color);
    case Verdict::kUnhealthy: return Colored(name, kRed, color);
    case Verdict::kUnknown: break;
  }
  return name;
}

// A score means something only when the run finished.
std::string ScoreCell(const BurnInRun& run) {
  return Finished(run) ? std::to_string(run.health.score) : "-";
}

std::string ErrorsCell(const BurnInRun& run, bool color) {
  const uint64_t errors = run.memory_errors + run.compute_errors + run.nan_count;
  std::string text = std::to_string(errors);
  return errors > 0 ? Colored(text, kRed, color) : text;
}

std::string CheckOutcomeCell(CheckOutcome outcome, bool color) {
  const char* name = burnin::CheckOutcomeName(outcome);
  switch (outcome) {
    case CheckOutcome::kPass: return Colored(name, kGreen, color);
    case CheckOutcome::kWarn:
    case CheckOutcome::kError: return Colored(name, kYellow, color);
    case CheckOutcome::kFail: return Colored(name, kRed, color);
    case CheckOutcome::kSkipped: break;
  }
  return name;
}

std::string When(TimeMs t) {
  std::string text = FormatTimeUtc(t).substr(0, 16);  // "2026-01-01T00:00"
  if (text.size() > 10) text[10] = ' ';
  return text;
}

std::string GpuCell(const BurnInRun& run) { return std::to_string(run.gpu_index); }

std::string CheckText(const burnin::Check& check) {
  return check.name + ": " + (check.message.empty() ? check.reason : check.message);
}

}  // namespace

int BurnInExitCode(const std::vector<BurnInRun>& runs) {
  auto any = [&](auto pred) { return std::any_of(runs.begin(), runs.end(), pred); };
  if (any([](const BurnInRun& r) { return r.outcome == RunOutcome::kAborted; })) return kBurnInExitAborted;
  if (any([](const BurnInRun& r) {
        return r.outcome == RunOutcome::kFaultsFound || r.health.verdict == Verdict::kDegraded ||
               r.health.verdict == Verdict::kUnhealthy;
      })) {
    return kBurnInExitFaults;
  }
  if (runs.empty() || any([](const BurnInRun& r) { return r.outcome == RunOutcome::kCouldNotRun; })) {
    return kBurnInExitCouldNotRun;
  }
  return kBurnInExitPassed;
}

std::string MainReason(const BurnInRun& run) {
  auto first = [&](CheckOutcome outcome) -> const burnin::Check* {
    for (const burnin::Check& c : run.checks) {
      if (c.outcome == outcome) return &c;
    }
    return nullptr;
  };
  if (const burnin::Check* failed = first(CheckOutcome::kFail)) return CheckText(*failed);
  if (!Finished(run)) return run.outcome_reason;
  if (const burnin::Check* error = first(CheckOutcome::kError)) return CheckText(*error);
  if (const burnin::Check* warned = first(CheckOutcome::kWarn)) return CheckText(*warned);
  for (const burnin::Check& c : run.checks) {
    if (LeftOut(c)) return CheckText(c);
  }
  const burnin::HealthFactor* heaviest = nullptr;
  for (const burnin::HealthFactor& f : run.health.factors) {
    if (f.penalty > 0 && (!heaviest || f.penalty > heaviest->penalty)) heaviest = &f;
  }
  if (heaviest) return fmt::format("{}: {} (-{:.0f})", heaviest->name, heaviest->detail, heaviest->penalty);
  return "";
}

std::vector<BurnInRun> RankRuns(std::vector<BurnInRun> runs) {
  std::stable_sort(runs.begin(), runs.end(), [](const BurnInRun& a, const BurnInRun& b) {
    if (Finished(a) != Finished(b)) return Finished(a);
    if (a.health.score != b.health.score) return a.health.score > b.health.score;
    const double rate_a = a.rates.fp32_tflops.value_or(-1), rate_b = b.rates.fp32_tflops.value_or(-1);
    if (rate_a != rate_b) return rate_a > rate_b;
    return a.gpu_index < b.gpu_index;
  });
  return runs;
}

std::string RenderBurnInTable(const std::vector<BurnInRun>& runs, bool color) {
  Table table({"#", "GPU", "MODEL", "OUTCOME", "SCORE", "VERDICT", "TFLOPS", "MEM GB/s", "VS FLEET", "VS SPEC",
               "MAX TEMP", "ERRORS", "REASON"});
  int rank = 0;
  for (const BurnInRun& run : runs) {
    const std::optional<double> bandwidth =
        run.rates.mem_bandwidth_gbs ? run.rates.mem_bandwidth_gbs : run.rates.memtest_gbs;
    table.AddRow({std::to_string(++rank), GpuCell(run), run.gpu_name, OutcomeCell(run.outcome, color),
                  ScoreCell(run), VerdictCell(run, color), Dash(run.rates.fp32_tflops, "{:.1f}"),
                  Dash(bandwidth, "{:.0f}"), Percent(run.health.ratio_to_fleet),
                  Percent(run.health.ratio_to_nominal), Dash(run.thermal.max_temp_c, "{:.0f}°C"),
                  ErrorsCell(run, color), Shorten(MainReason(run), kReasonWidth)});
  }
  return table.Render({0, 1, 4, 6, 7, 8, 9, 10, 11});
}

std::string RenderHistoryTable(const std::vector<BurnInRun>& runs, bool color) {
  Table table({"FINISHED (UTC)", "ID", "LEVEL", "OUTCOME", "SCORE", "VERDICT", "TFLOPS", "MAX TEMP", "ERRORS"});
  for (const BurnInRun& run : runs) {
    table.AddRow({When(run.finished), std::to_string(run.id), std::to_string(run.level),
                  OutcomeCell(run.outcome, color), ScoreCell(run), VerdictCell(run, color),
                  Dash(run.rates.fp32_tflops, "{:.1f}"), Dash(run.thermal.max_temp_c, "{:.0f}°C"),
                  ErrorsCell(run, color)});
  }
  return table.Render({1, 2, 4, 6, 7, 8});
}

std::string RenderRunDetail(const BurnInRun& run, bool color) {
  std::string out = fmt::format("Run {} (level {}, {}, {} UTC): {}", run.id, run.level,
                                burnin::RunOutcomeName(run.outcome), When(run.finished),
                                VerdictText(run));
  if (Finished(run)) out += fmt::format(", score {}", run.health.score);
  if (run.simulated) out += " [simulated]";
  out += "\n";
  // Reasons and details may quote a tool's output (nvidia-smi, the driver).
  if (!run.outcome_reason.empty()) out += "  " + Printable(run.outcome_reason) + "\n";

  Table checks({"CHECK", "LEVEL", "OUTCOME", "DETAIL"});
  for (const burnin::Check& c : run.checks) {
    std::string detail = c.message;
    if (!c.reason.empty()) detail = detail.empty() ? c.reason : c.reason + ": " + detail;
    checks.AddRow({c.name, std::to_string(c.level), CheckOutcomeCell(c.outcome, color), Shorten(detail, 96)});
  }
  out += "\n" + checks.Render({1});

  out += "\nScore factors";
  if (run.health.disqualified) out += " (disqualified: a memory or compute error scores 0)";
  out += ":\n";
  bool any = false;
  for (const burnin::HealthFactor& f : run.health.factors) {
    if (f.penalty <= 0) continue;
    out += fmt::format("  -{:<4.0f} {}: {}\n", f.penalty, Printable(f.name), Printable(f.detail));
    any = true;
  }
  if (!any) out += "  none: nothing was taken off\n";
  std::vector<std::string> against;
  if (run.health.ratio_to_fleet) {
    against.push_back(fmt::format("{} of the fleet median ({} earlier run{})", Percent(run.health.ratio_to_fleet),
                                  run.health.fleet_reference_runs, run.health.fleet_reference_runs == 1 ? "" : "s"));
  }
  if (run.health.ratio_to_nominal) {
    against.push_back(Percent(run.health.ratio_to_nominal) + " of the specification");
  }
  if (!against.empty()) out += "  throughput: " + fmt::format("{}", fmt::join(against, ", ")) + "\n";
  // Every rate the run measured; precisions the card lacks (or a level that
  // does not stress) are left out rather than shown as zero.
  std::vector<std::string> rates;
  auto add_rate = [&rates](const char* name, const std::optional<double>& value, const char* unit) {
    if (value) rates.push_back(fmt::format("{} {:.1f} {}", name, *value, unit));
  };
  add_rate("FP32", run.rates.fp32_tflops, "TFLOPS");
  add_rate("FP16", run.rates.fp16_tflops, "TFLOPS");
  add_rate("BF16", run.rates.bf16_tflops, "TFLOPS");
  add_rate("FP64", run.rates.fp64_tflops, "TFLOPS");
  add_rate("memory", run.rates.mem_bandwidth_gbs, "GB/s");
  add_rate("memory test", run.rates.memtest_gbs, "GB/s");
  if (!rates.empty()) out += "  rates: " + fmt::format("{}", fmt::join(rates, ", ")) + "\n";
  return out;
}

std::string RenderFleetHealth(const std::vector<BurnInRun>& latest, const std::vector<UntestedGpu>& untested,
                              bool color) {
  Table table({"GPU", "MODEL", "UUID", "VERDICT", "SCORE", "LEVEL", "FINISHED (UTC)", "REASON"});
  for (const BurnInRun& run : latest) {
    table.AddRow({GpuCell(run), run.gpu_name, run.gpu_uuid, VerdictCell(run, color), ScoreCell(run),
                  std::to_string(run.level), When(run.finished), Shorten(MainReason(run), kReasonWidth)});
  }
  for (const UntestedGpu& gpu : untested) {
    // A GPU off the bus cannot be burned in: saying to try would only fail.
    table.AddRow({std::to_string(gpu.index), gpu.name, gpu.uuid, "untested", "-", "-", "-",
                  gpu.lost ? std::string("lost (off the bus or not answering): reset or reboot it, then burn it in")
                           : "no finished burn-in; run `gpuherd burnin --gpu " + std::to_string(gpu.index) +
                                 " --level 1`"});
  }
  return table.Render({0, 4, 5});
}

std::string ProgressLine(const burnin::Progress& progress, int bar_width) {
  const double fraction = std::clamp(progress.fraction, 0.0, 1.0);
  const int filled = static_cast<int>(fraction * bar_width + 0.5);
  std::string line = fmt::format("{:<32} [{}{}] {:>3.0f}%", progress.phase, std::string(filled, '#'),
                                 std::string(bar_width - filled, '-'), fraction * 100);
  line += progress.rate ? fmt::format("  {:>8.1f} {:<6}", *progress.rate, progress.rate_unit)
                        : std::string(17, ' ');
  line += progress.temp_c ? fmt::format("  {:>3.0f}°C", *progress.temp_c) : "      -";
  line += fmt::format("  {} error{}", progress.errors, progress.errors == 1 ? "" : "s");
  return line;
}

ProgressDisplay::ProgressDisplay(bool redraw, std::map<int, std::string> labels, DurationMs plain_interval)
    : redraw_(redraw), labels_(std::move(labels)), plain_interval_(plain_interval) {}

std::string ProgressDisplay::Update(const std::vector<burnin::Progress>& progress, TimeMs now) {
  size_t label_width = 0;
  for (const auto& [index, label] : labels_) label_width = std::max(label_width, DisplayWidth(label));
  auto line = [&](const burnin::Progress& p) {
    auto it = labels_.find(p.gpu_index);
    std::string label = it != labels_.end() ? it->second : "GPU " + std::to_string(p.gpu_index);
    return label + std::string(label_width - std::min(label_width, DisplayWidth(label)), ' ') + "  " +
           ProgressLine(p);
  };
  std::string out;
  if (redraw_) {
    // Up over the previous lines, then each line cleared and rewritten.
    if (lines_drawn_ > 0) out += fmt::format("\x1b[{}A", lines_drawn_);
    for (const burnin::Progress& p : progress) out += "\r\x1b[2K" + line(p) + "\n";
    lines_drawn_ = progress.size();
    return out;
  }
  for (const burnin::Progress& p : progress) {
    auto it = shown_.find(p.gpu_index);
    const bool due = it == shown_.end() || it->second.phase != p.phase || now - it->second.at >= plain_interval_;
    if (!due) continue;
    shown_[p.gpu_index] = Shown{p.phase, now};
    out += line(p) + "\n";
  }
  return out;
}

}  // namespace gpuherd::cli
