#include "predict/train.h"

#include <algorithm>
#include <chrono>
#include <limits>
#include <map>

#include <nlohmann/json.hpp>

#include "alerts/rules.h"
#include "gpu/xid.h"

namespace gpuherd::predict {
namespace {

double SecondsSince(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// The same events the job service treats as a GPU fault.
bool IsFault(const store::EventRecord& e) {
  if (e.kind == "gpu.lost") return true;
  if (e.kind == "gpu.xid") {
    auto data = nlohmann::json::parse(e.data_json, nullptr, false);
    return data.is_object() && gpu::XidIsFatal(data.value("xid", 0));
  }
  if (e.kind == "gpu.ecc" || e.kind == "gpu.thermal" || e.kind == "gpu.fan") {
    return e.severity == store::Severity::kCritical;
  }
  return false;
}

}  // namespace

uint64_t ValidationSeed(uint64_t training_seed) { return training_seed + 500; }

Result<History> LoadStoredHistory(store::Store& db) {
  History history;
  auto gpus = db.ListGpus();
  if (!gpus.ok()) return gpus.status();
  for (const store::GpuRecord& g : *gpus) {
    store::EventFilter filter;
    filter.gpu_uuid = g.uuid;
    filter.kind_prefix = "gpu.";
    filter.limit = 100000;
    auto events = db.ListEvents(filter);
    if (!events.ok()) return events.status();
    std::vector<TimeMs> faults;
    for (const auto& e : *events) {
      if (IsFault(e)) faults.push_back(e.time);
    }
    std::optional<double> slowdown;
    auto info = nlohmann::json::parse(g.info_json, nullptr, false);
    if (info.is_object() && info.contains("temp_slowdown_c") && info["temp_slowdown_c"].is_number()) {
      slowdown = info["temp_slowdown_c"].get<double>();
    }
    Series current;
    auto start_series = [&] {
      current = Series{};
      current.uuid = g.uuid;
      current.gpu = g.index;
      current.model = g.name;
      current.slowdown_c = slowdown;
    };
    start_series();
    size_t next_fault = 0;
    TimeMs from = 0;
    while (true) {
      auto page = db.QueryRollups(g.uuid, from, std::numeric_limits<TimeMs>::max(), 10000);
      if (!page.ok()) return page.status();
      for (store::RollupRecord& r : *page) {
        // A fault ends the series it strikes; minutes from then on start the next.
        bool ended = false;
        while (next_fault < faults.size() && faults[next_fault] <= r.minute) {
          if (!ended && !current.minutes.empty()) {
            current.fault_time = faults[next_fault];
            current.fault_kind = "stored";
            history.series.push_back(std::move(current));
            ++history.faults;
            start_series();
            ended = true;
          }
          ++next_fault;
        }
        current.minutes.push_back(std::move(r));
      }
      if (page->size() < 10000) break;
      from = page->back().minute + 1;
    }
    if (!current.minutes.empty()) history.series.push_back(std::move(current));
  }
  return history;
}

Result<RiskModel> TrainModel(const TrainOptions& options, TrainReport* report) {
  auto t0 = std::chrono::steady_clock::now();
  History training;
  if (options.generated.gpus > 0) {
    auto generated = GenerateHistory(options.generated);
    if (!generated.ok()) return generated.status();
    training = std::move(*generated);
    report->generated_series = static_cast<int>(training.series.size());
    report->generated_faults = training.faults;
  }
  if (!options.db_path.empty()) {
    store::StoreOptions so;
    so.read_only = true;
    auto db = store::Store::Open(options.db_path, so);
    if (db.ok()) {
      auto stored = LoadStoredHistory(**db);
      if (!stored.ok()) return stored.status().Annotate("reading the stored history");
      report->stored_series = static_cast<int>(stored->series.size());
      report->stored_faults = stored->faults;
      for (Series& s : stored->series) training.series.push_back(std::move(s));
      training.faults += stored->faults;
    }
  }
  const Dataset data = BuildDataset(training, options.features, options.horizon, options.stride);
  report->generate_s = SecondsSince(t0);

  t0 = std::chrono::steady_clock::now();
  ModelInfo info;
  info.window = options.features.window;
  info.horizon = options.horizon;
  info.trained_on = "generated seed " + std::to_string(options.generated.seed) + ", " +
                    std::to_string(options.generated.gpus) + " GPUs x " +
                    std::to_string(options.generated.days) + " days; stored: " +
                    std::to_string(report->stored_series) + " series, " +
                    std::to_string(report->stored_faults) + " faults";
  auto model = RiskModel::Train(data, options.params, info);
  if (!model.ok()) return model.status();
  report->rows = model->info().rows;
  report->positives = model->info().positives;
  report->train_s = SecondsSince(t0);

  // The alarm threshold comes from a validation history of another seed, so
  // that the evaluation seeds stay unseen.
  t0 = std::chrono::steady_clock::now();
  HistoryOptions vo = options.generated;
  vo.seed = ValidationSeed(options.generated.seed);
  vo.gpus = std::max(12, options.generated.gpus / 2);
  vo.days = std::clamp(options.generated.days, 4, 14);
  auto validation = GenerateHistory(vo);
  if (!validation.ok()) return validation.status();
  auto scores = ScoreHistory(*model, *validation, options.features);
  if (!scores.ok()) return scores.status();
  EventOptions eo;
  eo.horizon = options.horizon;
  const double threshold = ChooseThreshold(*validation, *scores, options.min_precision, eo);
  model->mutable_info().threshold = threshold;
  report->validation_seed = vo.seed;
  report->validation = ScoreEvents(*validation, *scores, threshold, eo);
  report->validate_s = SecondsSince(t0);
  return model;
}

Result<EvalReport> EvaluateModel(const RiskModel& model, const HistoryOptions& history,
                                 const FeatureOptions& features) {
  auto t0 = std::chrono::steady_clock::now();
  EvalReport report;
  report.history = history;
  auto h = GenerateHistory(history);
  if (!h.ok()) return h.status();
  report.faults = h->faults;
  report.false_alarm_signs = h->false_alarms;
  for (const Series& s : h->series) report.sudden_faults += s.sudden;
  auto scores = ScoreHistory(model, *h, features);
  if (!scores.ok()) return scores.status();
  EventOptions eo;
  eo.horizon = model.info().horizon;
  report.model = ScoreEvents(*h, *scores, model.info().threshold, eo);
  const SeriesScores baseline = BaselineScores(*h, HardwareRules(alerts::DefaultRules()));
  report.baseline = ScoreEvents(*h, baseline, 0.5, eo);  // any hardware rule firing
  report.seconds = SecondsSince(t0);
  return report;
}

}  // namespace gpuherd::predict
