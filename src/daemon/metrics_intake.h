// Collects the metric lines running jobs append to GPUHERD_METRICS_FILE:
// reads each file's new bytes, parses complete lines (a partial last line
// waits for the next read), turns them into store rows and runs the
// anomaly checks of pipeline jobs. Lives on the event-loop thread (not
// thread-safe); it reads files but changes nothing outside itself.
//
// A job may write millions of lines. Two bounds keep that from holding the
// loop or filling the store:
// - A poll reads at most a round's budget of bytes and lines across all
//   jobs, shared round-robin (a flooding job cannot starve a quiet one); a
//   file's offset stays behind, and the rest is read at the next poll.
// - Past `full_lines` stored lines, a job's lines are thinned: kept are the
//   lines whose key (their step, else their line number) is a multiple of a
//   stride that doubles every `phase_lines` kept, the first line of the
//   objective at or past each ASHA rung, the line with the objective's best
//   value so far (stored before the next kept line, so that the best of the
//   kept lines up to any kept line is the best of all read up to it: what
//   ASHA ranks at a rung), and the last line of each attempt. Past
//   `max_kept_lines` only the rung, best and last lines are kept. Thinning
//   depends only on the lines, so a daemon that reads the file again after
//   a restart keeps the same lines.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/time.h"
#include "pipeline/anomaly.h"
#include "pipeline/early_stop.h"
#include "store/records.h"

namespace gpuherd::daemon {

class MetricsIntake {
 public:
  struct Options {
    // One poll of all jobs: at most 25 ms with its commit on the 2-core
    // build machine under a 10-job flood (bench/metric_flood_bench.cc).
    size_t round_bytes = 1 << 20;
    size_t round_lines = 8000;
    uint64_t full_lines = 1000;        // a job's first lines, all stored
    uint64_t phase_lines = 250;        // stride lines kept before the stride doubles
    uint64_t max_kept_lines = 10000;   // past it: rung, best and last lines only
  };
  // What one read may take.
  struct Budget {
    size_t bytes = 0;
    size_t lines = 0;
  };
  struct Source {
    int64_t job_id = 0;
    int64_t run_id = 0;       // 0 for a job outside any pipeline
    std::string node_id;
    int attempt = 1;          // which run of the node (or job) writes now
    std::string path;         // the metrics file
    std::optional<pipeline::AnomalyConfig> anomalies;  // none: lines are only stored
    // A pipeline step's objective: its best line is kept through thinning,
    // and with an ASHA policy the first line at or past each rung too.
    std::optional<pipeline::Objective> objective;
    std::optional<pipeline::EarlyStopPolicy> early_stop;
  };
  struct Found {
    int64_t job_id = 0;
    int64_t run_id = 0;
    std::string node_id;
    pipeline::Anomaly anomaly;
    bool after_end = false;  // read after the attempt ended: not to be acted on
  };

  MetricsIntake() : MetricsIntake(Options()) {}
  explicit MetricsIntake(Options options) : options_(options) {}

  // Starts watching a job's file, or moves a watched job on to a new
  // attempt (a fresh anomaly detector; the read position is kept, since
  // attempts append to the same file). With `catch_up`, the lines already
  // in the file are stored but raise no anomaly: a restarted daemon reads
  // them again, and its predecessor acted on them.
  void Watch(const Source& source, bool catch_up);
  // Reads what the watched files gained, within one round's budget shared
  // between them (or, when `job_id` is not 0, only that job's file, within
  // a share of it); appends rows to `rows` and anomalies to `found`.
  void Poll(TimeMs now, int64_t job_id, std::vector<store::MetricRecord>* rows, std::vector<Found>* found);
  // The job's attempt is over: its last line is stored once its file is
  // read to the end, and anomalies found after now are not to be acted on.
  // A `final` job is forgotten then.
  void EndAttempt(int64_t job_id, bool final, std::vector<store::MetricRecord>* rows);
  // Stall checks of the pipeline jobs.
  std::vector<Found> Tick(TimeMs now);
  void Forget(int64_t job_id) { watched_.erase(job_id); }
  // Whether any watched file has more to read than the last poll took.
  bool behind() const;

