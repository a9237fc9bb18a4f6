#include "burnin/report.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>

#include <fmt/format.h>

#include "burnin/health.h"
#include "core/html.h"

namespace gpuherd::burnin {
namespace {

constexpr int kMarginLeft = 52, kMarginRight = 56, kMarginTop = 22, kMarginBottom = 30;
constexpr const char* kTempColor = "#d62728";
constexpr const char* kPowerColor = "#1f77b4";
constexpr const char* kSlowdownColor = "#ff7f0e";

// 1, 2 or 5 times a power of ten, so that `span` holds about `ticks` steps.
double NiceStep(double span, int ticks) {
  const double raw = span / ticks;
  const double magnitude = std::pow(10, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 5.0}) {
    if (m * magnitude >= raw) return m * magnitude;
  }
  return 10 * magnitude;
}

// A time step in whole seconds, minutes or hours.
DurationMs NiceTimeStep(DurationMs span) {
  static constexpr DurationMs kSteps[] = {
      kSecondMs,      2 * kSecondMs,  5 * kSecondMs,  10 * kSecondMs, 15 * kSecondMs,
      30 * kSecondMs, kMinuteMs,      2 * kMinuteMs,  5 * kMinuteMs,  10 * kMinuteMs,
      15 * kMinuteMs, 30 * kMinuteMs, kHourMs,        2 * kHourMs,    6 * kHourMs,
      12 * kHourMs,   24 * kHourMs};
  for (DurationMs step : kSteps) {
    if (span / step <= 8) return step;
  }
  return (span / 8 / (24 * kHourMs) + 1) * 24 * kHourMs;
}

// "0", "30s", "5m", "2h": tick labels on whole steps.
std::string TickLabel(DurationMs t) {
  if (t == 0) return "0";
  if (t % kHourMs == 0) return std::to_string(t / kHourMs) + "h";
  if (t % kMinuteMs == 0) return std::to_string(t / kMinuteMs) + "m";
  return std::to_string(t / kSecondMs) + "s";
}

std::optional<double> SlowdownOf(const BurnInRun& run) {
  for (const Check& check : run.checks) {
    auto it = check.values.find("slowdown_c");
    if (it != check.values.end()) return it->second;
  }
  return std::nullopt;
}

std::string Num(std::optional<double> value, const char* format = "{:.1f}") {
  return value ? fmt::format(fmt::runtime(format), *value) : "–";
}

const char* VerdictClass(Verdict verdict) {
  switch (verdict) {
    case Verdict::kHealthy: return "good";
    case Verdict::kDegraded: return "warn";
    case Verdict::kUnhealthy: return "bad";
    case Verdict::kUnknown: return "none";
  }
  return "none";
}

const char* OutcomeClass(CheckOutcome outcome) {
  switch (outcome) {
    case CheckOutcome::kPass: return "good";
    case CheckOutcome::kWarn: return "warn";
    case CheckOutcome::kFail: return "bad";
    case CheckOutcome::kSkipped:
    case CheckOutcome::kError: return "none";
  }
  return "none";
}

std::string Title(const BurnInRun& run) {
  return fmt::format("GPU {} · {} · {}", run.gpu_index, run.gpu_name, run.gpu_uuid);
}

std::string ValuesText(const std::map<std::string, double>& values) {
  std::string out;
  for (const auto& [key, value] : values) {
    out += fmt::format("{}{}={:.4g}", out.empty() ? "" : ", ", key, value);
  }
  return out;
}

std::string RankedTable(const std::vector<const BurnInRun*>& ranked) {
  std::string html =
      "<table><tr><th>#</th><th>GPU</th><th>model</th><th>UUID</th><th>outcome</th>"
      "<th>verdict</th><th>score</th><th>FP32 TFLOPS</th><th>vs fleet</th><th>vs data sheet</th>"
      "<th>max °C</th><th>memory errors</th><th>compute errors</th><th>NaN</th></tr>\n";
  int rank = 0;
  for (const BurnInRun* run : ranked) {
    const Health& h = run->health;
    const bool scored = h.verdict != Verdict::kUnknown;
    html += fmt::format(
        "<tr><td>{}</td><td><a href=\"#gpu-{}\">{}</a></td><td>{}</td><td><code>{}</code></td>"
        "<td>{}</td><td class=\"{}\">{}</td><td class=\"{}\">{}</td><td>{}</td><td>{}</td>"
        "<td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>\n",
        ++rank, run->gpu_index, run->gpu_index, HtmlEscape(run->gpu_name), HtmlEscape(run->gpu_uuid),
        RunOutcomeName(run->outcome), VerdictClass(h.verdict), VerdictName(h.verdict),
        VerdictClass(h.verdict), scored ? std::to_string(h.score) : "–",
        Num(run->rates.fp32_tflops), h.ratio_to_fleet ? Num(*h.ratio_to_fleet * 100, "{:.0f} %") : "–",
        h.ratio_to_nominal ? Num(*h.ratio_to_nominal * 100, "{:.0f} %") : "–",
        Num(run->thermal.max_temp_c, "{:.0f}"), run->memory_errors, run->compute_errors,
        run->nan_count);
  }
  return html + "</table>\n";
}

std::string GpuSection(const BurnInRun& run) {
  const Health& h = run.health;
  std::string html = fmt::format("<section id=\"gpu-{}\"><h2>{}</h2>\n", run.gpu_index, HtmlEscape(Title(run)));
  html += fmt::format(
      "<p>Level {} · {} · PCI {} · {} – {}{}</p>\n", run.level, RunOutcomeName(run.outcome),
      HtmlEscape(run.pci_bus_id), FormatTimeUtc(run.started), FormatTimeUtc(run.finished),
      run.level >= 3 ? " · stress " + FormatDuration(run.stress_duration) : "");
  if (!run.outcome_reason.empty()) html += "<p class=\"note\">" + HtmlEscape(run.outcome_reason) + "</p>\n";
  html += fmt::format("<p>Score <b class=\"{}\">{}</b> ({}){}</p>\n", VerdictClass(h.verdict),
                      h.verdict == Verdict::kUnknown ? "–" : std::to_string(h.score),
                      VerdictName(h.verdict), h.disqualified ? ": disqualified by errors" : "");

  html += "<h3>Checks</h3><table><tr><th>check</th><th>level</th><th>outcome</th><th>reason</th>"
          "<th>what was seen</th><th>values</th></tr>\n";
  for (const Check& c : run.checks) {
    html += fmt::format("<tr><td>{}</td><td>{}</td><td class=\"{}\">{}</td><td>{}</td><td>{}</td>"
                        "<td class=\"small\">{}</td></tr>\n",
                        HtmlEscape(c.name), c.level, OutcomeClass(c.outcome), CheckOutcomeName(c.outcome),
                        HtmlEscape(c.reason), HtmlEscape(c.message), HtmlEscape(ValuesText(c.values)));
  }
  html += "</table>\n";

  if (!run.memory_error_samples.empty()) {
    html += fmt::format("<h3>Memory errors ({} in all; the first {})</h3><table><tr><th>pattern</th>"
                        "<th>address</th><th>offset</th><th>expected</th><th>read</th><th>xor</th></tr>\n",
                        run.memory_errors, run.memory_error_samples.size());
    for (const MemErrorRecord& e : run.memory_error_samples) {
      html += fmt::format("<tr><td>{}</td><td><code>0x{:x}</code></td><td><code>0x{:x}</code></td>"
                          "<td><code>0x{:08x}</code></td><td><code>0x{:08x}</code></td>"
                          "<td><code>0x{:08x}</code></td></tr>\n",
                          HtmlEscape(e.pattern), e.address, e.offset, e.expected, e.read, e.xor_bits);
    }
    html += "</table>\n";
  }

  const Rates& r = run.rates;
  html += "<h3>Rates</h3><table><tr><th>FP32</th><th>FP16</th><th>BF16</th><th>memory</th>"
          "<th>memory test</th><th>host→device</th><th>device→host</th><th>device→device</th></tr>\n";
  html += fmt::format("<tr><td>{} TFLOPS</td><td>{} TFLOPS</td><td>{} TFLOPS</td><td>{} GB/s</td>"
                      "<td>{} GB/s</td><td>{} GB/s</td><td>{} GB/s</td><td>{} GB/s</td></tr></table>\n",
                      Num(r.fp32_tflops), Num(r.fp16_tflops), Num(r.bf16_tflops),
                      Num(r.mem_bandwidth_gbs, "{:.0f}"), Num(r.memtest_gbs, "{:.0f}"), Num(r.h2d_gbs),
                      Num(r.d2h_gbs), Num(r.d2d_gbs, "{:.0f}"));
  html += fmt::format("<p>Throughput: {} of the fleet median ({} runs), {} of the data sheet.</p>\n",
                      h.ratio_to_fleet ? Num(*h.ratio_to_fleet * 100, "{:.0f} %") : "–",
                      h.fleet_reference_runs,
                      h.ratio_to_nominal ? Num(*h.ratio_to_nominal * 100, "{:.0f} %") : "–");

  if (!h.factors.empty()) {
    html += "<h3>Score factors</h3><table><tr><th>factor</th><th>points off</th><th>why</th></tr>\n";
    for (const HealthFactor& f : h.factors) {
      html += fmt::format("<tr><td>{}</td><td>{:.1f}</td><td>{}</td></tr>\n", HtmlEscape(f.name),
                          f.penalty, HtmlEscape(f.detail));
    }
    html += "</table>\n";
  }
  const ThermalSummary& t = run.thermal;
  html += fmt::format("<h3>Temperature</h3><p>idle {} °C · max {} °C · steady after {} s · steepest "
                      "rise {} °C/min · throttled {:.0f} % · max power {} W</p>\n",
                      Num(t.idle_temp_c, "{:.0f}"), Num(t.max_temp_c, "{:.0f}"),
                      Num(t.time_to_steady_s, "{:.0f}"), Num(t.max_slope_c_per_min),
                      100 * t.throttled_fraction, Num(t.max_power_w, "{:.0f}"));
  html += TemperatureCurveSvg(run) + "\n</section>\n";
  return html;
}

}  // namespace

