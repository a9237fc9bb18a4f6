// gpuherd predict train|eval: the failure-risk model. train learns from
// generated fleet histories (and the stored telemetry with its fault events)
// and writes the model into the state directory; eval judges it on held-out
// generated histories next to the threshold alert rules.
#include <cmath>
#include <cstdio>
#include <memory>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/command.h"
#include "cli/table.h"
#include "host/clock.h"
#include "predict/train.h"

namespace gpuherd::cli {
namespace {

using nlohmann::json;

json MetricsJson(const predict::EventMetrics& m) {
  return {{"faults", m.faults},           {"detected", m.detected},
          {"alarm_episodes", m.episodes}, {"true_episodes", m.true_episodes},
          {"precision", m.precision},     {"recall", m.recall},
          {"f1", m.f1},                   {"roc_auc", m.roc_auc},
          {"mean_lead_min", m.mean_lead_min}, {"median_lead_min", m.median_lead_min},
          {"threshold", m.threshold}};
}

std::string Num(double v) { return std::isnan(v) ? "-" : fmt::format("{:.3f}", v); }

// --gpus and --days: the size of a generated history (`which`: "generated"
// for training, "held-out" for evaluation).
void AddHistorySizeOptions(CLI::App* cmd, int* gpus, int* days, const std::string& which) {
  cmd->add_option("--gpus", *gpus, "GPUs in the " + which + " history")->capture_default_str()
      ->check(CLI::Range(1, 4096));
  cmd->add_option("--days", *days, "Days of " + which + " history")->capture_default_str()
      ->check(CLI::Range(1, 365));
}

void AddTrain(CLI::App* predict, CommandContext* ctx) {
  struct Flags {
    uint64_t seed = 1;
    int gpus = 64;
    int days = 14;
    int rounds = 200;
    bool no_stored = false;
    bool json = false;
  };
  auto flags = std::make_shared<Flags>();
  CLI::App* cmd = predict->add_subcommand(
      "train", "Train the failure-risk model on generated histories and the stored telemetry");
  cmd->add_option("--seed", flags->seed, "Seed of the generated training history")->capture_default_str();
  AddHistorySizeOptions(cmd, &flags->gpus, &flags->days, "generated");
  cmd->add_option("--rounds", flags->rounds, "Boosting rounds (trees)")->capture_default_str()
      ->check(CLI::Range(1, 5000));
  cmd->add_flag("--no-stored", flags->no_stored, "Leave the stored telemetry history out");
  cmd->add_flag("--json", flags->json, "Print JSON");
  cmd->callback([ctx, flags] {
    const StateDir dir = ctx->dir();
    if (Status s = EnsureStateDir(dir); !s.ok()) return ctx->Fail(s);
    predict::TrainOptions o;
    o.generated.seed = flags->seed;
    o.generated.gpus = flags->gpus;
    o.generated.days = flags->days;
    o.params.rounds = flags->rounds;
    o.params.seed = flags->seed;
    if (!flags->no_stored) o.db_path = dir.db_path();
    predict::TrainReport report;
    auto model = predict::TrainModel(o, &report);
    if (!model.ok()) return ctx->Fail(model.status());
    model->mutable_info().trained_at = host::NewRealClock()->Now();
    const std::string path = predict::ModelPath(dir);
    if (Status s = model->Save(path); !s.ok()) return ctx->Fail(s);
    if (flags->json) {
      json out = {{"model", path},
                  {"rows", report.rows},
                  {"positives", report.positives},
                  {"generated", {{"seed", flags->seed}, {"gpus", flags->gpus}, {"days", flags->days},
                                 {"series", report.generated_series}, {"faults", report.generated_faults}}},
                  {"stored", {{"series", report.stored_series}, {"faults", report.stored_faults}}},
                  {"threshold", model->info().threshold},
                  {"validation", MetricsJson(report.validation)},
                  {"validation_seed", report.validation_seed},
                  {"seconds", {{"history", report.generate_s}, {"train", report.train_s},
                               {"validate", report.validate_s}}},
                  {"simulated", true}};
      std::printf("%s\n", out.dump(2).c_str());
      return;
    }
    std::printf("trained on simulated histories: seed %llu, %d GPUs x %d days (%d faults)",
                static_cast<unsigned long long>(flags->seed), flags->gpus, flags->days,
                report.generated_faults);
    std::printf("; stored history: %d series, %d faults\n", report.stored_series, report.stored_faults);
    std::printf("%zu windows, %zu within the horizon of a fault; history %.1f s, training %.1f s\n",
                report.rows, report.positives, report.generate_s, report.train_s);
    std::printf("alarm threshold %.3f, chosen on validation seed %llu: precision %.3f, recall %.3f, "
                "mean lead %.0f min\n",
                model->info().threshold, static_cast<unsigned long long>(report.validation_seed),
                report.validation.precision, report.validation.recall,
                report.validation.mean_lead_min);
    std::printf("model written to %s\n", path.c_str());
  });
}

void AddEval(CLI::App* predict, CommandContext* ctx) {
  struct Flags {
    uint64_t seed = 1001;
    int gpus = 64;
    int days = 14;
    std::string model;
    bool json = false;
  };
  auto flags = std::make_shared<Flags>();
  CLI::App* cmd = predict->add_subcommand(
      "eval", "Judge the model on held-out generated histories against the threshold alert rules");
  cmd->add_option("--seed", flags->seed, "Seed of the held-out history (not a training seed)")
      ->capture_default_str();
  AddHistorySizeOptions(cmd, &flags->gpus, &flags->days, "held-out");
  cmd->add_option("--model", flags->model, "Model file (default: the state directory's)");
  cmd->add_flag("--json", flags->json, "Print JSON");
  cmd->callback([ctx, flags] {
    const std::string path = flags->model.empty() ? predict::ModelPath(ctx->dir()) : flags->model;
    auto model = predict::RiskModel::Load(path);
    if (!model.ok()) return ctx->Fail(model.status());
    predict::HistoryOptions h;
    h.seed = flags->seed;
    h.gpus = flags->gpus;
    h.days = flags->days;
    auto report = predict::EvaluateModel(*model, h);
    if (!report.ok()) return ctx->Fail(report.status());
    if (flags->json) {
      json out = {{"model", path},
                  {"history", {{"seed", flags->seed}, {"gpus", flags->gpus}, {"days", flags->days},
                               {"faults", report->faults}, {"sudden_faults", report->sudden_faults},
                               {"false_alarm_signs", report->false_alarm_signs}, {"simulated", true}}},
                  {"horizon_min", model->info().horizon / kMinuteMs},
                  {"model_metrics", MetricsJson(report->model)},
                  {"baseline_metrics", MetricsJson(report->baseline)},
                  {"seconds", report->seconds}};
      std::printf("%s\n", out.dump(2).c_str());
      return;
    }
    std::printf("held-out simulated history: seed %llu, %d GPUs x %d days: %d faults (%d without "
                "warning), %d signs that fade without a fault\n",
                static_cast<unsigned long long>(flags->seed), flags->gpus, flags->days,
                report->faults, report->sudden_faults, report->false_alarm_signs);
    std::printf("horizon %lld min; an alarm episode is true when its GPU's fault follows within "
                "the horizon of its last alarm\n\n",
                static_cast<long long>(model->info().horizon / kMinuteMs));
    const auto& m = report->model;
    const auto& b = report->baseline;
    Table table({"", "MODEL", "THRESHOLD RULES"});
    table.AddRow({"precision", Num(m.precision), Num(b.precision)});
    table.AddRow({"recall", Num(m.recall), Num(b.recall)});
    table.AddRow({"F1", Num(m.f1), Num(b.f1)});
    table.AddRow({"ROC-AUC (minutes)", Num(m.roc_auc), Num(b.roc_auc)});
    table.AddRow({"mean lead (min)", fmt::format("{:.1f}", m.mean_lead_min),
                  fmt::format("{:.1f}", b.mean_lead_min)});
    table.AddRow({"median lead (min)", fmt::format("{:.0f}", m.median_lead_min),
                  fmt::format("{:.0f}", b.median_lead_min)});
    table.AddRow({"faults caught", fmt::format("{}/{}", m.detected, m.faults),
                  fmt::format("{}/{}", b.detected, b.faults)});
    table.AddRow({"alarm episodes", std::to_string(m.episodes), std::to_string(b.episodes)});
    table.AddRow({"threshold", fmt::format("risk >= {:.3f}", m.threshold), "any rule firing"});
    std::fputs(table.Render({1, 2}).c_str(), stdout);
  });
}

}  // namespace

void AddPredictCommands(CLI::App& app, CommandContext* ctx) {
  CLI::App* predict = app.add_subcommand("predict", "Failure prediction: train and evaluate the risk model");
  predict->require_subcommand(1);
  AddTrain(predict, ctx);
  AddEval(predict, ctx);
}

}  // namespace gpuherd::cli