  // How far a job's intake got (the intake's own counts since it began
  // watching the job; a restarted daemon counts again as it reads again).
  struct Counts {
    uint64_t lines_read = 0;     // metric lines parsed
    uint64_t lines_kept = 0;     // stored; the rest were thinned
    uint64_t skipped_long = 0;
    uint64_t skipped_invalid = 0;
    bool behind = false;         // the file has more than was read so far
  };
  std::optional<Counts> counts(int64_t job_id) const;
  // The counts of the jobs whose counts changed since the last call
  // (forgotten jobs' last counts included), as of `now`.
  void TakeChangedCounts(TimeMs now, std::vector<store::MetricIntakeRecord>* out);
  // Lines of the job's file that were not stored: longer than
  // pipeline::kMaxMetricLineBytes, or not a metric line (bad JSON, too deep).
  struct Skipped {
    uint64_t too_long = 0;
    uint64_t invalid = 0;
  };
  Skipped skipped(int64_t job_id) const {
    auto it = watched_.find(job_id);
    return it == watched_.end() ? Skipped{} : Skipped{it->second.skipped_long, it->second.skipped_bad};
  }
  bool watching(int64_t job_id) const { return watched_.count(job_id) > 0; }

 private:
  // A line read but not (yet) stored: the best or the latest.
  struct Held {
    std::string line;
    TimeMs read_at = 0;
  };
  struct Watched {
    Source source;
    uint64_t offset = 0;
    uint64_t size = 0;        // the file's size at the last read
    std::string partial;      // bytes after the last newline
    std::unique_ptr<pipeline::AnomalyDetector> detector;
    bool catch_up = false;    // until the file is read up to its size when first read
    std::optional<uint64_t> catch_up_until;
    bool ended = false;       // the attempt is over (EndAttempt)
    bool final = false;       // the job is over: forgotten once read to the end
    bool changed = false;     // counts changed since TakeChangedCounts
    bool warned = false;      // about a line that is not a JSON object
    bool refused = false;     // warned that the file is not read (a link, FIFO, ...)
    bool skipping = false;    // inside an over-long line, until its newline
    uint64_t skipped_long = 0;
    uint64_t skipped_bad = 0;
    // Thinning (see the top of this file).
    uint64_t lines = 0;               // metric lines parsed
    uint64_t kept = 0;
    uint64_t stride = 1;
    uint64_t stride_kept = 0;         // kept at the current stride
    std::optional<int64_t> last_key;  // of the last kept line
    int64_t next_rung = 0;            // 0: no (more) rungs
    std::optional<double> best;       // the objective's best value read so far
    std::optional<Held> best_held;    // a better value not stored yet
    std::optional<Held> last_held;    // the latest line, when not stored
    bool behind() const { return offset < size; }
  };

  // Reads at most `budget` of the file; returns what it took.
  Budget Read(TimeMs now, Watched& w, Budget budget, std::vector<store::MetricRecord>* rows,
              std::vector<Found>* found);
  void Take(TimeMs now, Watched& w, std::string_view line, std::vector<store::MetricRecord>* rows,
            std::vector<Found>* found);
  // The row of a parsed line.
  store::MetricRecord Row(const Watched& w, const nlohmann::json& values, TimeMs read_at) const;
  // Stores a held line again (parsed anew: held lines are rare).
  void StoreHeld(Watched& w, const Held& held, std::vector<store::MetricRecord>* rows);
  // The end of an attempt whose file is read to the end: its held lines are
  // stored. Returns whether the job is to be forgotten.
  bool Finish(Watched& w, std::vector<store::MetricRecord>* rows);
  store::MetricIntakeRecord CountsRecord(int64_t job_id, const Watched& w) const;
  // Forgets a finished job, keeping its last counts for TakeChangedCounts.
  std::map<int64_t, Watched>::iterator Drop(std::map<int64_t, Watched>::iterator it);

  Options options_;
  std::map<int64_t, Watched> watched_;  // by job id
  std::vector<store::MetricIntakeRecord> dropped_;  // counts of jobs forgotten since TakeChangedCounts
  int64_t first_served_ = 0;            // the job read first at the last poll: the next poll starts after it
};

}  // namespace gpuherd::daemon
