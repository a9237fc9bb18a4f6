// Failure prediction's costs: scoring one GPU for one new minute (window
// features + one model call, as the daemon does per GPU per rollup), and
// training on 30 days of history of 64 GPUs (generating the history, building
// the windows, boosting). The histories are simulated. Prints Markdown.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <span>
#include <vector>
#include <cmath>
#include <map>
#include <string>

#include "gpu/sim/scenario.h"

#include <CLI/CLI.hpp>

#include "predict/evaluate.h"
#include "predict/features.h"
#include "predict/history.h"
#include "predict/model.h"
#include "predict/train.h"

namespace gpuherd {
namespace {

using Seconds = std::chrono::duration<double>;
using SteadyClock = std::chrono::steady_clock;

double Since(SteadyClock::time_point t0) { return Seconds(SteadyClock::now() - t0).count(); }

// Training as `gpuherd predict train` does it, then the held-out evaluation.
int Quality(int gpus, int days, int rounds, uint64_t eval_seed) {
  predict::TrainOptions o;
  o.generated.gpus = gpus;
  o.generated.days = days;
  o.params.rounds = rounds;
  predict::TrainReport report;
  auto model = predict::TrainModel(o, &report);
  if (!model.ok()) {
    std::fprintf(stderr, "%s\n", model.status().ToString().c_str());
    return 1;
  }
  std::printf("trained: %zu rows, %zu positive, threshold %.3f (validation precision %.3f recall %.3f)\n",
              report.rows, report.positives, model->info().threshold, report.validation.precision,
              report.validation.recall);
  predict::HistoryOptions h;
  h.seed = eval_seed;
  h.gpus = 64;
  h.days = 14;
  auto r = predict::EvaluateModel(*model, h);
  if (!r.ok()) return 1;
  // Per fault kind: caught or not; false episodes by the sign they sat on.
  {
    auto hist = predict::GenerateHistory(h);
    auto scores = predict::ScoreHistory(*model, *hist, {});
    std::map<std::string, std::pair<int, int>> by_kind;
    std::map<std::string, int> false_by;
    const double thr = model->info().threshold;
    for (size_t k = 0; k < hist->series.size(); ++k) {
      const auto& s = hist->series[k];
      predict::History one;
      one.series.push_back(s);
      auto m = predict::ScoreEvents(one, {(*scores)[k]}, thr);
      if (s.fault_time) {
        auto& e = by_kind[s.sudden ? "sudden" : s.fault_kind];
        ++e.second;
        e.first += m.detected;
      }
      // False episodes: attribute to a fading sign active within 2 h before.
      bool in_alarm = false;
      for (size_t i = 0; i < s.minutes.size(); ++i) {
        const float v = (*scores)[k][i];
        const bool on = !std::isnan(v) && v >= thr;
        if (on && !in_alarm) {
          const TimeMs t = s.minutes[i].minute;
          if (s.fault_time && *s.fault_time - t <= 60 * kMinuteMs) {
          } else {
            std::string why = "none";
            for (const auto& sign : s.signs) {
              if (t >= sign.start && t <= sign.peak + (sign.peak - sign.start) + 30 * kMinuteMs) {
                why = std::string(gpu::sim::FaultKindName(sign.kind)) + (sign.fades ? "(fades)" : "");
              }
            }
            ++false_by[why];
          }
        }
        in_alarm = on;
      }
    }
    for (auto& [kind, e] : by_kind) std::printf("  %-12s caught %d/%d\n", kind.c_str(), e.first, e.second);
    for (auto& [why, n] : false_by) std::printf("  false alarm on %s: %d\n", why.c_str(), n);
  }
  for (const auto* m : {&r->model, &r->baseline}) {
    std::printf("P %.3f R %.3f F1 %.3f AUC %.3f lead %.1f/%.0f caught %d/%d episodes %d\n", m->precision,
                m->recall, m->f1, m->roc_auc, m->mean_lead_min, m->median_lead_min, m->detected,
                m->faults, m->episodes);
  }
  return 0;
}

int Run(int gpus, int days, int rounds, int threads) {
  predict::HistoryOptions ho;
  ho.seed = 1;
  ho.gpus = gpus;
  ho.days = days;
  auto t0 = SteadyClock::now();
  auto history = predict::GenerateHistory(ho);
  if (!history.ok()) {
    std::fprintf(stderr, "%s\n", history.status().ToString().c_str());
    return 1;
  }
  const double generate_s = Since(t0);
  size_t minutes = 0;
  for (const auto& s : history->series) minutes += s.minutes.size();

  t0 = SteadyClock::now();
  const predict::Dataset data = predict::BuildDataset(*history, {}, 60 * kMinuteMs, 5);
  const double features_s = Since(t0);

  predict::TrainParams params;
  params.rounds = rounds;
  params.threads = threads;
  t0 = SteadyClock::now();
  auto model = predict::RiskModel::Train(data, params, {});
  if (!model.ok()) {
    std::fprintf(stderr, "%s\n", model.status().ToString().c_str());
    return 1;
  }
  const double train_s = Since(t0);

  std::printf("## Training: %d GPUs x %d days of simulated history (seed 1)\n\n", gpus, days);
  std::printf("| step | figure |\n|---|---|\n");
  std::printf("| GPU-minutes generated | %zu (%d faults, %d fading signs) |\n", minutes,
              history->faults, history->false_alarms);
  std::printf("| generating the history | %.1f s |\n", generate_s);
  std::printf("| window features, every 5th minute | %.1f s (%zu rows, %zu positive) |\n",
              features_s, data.rows(), static_cast<size_t>(std::count(data.y.begin(), data.y.end(), 1.0f)));
  std::printf("| boosting, %d trees, %d threads | %.1f s |\n", rounds, threads, train_s);
  std::printf("| total | %.1f s |\n\n", generate_s + features_s + train_s);

  // Scoring as the daemon does: one GPU, its newest minute, one call.
  const auto& series = *std::max_element(
      history->series.begin(), history->series.end(),
      [](const auto& a, const auto& b) { return a.minutes.size() < b.minutes.size(); });
  const predict::CardFacts facts{series.slowdown_c};
  const size_t n = std::min<size_t>(series.minutes.size() - 60, 20000);
  std::vector<predict::FeatureRow> rows;
  rows.reserve(n);
  t0 = SteadyClock::now();
  for (size_t i = 60; i < 60 + n; ++i) {
    rows.push_back(*predict::ExtractFeatures(series.minutes, i, facts));
  }
  const double extract_us = Since(t0) * 1e6 / n;
  t0 = SteadyClock::now();
  double sink = 0;
  for (const auto& row : rows) sink += *model->Score(row);
  const double score_us = Since(t0) * 1e6 / n;
  std::vector<float> flat;
  for (const auto& row : rows) flat.insert(flat.end(), row.begin(), row.end());
  // As the daemon does it: the 64 GPUs whose minute closed, in one call.
  constexpr size_t kFleet = 64;
  t0 = SteadyClock::now();
  size_t calls = 0;
  bool batch_ok = true;
  for (size_t i = 0; i + kFleet <= n; i += kFleet, ++calls) {
    auto out = model->Predict(std::span<const float>(flat.data() + i * predict::kFeatureCount,
                                                     kFleet * predict::kFeatureCount));
    batch_ok = batch_ok && out.ok();
  }
  const double batch_us = Since(t0) * 1e6 / (calls * kFleet);
  std::printf("## Scoring one GPU for one new minute (%zu minutes, %d trees)\n\n", n, rounds);
  std::printf("| step | per GPU per sample |\n|---|---|\n");
  std::printf("| window features (60 minutes) | %.1f µs |\n", extract_us);
  std::printf("| model, 64 GPUs in one call (the daemon's round) | %.1f µs |\n", batch_us);
  std::printf("| total | %.1f µs |\n", extract_us + batch_us);
  std::printf("| model, one GPU per call | %.1f µs |\n\n", score_us);
  return sink < 0 || !batch_ok;
}

}  // namespace
}  // namespace gpuherd

int main(int argc, char** argv) {
  CLI::App app("Failure prediction: scoring cost and training time");
  int gpus = 64, days = 30, rounds = 200, threads = 2;
  app.add_option("--gpus", gpus, "GPUs in the history")->capture_default_str();
  app.add_option("--days", days, "Days of history")->capture_default_str();
  app.add_option("--rounds", rounds, "Boosting rounds")->capture_default_str();
  app.add_option("--threads", threads, "Training threads")->capture_default_str();
  uint64_t eval_seed = 0;
  app.add_option("--quality", eval_seed, "Instead: train as `gpuherd predict train` and evaluate on this seed");
  CLI11_PARSE(app, argc, argv);
  if (eval_seed) return gpuherd::Quality(gpus, days, rounds, eval_seed);
  return gpuherd::Run(gpus, days, rounds, threads);
}
