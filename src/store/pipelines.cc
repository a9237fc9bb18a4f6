// The Store's pipeline and metric tables (schema version 5). Same class as
// store.cc; kept apart so that each file holds one family of tables.
#include <SQLiteCpp/Database.h>
#include <SQLiteCpp/Statement.h>

#include "store/migrations.h"
#include "store/store.h"

namespace gpuherd::store {
namespace {

constexpr const char* kRunColumns =
    "id, name, source_path, base_dir, yaml, overrides_json, run_dir, state, outcome, created, finished, user, "
    "uid, gid";
constexpr const char* kNodeColumns =
    "run_id, node_id, key, step, state, attempts, job_id, started, ended, reason, gpu_seconds, history_json";
constexpr const char* kMetricColumns = "job_id, run_id, node_id, attempt, step, time, line_json";

PipelineRunRecord ReadRun(SQLite::Statement& q) {
  PipelineRunRecord r;
  r.id = q.getColumn(0).getInt64();
  r.name = q.getColumn(1).getString();
  r.source_path = q.getColumn(2).getString();
  r.base_dir = q.getColumn(3).getString();
  r.yaml = q.getColumn(4).getString();
  r.overrides_json = q.getColumn(5).getString();
  r.run_dir = q.getColumn(6).getString();
  r.state = q.getColumn(7).getString();
  r.outcome = q.getColumn(8).getString();
  r.created = q.getColumn(9).getInt64();
  r.finished = q.getColumn(10).getInt64();
  r.user = q.getColumn(11).getString();
  r.uid = static_cast<uint32_t>(q.getColumn(12).getInt64());
  r.gid = static_cast<uint32_t>(q.getColumn(13).getInt64());
  return r;
}

PipelineNodeRecord ReadNode(SQLite::Statement& q) {
  PipelineNodeRecord n;
  n.run_id = q.getColumn(0).getInt64();
  n.node_id = q.getColumn(1).getString();
  n.key = q.getColumn(2).getString();
  n.step = q.getColumn(3).getString();
  n.state = q.getColumn(4).getString();
  n.attempts = q.getColumn(5).getInt();
  n.job_id = q.getColumn(6).getInt64();
  n.started = q.getColumn(7).getInt64();
  n.ended = q.getColumn(8).getInt64();
  n.reason = q.getColumn(9).getString();
  n.gpu_seconds = q.getColumn(10).getDouble();
  n.history_json = q.getColumn(11).getString();
  return n;
}

MetricRecord ReadMetric(SQLite::Statement& q) {
  MetricRecord m;
  m.job_id = q.getColumn(0).getInt64();
  m.run_id = q.getColumn(1).getInt64();
  m.node_id = q.getColumn(2).getString();
  m.attempt = q.getColumn(3).getInt();
  if (!q.getColumn(4).isNull()) m.step = q.getColumn(4).getInt64();
  m.time = q.getColumn(5).getInt64();
  m.line_json = q.getColumn(6).getString();
  return m;
}

}  // namespace

void Store::WritePipelines(const WriteBatch& batch, std::string* doing) {
  if (!batch.pipeline_runs.empty()) {
    SQLite::Statement q(*db_,
                        "INSERT INTO pipeline_runs (id, name, source_path, base_dir, yaml, overrides_json, run_dir, "
                        "state, outcome, created, finished, user, uid, gid) "
                        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
                        "ON CONFLICT (id) DO UPDATE SET state = excluded.state, outcome = excluded.outcome, "
                        "finished = excluded.finished");
    for (const PipelineRunRecord& r : batch.pipeline_runs) {
      *doing = "storing pipeline run " + std::to_string(r.id);
      q.reset();
      q.bind(1, r.id);
      q.bind(2, r.name);
      q.bind(3, r.source_path);
      q.bind(4, r.base_dir);
      q.bind(5, r.yaml);
      q.bind(6, r.overrides_json);
      q.bind(7, r.run_dir);
      q.bind(8, r.state);
      q.bind(9, r.outcome);
      q.bind(10, r.created);
      q.bind(11, r.finished);
      q.bind(12, r.user);
      q.bind(13, static_cast<int64_t>(r.uid));
      q.bind(14, static_cast<int64_t>(r.gid));
      q.exec();
    }
  }
  if (!batch.pipeline_nodes.empty()) {
    SQLite::Statement q(*db_,
                        "INSERT INTO pipeline_nodes (run_id, node_id, key, step, state, attempts, job_id, started, "
                        "ended, reason, gpu_seconds, history_json) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
                        "ON CONFLICT (run_id, node_id) DO UPDATE SET state = excluded.state, "
                        "attempts = excluded.attempts, job_id = excluded.job_id, started = excluded.started, "
                        "ended = excluded.ended, reason = excluded.reason, gpu_seconds = excluded.gpu_seconds, "
                        "history_json = excluded.history_json");
    for (const PipelineNodeRecord& n : batch.pipeline_nodes) {
      *doing = "storing node " + n.node_id + " of pipeline run " + std::to_string(n.run_id);
      q.reset();
      q.bind(1, n.run_id);
      q.bind(2, n.node_id);
      q.bind(3, n.key);
      q.bind(4, n.step);
      q.bind(5, n.state);
      q.bind(6, n.attempts);
      q.bind(7, n.job_id);
      q.bind(8, n.started);
      q.bind(9, n.ended);
      q.bind(10, n.reason);
      q.bind(11, n.gpu_seconds);
      q.bind(12, n.history_json);
      q.exec();
    }
  }
  if (!batch.metrics.empty()) {
    // A repeated step replaces the earlier line of its series: the node's
    // for a pipeline job, the job's own otherwise.
    SQLite::Statement replace_node(*db_, "DELETE FROM metrics WHERE run_id = ? AND node_id = ? AND step = ?");
    SQLite::Statement replace_job(*db_, "DELETE FROM metrics WHERE job_id = ? AND run_id = 0 AND step = ?");
    SQLite::Statement insert(*db_, std::string("INSERT INTO metrics (") + kMetricColumns +
                                       ") VALUES (?, ?, ?, ?, ?, ?, ?)");
    for (const MetricRecord& m : batch.metrics) {
      *doing = "storing a metric line of job " + std::to_string(m.job_id);
      if (m.step && m.run_id > 0) {
        replace_node.reset();
        replace_node.bind(1, m.run_id);
        replace_node.bind(2, m.node_id);
        replace_node.bind(3, *m.step);
        replace_node.exec();
      } else if (m.step) {
        replace_job.reset();
        replace_job.bind(1, m.job_id);
        replace_job.bind(2, *m.step);
        replace_job.exec();
      }
      insert.reset();
      insert.bind(1, m.job_id);
      insert.bind(2, m.run_id);
      insert.bind(3, m.node_id);
      insert.bind(4, m.attempt);
      if (m.step) insert.bind(5, *m.step); else insert.bind(5);
      insert.bind(6, m.time);
      insert.bind(7, m.line_json);
      insert.exec();
    }
  }
  if (!batch.metric_intake.empty()) {
    SQLite::Statement q(*db_,
                        "INSERT INTO metric_intake (job_id, lines_read, lines_kept, lines_skipped, behind, updated) "
                        "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (job_id) DO UPDATE SET lines_read = excluded.lines_read, "
                        "lines_kept = excluded.lines_kept, lines_skipped = excluded.lines_skipped, "
                        "behind = excluded.behind, updated = excluded.updated");
    for (const MetricIntakeRecord& m : batch.metric_intake) {
      *doing = "storing how far the metrics of job " + std::to_string(m.job_id) + " were read";
      q.reset();
      q.bind(1, m.job_id);
      q.bind(2, m.lines_read);
      q.bind(3, m.lines_kept);
      q.bind(4, m.lines_skipped);
      q.bind(5, m.behind ? 1 : 0);
      q.bind(6, m.updated);
      q.exec();
    }
  }
}

Result<std::vector<PipelineRunRecord>> Store::ListPipelineRuns(bool all, int limit) {
  try {
    SQLite::Statement q(*db_, std::string("SELECT ") + kRunColumns + " FROM pipeline_runs" +
                                  (all ? "" : " WHERE state = 'running'") + " ORDER BY id DESC LIMIT ?");
    q.bind(1, limit);
    std::vector<PipelineRunRecord> runs;
    while (q.executeStep()) runs.push_back(ReadRun(q));
    return runs;
  } catch (const SQLite::Exception& e) {
    return StatusFromSqlite(e, "cannot list pipeline runs in " + path_);
  }
}

Result<std::optional<PipelineRunRecord>> Store::GetPipelineRun(int64_t id) {
  try {
    SQLite::Statement q(*db_, std::string("SELECT ") + kRunColumns + " FROM pipeline_runs WHERE id = ?");
    q.bind(1, id);
    if (!q.executeStep()) return std::optional<PipelineRunRecord>();
    return std::optional<PipelineRunRecord>(ReadRun(q));
  } catch (const SQLite::Exception& e) {
    return StatusFromSqlite(e, "cannot read pipeline run " + std::to_string(id) + " from " + path_);
  }
}

Result<int64_t> Store::LastPipelineRunId() {
  try {
    SQLite::Statement q(*db_, "SELECT seq FROM sqlite_sequence WHERE name = 'pipeline_runs'");
    if (!q.executeStep()) return int64_t{0};
    return q.getColumn(0).getInt64();
  } catch (const SQLite::Exception& e) {
    return StatusFromSqlite(e, "cannot read the last pipeline run id from " + path_);
  }
}

Result<std::vector<PipelineNodeRecord>> Store::ListPipelineNodes(int64_t run_id) {
  try {
    SQLite::Statement q(*db_, std::string("SELECT ") + kNodeColumns + " FROM pipeline_nodes WHERE run_id = ?");
    q.bind(1, run_id);
    std::vector<PipelineNodeRecord> nodes;
    while (q.executeStep()) nodes.push_back(ReadNode(q));
    return nodes;
  } catch (const SQLite::Exception& e) {
    return StatusFromSqlite(e, "cannot list the nodes of pipeline run " + std::to_string(run_id) + " in " + path_);
  }
}

Result<std::vector<MetricRecord>> Store::ListRunMetrics(int64_t run_id, const std::string& node_id) {
  try {
    SQLite::Statement q(*db_, std::string("SELECT ") + kMetricColumns + " FROM metrics WHERE run_id = ?" +
                                  (node_id.empty() ? "" : " AND node_id = ?") +
                                  " ORDER BY node_id, step IS NULL, step, rowid");
    q.bind(1, run_id);
    if (!node_id.empty()) q.bind(2, node_id);
    std::vector<MetricRecord> lines;
    while (q.executeStep()) lines.push_back(ReadMetric(q));
    return lines;
  } catch (const SQLite::Exception& e) {
    return StatusFromSqlite(e, "cannot read the metrics of pipeline run " + std::to_string(run_id) + " from " +
                                   path_);
  }
}

Result<std::vector<MetricRecord>> Store::ListJobMetrics(int64_t job_id) {
  try {
    SQLite::Statement q(*db_, std::string("SELECT ") + kMetricColumns +
                                  " FROM metrics WHERE job_id = ? ORDER BY step IS NULL, step, rowid");
    q.bind(1, job_id);
    std::vector<MetricRecord> lines;
    while (q.executeStep()) lines.push_back(ReadMetric(q));
    return lines;
  } catch (const SQLite::Exception& e) {
    return StatusFromSqlite(e, "cannot read the metrics of job " + std::to_string(job_id) + " from " + path_);
  }
}

Result<std::optional<MetricIntakeRecord>> Store::GetMetricIntake(int64_t job_id) {
  try {
    SQLite::Statement q(*db_, "SELECT lines_read, lines_kept, lines_skipped, behind, updated FROM metric_intake "
                              "WHERE job_id = ?");
    q.bind(1, job_id);
    if (!q.executeStep()) return std::optional<MetricIntakeRecord>();
    MetricIntakeRecord r;
    r.job_id = job_id;
    r.lines_read = q.getColumn(0).getInt64();
    r.lines_kept = q.getColumn(1).getInt64();
    r.lines_skipped = q.getColumn(2).getInt64();
    r.behind = q.getColumn(3).getInt() != 0;
    r.updated = q.getColumn(4).getInt64();
    return std::optional<MetricIntakeRecord>(r);
  } catch (const SQLite::Exception& e) {
    return StatusFromSqlite(e, "cannot read how far the metrics of job " + std::to_string(job_id) + " were read from " +
                                   path_);
  }
}

}  // namespace gpuherd::store
