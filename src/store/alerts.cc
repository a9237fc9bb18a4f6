// The Store's alert table (schema version 4). Same class as store.cc; kept
// apart so that each file holds one family of tables.
#include <SQLiteCpp/Database.h>
#include <SQLiteCpp/Statement.h>

#include "store/migrations.h"
#include "store/store.h"

namespace gpuherd::store {
namespace {

constexpr const char* kAlertColumns =
    "rule, subject, gpu_index, state, pending_since, fired_at, resolved_at, value, severity, action, summary";

AlertRecord ReadAlert(SQLite::Statement& q) {
  AlertRecord a;
  a.rule = q.getColumn(0).getString();
  a.subject = q.getColumn(1).getString();
  a.gpu_index = q.getColumn(2).getInt();
  a.state = q.getColumn(3).getString();
  a.pending_since = q.getColumn(4).getInt64();
  a.fired_at = q.getColumn(5).getInt64();
  a.resolved_at = q.getColumn(6).getInt64();
  a.value = q.getColumn(7).getDouble();
  // The column's CHECK admits only the three names.
  a.severity = ParseSeverity(q.getColumn(8).getString()).value_or(Severity::kWarning);
  a.action = q.getColumn(9).getString();
  a.summary = q.getColumn(10).getString();
  return a;
}

}  // namespace

void Store::WriteAlert(const AlertRecord& a) {
  if (a.state == "inactive") {
    SQLite::Statement q(*db_, "DELETE FROM alerts WHERE rule = ? AND subject = ? AND pending_since = ?");
    q.bind(1, a.rule);
    q.bind(2, a.subject);
    q.bind(3, a.pending_since);
    q.exec();
    return;
  }
  SQLite::Statement q(*db_, std::string("INSERT OR REPLACE INTO alerts (") + kAlertColumns +
                                ") VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)");
  q.bind(1, a.rule);
  q.bind(2, a.subject);
  q.bind(3, a.gpu_index);
  q.bind(4, a.state);
  q.bind(5, a.pending_since);
  q.bind(6, a.fired_at);
  q.bind(7, a.resolved_at);
  q.bind(8, a.value);
  q.bind(9, SeverityName(a.severity));
  q.bind(10, a.action);
  q.bind(11, a.summary);
  q.exec();
}

Result<std::vector<AlertRecord>> Store::ListActiveAlerts() {
  try {
    SQLite::Statement q(*db_, std::string("SELECT ") + kAlertColumns +
                                  " FROM alerts WHERE state <> 'resolved' ORDER BY rule, subject, pending_since");
    std::vector<AlertRecord> alerts;
    while (q.executeStep()) alerts.push_back(ReadAlert(q));
    return alerts;
  } catch (const SQLite::Exception& e) {
    return StatusFromSqlite(e, "cannot list the active alerts in " + path_);
  }
}

Result<std::vector<AlertRecord>> Store::ListResolvedAlerts(TimeMs since, int limit) {
  if (limit <= 0) return InvalidArgument("alert limit must be positive, got " + std::to_string(limit));
  try {
    SQLite::Statement q(*db_, std::string("SELECT ") + kAlertColumns +
                                  " FROM alerts WHERE state = 'resolved' AND resolved_at >= ?"
                                  " ORDER BY resolved_at DESC, rule, subject LIMIT ?");
    q.bind(1, since);
    q.bind(2, limit);
    std::vector<AlertRecord> alerts;
    while (q.executeStep()) alerts.push_back(ReadAlert(q));
    return alerts;
  } catch (const SQLite::Exception& e) {
    return StatusFromSqlite(e, "cannot list the resolved alerts in " + path_);
  }
}

Status Store::PruneResolvedAlerts(TimeMs older_than) {
  GPUHERD_RETURN_IF_ERROR(CheckWritable("prune alerts"));
  try {
    SQLite::Statement q(*db_, "DELETE FROM alerts WHERE state = 'resolved' AND resolved_at < ?");
    q.bind(1, older_than);
    q.exec();
    return Status::Ok();
  } catch (const SQLite::Exception& e) {
    return StatusFromSqlite(e, "cannot prune resolved alerts in " + path_);
  }
}

}  // namespace gpuherd::store
