// The cost of sampling: (1) one round (driver Sample for every GPU, then
// Telemetry::Ingest) on simulated fleets of 8, 64 and 1,024 GPUs; (2) the size
// of the store after a simulated day of 8 GPUs at 5 s, written the way the
// daemon writes it (one batch per round). Time is simulated; only the
// measurements read the real clock. Prints Markdown tables.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <system_error>
#include <vector>

#include <CLI/CLI.hpp>

#include "core/status.h"
#include "core/time.h"
#include "gpu/sim/sim_driver.h"
#include "host/clock.h"
#include "store/records.h"
#include "store/store.h"
#include "telemetry/records_convert.h"
#include "telemetry/sampler.h"
#include "telemetry/telemetry.h"

namespace gpuherd {
namespace {

namespace fs = std::filesystem;
using Micros = std::chrono::duration<double, std::micro>;
using SteadyClock = std::chrono::steady_clock;

constexpr TimeMs kSimStart = 1'767'225'600'000;  // 2026-01-01T00:00:00Z
constexpr DurationMs kInterval = telemetry::kDefaultSampleInterval;

struct SimFleet {
  std::unique_ptr<gpu::sim::SimDriver> driver;
  gpu::Fleet fleet;
};

// A fleet where every other GPU runs a job, so readings and rollups vary.
Result<SimFleet> OpenFleet(int count, const std::string& scenario_path) {
  gpu::sim::SimOptions options;
  options.count = count;
  options.scenario_path = scenario_path;
  options.start = kSimStart;
  Result<std::unique_ptr<gpu::sim::SimDriver>> driver = gpu::sim::OpenSimDriver(options);
  if (!driver.ok()) return driver.status();
  Result<gpu::Fleet> fleet = (*driver)->Discover();
  if (!fleet.ok()) return fleet.status();
  for (int i = 0; i < (*driver)->size(); i += 2) {
    (*driver)->SetLoad(i, gpu::sim::Load{0.85, 0, {}});
  }
  return SimFleet{std::move(driver).value(), std::move(fleet).value()};
}

double Percentile(std::vector<double> values, double p) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  size_t rank = static_cast<size_t>(std::ceil(p / 100.0 * values.size()));
  return values[std::clamp<size_t>(rank, 1, values.size()) - 1];
}

struct RoundCost {
  int gpus = 0;
  int rounds = 0;
  double median_us = 0, p99_us = 0;
  double median_ingest_us = 0;
  int64_t unanswered = 0;  // readings that failed; a healthy simulated fleet has none
};

Result<RoundCost> MeasureRounds(int gpus, int rounds) {
  Result<SimFleet> sim = OpenFleet(gpus, "");
  if (!sim.ok()) return sim.status();
  host::FakeClock clock(kSimStart);
  Result<std::unique_ptr<telemetry::Sampler>> sampler =
      telemetry::Sampler::Create(sim->driver.get(), &clock, sim->fleet);
  if (!sampler.ok()) return sampler.status();
  telemetry::Telemetry telemetry;
  telemetry.SetFleet(sim->fleet);

  std::vector<double> total_us, ingest_us;
  total_us.reserve(rounds);
  ingest_us.reserve(rounds);
  // Measures the steady state: the warm-up fills every ring, so later rounds
  // overwrite readings instead of touching fresh memory.
  const int warmup = static_cast<int>(telemetry::TelemetryOptions{}.ring_capacity) + 10;
  int64_t unanswered = 0;
  TimeMs now = kSimStart;
  for (int i = 0; i < warmup + rounds; ++i, now += kInterval) {
    auto began = SteadyClock::now();
    Result<telemetry::SampleRound> round = (*sampler)->SampleOnce(now);
    if (!round.ok()) return round.status();
    auto sampled = SteadyClock::now();
    telemetry::IngestResult result = telemetry.Ingest(*round);
    auto ingested = SteadyClock::now();
    for (const telemetry::GpuReading& reading : round->readings) {
      if (!reading.sample.ok()) ++unanswered;
    }
    if (i < warmup) continue;
    total_us.push_back(Micros(ingested - began).count());
    ingest_us.push_back(Micros(ingested - sampled).count());
  }
  return RoundCost{gpus, rounds, Percentile(total_us, 50), Percentile(total_us, 99),
                   Percentile(ingest_us, 50), unanswered};
}

struct StoreDay {
  int gpus = 0;
  int64_t rounds = 0;
  int64_t gpu_rows = 0, rollup_rows = 0, event_rows = 0, commits = 0;
  uint64_t file_bytes = 0;
  double wall_s = 0;
};

uint64_t FileSize(const fs::path& path) {
  std::error_code ec;
  uint64_t size = fs::file_size(path, ec);
  return ec ? 0 : size;
}

Result<StoreDay> SimulateDay(const fs::path& dir, int gpus, DurationMs span,
                             const std::string& scenario_path, bool synchronous_full) {
  Result<SimFleet> sim = OpenFleet(gpus, scenario_path);
  if (!sim.ok()) return sim.status();
  fs::path db_path = dir / "gpuherd.db";
  StoreDay day;
  day.gpus = static_cast<int>(sim->fleet.gpus.size());
  auto began = SteadyClock::now();
  {
    Result<std::unique_ptr<store::Store>> store =
        store::Store::Open(db_path.string(), store::StoreOptions{synchronous_full, false});
    if (!store.ok()) return store.status().Annotate("open " + db_path.string());
    host::FakeClock clock(kSimStart);
    Result<std::unique_ptr<telemetry::Sampler>> sampler =
        telemetry::Sampler::Create(sim->driver.get(), &clock, sim->fleet);
    if (!sampler.ok()) return sampler.status();
    telemetry::Telemetry telemetry;
    telemetry.SetFleet(sim->fleet);

    auto commit = [&](store::WriteBatch& batch) -> Status {
      if (batch.empty()) return Status::Ok();
      day.gpu_rows += static_cast<int64_t>(batch.gpus.size());
      day.rollup_rows += static_cast<int64_t>(batch.rollups.size());
      day.event_rows += static_cast<int64_t>(batch.events.size());
      ++day.commits;
      return (*store)->Commit(&batch);
    };

    store::WriteBatch first;
    for (const gpu::GpuInfo& info : sim->fleet.gpus) {
      first.gpus.push_back(telemetry::ToGpuRecord(info, kSimStart));
    }
    GPUHERD_RETURN_IF_ERROR(commit(first));

    for (TimeMs now = kSimStart; now < kSimStart + span; now += kInterval) {
      Result<telemetry::SampleRound> round = (*sampler)->SampleOnce(now);
      if (!round.ok()) return round.status();
      telemetry::IngestResult result = telemetry.Ingest(*round);
      store::WriteBatch batch;
      batch.rollups = std::move(result.rollups);
      batch.events = std::move(result.events);
      GPUHERD_RETURN_IF_ERROR(commit(batch));
      ++day.rounds;
    }
    store::WriteBatch last;
    last.rollups = telemetry.Flush();
    GPUHERD_RETURN_IF_ERROR(commit(last));
  }  // closing the store checkpoints its WAL into the main file
  day.wall_s = std::chrono::duration<double>(SteadyClock::now() - began).count();
  day.file_bytes = FileSize(db_path) + FileSize(db_path.string() + "-wal") +
                   FileSize(db_path.string() + "-shm");
  return day;
}

int Run(int argc, char** argv) {
  CLI::App app{"Measures the cost of sampling GPUs and the store's growth (simulated fleet)."};
  std::string dir;
  double hours = 24;
  std::string scenario;
  bool normal_sync = false;
  double scale = 1.0;
  app.add_option("--dir", dir, "Directory for the store file (default: a new temporary one)");
  app.add_option("--hours", hours, "Simulated hours for the store test")
      ->check(CLI::PositiveNumber);
  app.add_option("--scenario", scenario, "Scenario file for the store test's fleet")
      ->check(CLI::ExistingFile);
  app.add_flag("--normal-sync", normal_sync,
               "Commit with synchronous=NORMAL instead of the daemon's FULL");
  app.add_option("--scale", scale, "Multiplies the number of measured rounds (0.1 for a smoke run)")
      ->check(CLI::PositiveNumber);
  CLI11_PARSE(app, argc, argv);

  std::printf("Simulated fleet (gpu::sim); time is simulated, costs are real.\n\n");
  std::printf("## One sampling round (driver Sample for every GPU + Telemetry::Ingest)\n\n");
  std::printf("Steady state: measured after the per-GPU rings have filled.\n\n");
  std::printf("| GPUs | rounds | median µs/round | p99 µs/round | median µs/GPU | Ingest share | unanswered |\n");
  std::printf("|---:|---:|---:|---:|---:|---:|---:|\n");
  for (int gpus : {8, 64, 1024}) {
    int rounds = std::max(50, static_cast<int>(scale * std::clamp(200'000 / gpus, 200, 5000)));
    Result<RoundCost> cost = MeasureRounds(gpus, rounds);
    if (!cost.ok()) {
      std::fprintf(stderr, "sampling_bench: %d GPUs: %s\n", gpus, cost.status().ToString().c_str());
      return 1;
    }
    std::printf("| %d | %d | %.1f | %.1f | %.2f | %.0f%% | %lld |\n", cost->gpus, cost->rounds,
                cost->median_us, cost->p99_us, cost->median_us / cost->gpus,
                100.0 * cost->median_ingest_us / cost->median_us,
                static_cast<long long>(cost->unanswered));
    std::fflush(stdout);
  }

  fs::path store_dir;
  bool remove_dir = false;
  std::error_code ec;
  if (dir.empty()) {
    std::string pattern = (fs::temp_directory_path() / "gpuherd-bench-XXXXXX").string();
    if (mkdtemp(pattern.data()) == nullptr) {
      std::perror("sampling_bench: cannot create a temporary directory");
      return 1;
    }
    store_dir = pattern;
    remove_dir = true;
  } else {
    store_dir = dir;
    fs::create_directories(store_dir, ec);
    if (ec || fs::exists(store_dir / "gpuherd.db")) {
      std::fprintf(stderr, "sampling_bench: %s must be a new or empty directory\n", dir.c_str());
      return 1;
    }
  }
  DurationMs span = static_cast<DurationMs>(hours * kHourMs);
  Result<StoreDay> day = SimulateDay(store_dir, 8, span, scenario, !normal_sync);
  if (remove_dir) fs::remove_all(store_dir, ec);
  if (!day.ok()) {
    std::fprintf(stderr, "sampling_bench: store test: %s\n", day.status().ToString().c_str());
    return 1;
  }
  std::printf("\n## Store after %s of %d GPUs sampled every %s (synchronous=%s)\n\n",
              FormatDuration(span).c_str(), day->gpus, FormatDuration(kInterval).c_str(),
              normal_sync ? "NORMAL" : "FULL");
  std::printf("| rounds | commits | GPU rows | rollup rows | event rows | file MiB | bytes/rollup | wall s |\n");
  std::printf("|---:|---:|---:|---:|---:|---:|---:|---:|\n");
  std::printf("| %lld | %lld | %lld | %lld | %lld | %.2f | %.0f | %.1f |\n",
              static_cast<long long>(day->rounds), static_cast<long long>(day->commits),
              static_cast<long long>(day->gpu_rows), static_cast<long long>(day->rollup_rows),
              static_cast<long long>(day->event_rows), day->file_bytes / (1024.0 * 1024.0),
              day->rollup_rows > 0 ? static_cast<double>(day->file_bytes) / day->rollup_rows : 0.0,
              day->wall_s);
  return 0;
}

}  // namespace
}  // namespace gpuherd

int main(int argc, char** argv) { return gpuherd::Run(argc, argv); }