std::string TemperatureCurveSvg(const BurnInRun& run, int width, int height) {
  width = std::max(width, kMarginLeft + kMarginRight + 40);
  height = std::max(height, kMarginTop + kMarginBottom + 40);
  const int plot_w = width - kMarginLeft - kMarginRight;
  const int plot_h = height - kMarginTop - kMarginBottom;
  std::string svg = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{0}\" height=\"{1}\" viewBox=\"0 0 {0} {1}\" "
      "font-family=\"sans-serif\" font-size=\"11\">\n<title>{2}</title>\n"
      "<rect x=\"{3}\" y=\"{4}\" width=\"{5}\" height=\"{6}\" fill=\"none\" stroke=\"#888\"/>\n",
      width, height, HtmlEscape("Temperature and power of " + Title(run)), kMarginLeft, kMarginTop,
      plot_w, plot_h);

  double t_lo = 1e9, t_hi = -1e9, p_hi = 0;
  DurationMs end = 1;
  bool any_temp = false, any_power = false;
  for (const TempPoint& p : run.curve) {
    end = std::max(end, p.t);
    if (p.temp_c) {
      t_lo = std::min(t_lo, *p.temp_c);
      t_hi = std::max(t_hi, *p.temp_c);
      any_temp = true;
    }
    if (p.power_w) {
      p_hi = std::max(p_hi, *p.power_w);
      any_power = true;
    }
  }
  if (!any_temp && !any_power) {
    return svg + fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">no temperature "
                             "readings</text>\n</svg>",
                             kMarginLeft + plot_w / 2, kMarginTop + plot_h / 2);
  }
  const std::optional<double> slowdown = SlowdownOf(run);
  if (!any_temp) t_lo = t_hi = slowdown.value_or(50);
  if (slowdown) t_hi = std::max(t_hi, *slowdown);
  const double t_step = NiceStep(std::max(10.0, t_hi - t_lo + 10), 5);
  t_lo = std::floor((t_lo - 5) / t_step) * t_step;
  t_hi = std::ceil((t_hi + 2) / t_step) * t_step;
  const double p_step = NiceStep(std::max(10.0, p_hi * 1.1), 5);
  p_hi = std::ceil(std::max(10.0, p_hi * 1.1) / p_step) * p_step;

  auto x_of = [&](DurationMs t) { return kMarginLeft + plot_w * static_cast<double>(t) / end; };
  auto y_temp = [&](double c) { return kMarginTop + plot_h * (t_hi - c) / (t_hi - t_lo); };
  auto y_power = [&](double w) { return kMarginTop + plot_h * (p_hi - w) / p_hi; };

  // Axes: temperature on the left, power on the right, time below.
  for (double c = t_lo; c <= t_hi + 1e-9; c += t_step) {
    svg += fmt::format("<line x1=\"{0}\" x2=\"{1}\" y1=\"{2:.1f}\" y2=\"{2:.1f}\" stroke=\"#eee\"/>"
                       "<text x=\"{3}\" y=\"{4:.1f}\" text-anchor=\"end\" fill=\"{5}\">{6:g} °C</text>\n",
                       kMarginLeft, kMarginLeft + plot_w, y_temp(c), kMarginLeft - 4, y_temp(c) + 4,
                       kTempColor, c);
  }
  if (any_power) {
    for (double w = 0; w <= p_hi + 1e-9; w += p_step) {
      svg += fmt::format("<text x=\"{}\" y=\"{:.1f}\" fill=\"{}\">{:g} W</text>\n",
                         kMarginLeft + plot_w + 4, y_power(w) + 4, kPowerColor, w);
    }
  }
  const DurationMs t_step_ms = NiceTimeStep(end);
  for (DurationMs t = 0; t <= end; t += t_step_ms) {
    svg += fmt::format("<line x1=\"{0:.1f}\" x2=\"{0:.1f}\" y1=\"{1}\" y2=\"{2}\" stroke=\"#888\"/>"
                       "<text x=\"{0:.1f}\" y=\"{3}\" text-anchor=\"middle\">{4}</text>\n",
                       x_of(t), kMarginTop + plot_h, kMarginTop + plot_h + 4,
                       kMarginTop + plot_h + 16, TickLabel(t));
  }
  svg += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"end\">time since start</text>\n",
                     kMarginLeft + plot_w, height - 2);

  if (slowdown) {
    svg += fmt::format("<line class=\"slowdown\" x1=\"{0}\" x2=\"{1}\" y1=\"{2:.1f}\" y2=\"{2:.1f}\" "
                       "stroke=\"{3}\" stroke-dasharray=\"6 4\"/>"
                       "<text x=\"{4}\" y=\"{5:.1f}\" fill=\"{3}\">slowdown {6:g} °C</text>\n",
                       kMarginLeft, kMarginLeft + plot_w, y_temp(*slowdown), kSlowdownColor,
                       kMarginLeft + 4, y_temp(*slowdown) - 3, *slowdown);
  }
  std::string temp_points, power_points;
  for (const TempPoint& p : run.curve) {
    if (p.temp_c) temp_points += fmt::format("{:.1f},{:.1f} ", x_of(p.t), y_temp(*p.temp_c));
    if (p.power_w) power_points += fmt::format("{:.1f},{:.1f} ", x_of(p.t), y_power(*p.power_w));
  }
  if (any_power) {
    svg += fmt::format("<polyline class=\"power\" fill=\"none\" stroke=\"{}\" stroke-width=\"1\" "
                       "points=\"{}\"/>\n", kPowerColor, power_points);
  }
  if (any_temp) {
    svg += fmt::format("<polyline class=\"temperature\" fill=\"none\" stroke=\"{}\" "
                       "stroke-width=\"2\" points=\"{}\"/>\n", kTempColor, temp_points);
  }
  svg += fmt::format("<text x=\"{}\" y=\"14\" fill=\"{}\">— temperature</text>"
                     "<text x=\"{}\" y=\"14\" fill=\"{}\">— power</text>\n",
                     kMarginLeft, kTempColor, kMarginLeft + 110, kPowerColor);
  return svg + "</svg>";
}

