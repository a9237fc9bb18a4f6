// The metric flood of issue 29: 10 jobs, each with 190,000 short lines in
// its GPUHERD_METRICS_FILE. Runs the daemon's intake (MetricsIntake::Poll)
// round after round and commits each round's rows to a fresh state file, as
// one turn of the event loop does, and reports the longest turn (the loop's
// longest hold), the rounds needed, and how much the state file grew. The
// "unbudgeted" row reads as the intake did before budgets and thinning
// (4 MiB per job per poll, every line stored). Prints Markdown.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "daemon/metrics_intake.h"
#include "store/store.h"

namespace gpuherd {
namespace {

namespace fs = std::filesystem;
using Millis = std::chrono::duration<double, std::milli>;
using SteadyClock = std::chrono::steady_clock;

struct Outcome {
  double longest_ms = 0;
  double total_ms = 0;
  int rounds = 0;
  uint64_t rows = 0;
  uint64_t db_growth = 0;
};

uint64_t FileBytes(const fs::path& p) {
  std::error_code ec;
  uint64_t n = fs::file_size(p, ec);
  return ec ? 0 : n;
}

uint64_t DbBytes(const fs::path& db) {
  return FileBytes(db) + FileBytes(db.string() + "-wal");
}

Result<Outcome> Flood(const fs::path& dir, int jobs, daemon::MetricsIntake::Options options, int max_rounds) {
  const fs::path db = dir / "state.db";
  fs::remove(db);
  fs::remove(db.string() + "-wal");
  fs::remove(db.string() + "-shm");
  auto store = store::Store::Open(db.string());
  if (!store.ok()) return store.status();
  const uint64_t before = DbBytes(db);
  daemon::MetricsIntake intake(options);
  for (int j = 1; j <= jobs; ++j) {
    daemon::MetricsIntake::Source s;
    s.job_id = j;
    s.path = (dir / ("metrics-" + std::to_string(j) + ".jsonl")).string();
    intake.Watch(s, false);
  }
  Outcome out;
  TimeMs now = 1'767'225'600'000;
  do {
    const auto start = SteadyClock::now();
    store::WriteBatch batch;
    std::vector<daemon::MetricsIntake::Found> found;
    intake.Poll(now, 0, &batch.metrics, &found);
    intake.TakeChangedCounts(now, &batch.metric_intake);
    out.rows += batch.metrics.size();
    if (Status s = (*store)->Commit(&batch); !s.ok()) return s;
    const double ms = Millis(SteadyClock::now() - start).count();
    out.longest_ms = std::max(out.longest_ms, ms);
    out.total_ms += ms;
    ++out.rounds;
    now += 200;
  } while (intake.behind() && out.rounds < max_rounds);
  for (int j = 1; j <= jobs; ++j) {
    store::WriteBatch batch;
    intake.EndAttempt(j, true, &batch.metrics);
    out.rows += batch.metrics.size();
    if (Status s = (*store)->Commit(&batch); !s.ok()) return s;
  }
  store->reset();  // checkpoints the WAL into the file
  out.db_growth = DbBytes(db) - std::min(before, DbBytes(db));
  return out;
}

int Run(int jobs, int lines, daemon::MetricsIntake::Options budgeted) {
  const fs::path dir = fs::temp_directory_path() / ("gpuherd_metric_flood_bench_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  for (int j = 1; j <= jobs; ++j) {
    std::ofstream out(dir / ("metrics-" + std::to_string(j) + ".jsonl"), std::ios::binary);
    for (int i = 1; i <= lines; ++i) out << "{\"step\": " << i << ", \"loss\": " << 1.0 / i << "}\n";
  }
  std::printf("%d jobs x %d lines (%.1f MiB in all); one round = Poll + the commit of its rows; budget %zu lines, "
              "%zu bytes\n\n", jobs, lines, static_cast<double>(FileBytes(dir / "metrics-1.jsonl") * jobs) / (1 << 20),
              budgeted.round_lines, budgeted.round_bytes);
  std::printf("| intake | longest round (ms) | rounds | total (ms) | rows stored | state.db growth (MiB) |\n");
  std::printf("|---|---:|---:|---:|---:|---:|\n");
  daemon::MetricsIntake::Options old;
  old.round_bytes = size_t{4 << 20} * jobs;
  old.round_lines = SIZE_MAX;
  old.full_lines = old.max_kept_lines = UINT64_MAX;
  struct Row {
    const char* name;
    daemon::MetricsIntake::Options options;
    int max_rounds;
  };
  for (const Row& row : {Row{"budgeted and thinned", budgeted, 100000},
                         Row{"unbudgeted, every line stored (one round)", old, 1}}) {
    auto r = Flood(dir, jobs, row.options, row.max_rounds);
    if (!r.ok()) {
      std::fprintf(stderr, "metric_flood_bench: %s\n", r.status().ToString().c_str());
      fs::remove_all(dir);
      return 1;
    }
    std::printf("| %s | %.1f | %d | %.0f | %llu | %.2f |\n", row.name, r->longest_ms, r->rounds, r->total_ms,
                static_cast<unsigned long long>(r->rows), static_cast<double>(r->db_growth) / (1 << 20));
  }
  fs::remove_all(dir);
  return 0;
}

}  // namespace
}  // namespace gpuherd

int main(int argc, char** argv) {
  CLI::App app{"The metric flood: the intake's longest round and the state file's growth"};
  int jobs = 10, lines = 190000;
  app.add_option("--jobs", jobs, "Jobs flooding their metrics files");
  app.add_option("--lines", lines, "Lines per job");
  gpuherd::daemon::MetricsIntake::Options options;
  app.add_option("--round-lines", options.round_lines, "Lines one poll reads across all jobs");
  app.add_option("--round-bytes", options.round_bytes, "Bytes one poll reads across all jobs");
  CLI11_PARSE(app, argc, argv);
  return gpuherd::Run(jobs, lines, options);
}
