// Collects the metric lines running jobs append to GPUHERD_METRICS_FILE:
// reads each file's new bytes, parses complete lines (a partial last line
// waits for the next read), turns them into store rows and runs the
// anomaly checks of pipeline jobs. Lives on the event-loop thread (not
// thread-safe); it reads files but changes nothing outside itself.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/time.h"
#include "pipeline/anomaly.h"
#include "store/records.h"

namespace gpuherd::daemon {

class MetricsIntake {
 public:
  struct Source {
    int64_t job_id = 0;
    int64_t run_id = 0;       // 0 for a job outside any pipeline
    std::string node_id;
    int attempt = 1;          // which run of the node (or job) writes now
    std::string path;         // the metrics file
    std::optional<pipeline::AnomalyConfig> anomalies;  // none: lines are only stored
  };
  struct Found {
    int64_t job_id = 0;
    int64_t run_id = 0;
    std::string node_id;
    pipeline::Anomaly anomaly;
  };

  // Starts watching a job's file, or moves a watched job on to a new
  // attempt (a fresh anomaly detector; the read position is kept, since
  // attempts append to the same file). With `catch_up`, the lines already
  // in the file are stored but raise no anomaly: a restarted daemon reads
  // them again, and its predecessor acted on them.
  void Watch(const Source& source, bool catch_up);
  // Reads what every watched file (or only `job_id`'s, when not 0) gained;
  // appends rows to `rows` and anomalies to `found`.
  void Poll(TimeMs now, int64_t job_id, std::vector<store::MetricRecord>* rows, std::vector<Found>* found);
  // Stall checks of the pipeline jobs.
  std::vector<Found> Tick(TimeMs now);
  void Forget(int64_t job_id) { watched_.erase(job_id); }
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
  struct Watched {
    Source source;
    uint64_t offset = 0;
    std::string partial;      // bytes after the last newline
    std::unique_ptr<pipeline::AnomalyDetector> detector;
    bool catch_up = false;    // until the first read is done
    bool warned = false;      // about a line that is not a JSON object
    bool refused = false;     // warned that the file is not read (a link, FIFO, ...)
    bool skipping = false;    // inside an over-long line, until its newline
    uint64_t skipped_long = 0;
    uint64_t skipped_bad = 0;
  };

  void Read(TimeMs now, Watched& w, std::vector<store::MetricRecord>* rows, std::vector<Found>* found);
  void Take(TimeMs now, Watched& w, std::string_view line, std::vector<store::MetricRecord>* rows,
            std::vector<Found>* found);

  std::map<int64_t, Watched> watched_;  // by job id
};

}  // namespace gpuherd::daemon