std::string RenderHtmlReport(const std::vector<BurnInRun>& runs) {
  std::vector<const BurnInRun*> ranked;
  for (const BurnInRun& run : runs) ranked.push_back(&run);
  std::stable_sort(ranked.begin(), ranked.end(), [](const BurnInRun* a, const BurnInRun* b) {
    const bool a_scored = a->health.verdict != Verdict::kUnknown;
    const bool b_scored = b->health.verdict != Verdict::kUnknown;
    if (a_scored != b_scored) return a_scored;
    return a->health.score > b->health.score;
  });
  const bool simulated = std::any_of(runs.begin(), runs.end(), [](const BurnInRun& r) { return r.simulated; });
  std::string html =
      "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
      "<title>gpuherd burn-in report</title>\n<style>\n"
      "body{font-family:sans-serif;margin:2em;color:#222}"
      "table{border-collapse:collapse;margin:.5em 0}"
      "td,th{border:1px solid #ccc;padding:3px 8px;text-align:left;vertical-align:top}"
      "th{background:#f4f4f4}.good{color:#1a7f37}.warn{color:#b35900}.bad{color:#c00;font-weight:bold}"
      ".none{color:#777}.small{font-size:85%}.note{color:#555}.banner{background:#fff3cd;padding:.5em}"
      "section{margin-top:2em;border-top:2px solid #ddd}\n</style></head><body>\n"
      "<h1>gpuherd burn-in report</h1>\n";
  if (simulated) {
    html += "<p class=\"banner\">SIMULATED FLEET: these runs tested simulated GPUs, not hardware.</p>\n";
  }
  html += fmt::format("<p>{} GPU{}. Verdict: healthy at a score of {} or more, degraded from {}, "
                      "unhealthy below; any memory or compute error disqualifies.</p>\n",
                      runs.size(), runs.size() == 1 ? "" : "s", kHealthyMin, kDegradedMin);
  html += RankedTable(ranked);
  for (const BurnInRun* run : ranked) html += GpuSection(*run);
  return html + "</body></html>\n";
}

}  // namespace gpuherd::burnin
