// The Store's GPU health transitions and imported passports (schema version
// 8). Same class as store.cc; kept apart so that each file holds one family of
// tables.
#include <SQLiteCpp/Database.h>
#include <SQLiteCpp/Statement.h>
#include <SQLiteCpp/Transaction.h>

#include "store/migrations.h"
#include "store/store.h"

namespace gpuherd::store {

void Store::InsertHealthTransition(HealthTransitionRecord* r) {
  SQLite::Statement q(*db_,
                      "INSERT INTO gpu_health_transitions (time, gpu_uuid, from_state, to_state, reason, "
                      "evidence_json, shadow) VALUES (?, ?, ?, ?, ?, ?, ?)");
  q.bind(1, r->time);
  q.bind(2, r->gpu_uuid);
  q.bind(3, r->from_state);
  q.bind(4, r->to_state);
  q.bind(5, r->reason);
  q.bind(6, r->evidence_json);
  q.bind(7, r->shadow ? 1 : 0);
  q.exec();
  r->id = db_->getLastInsertRowid();
}

Status Store::AppendHealthTransitions(std::vector<HealthTransitionRecord>* rows) {
  if (Status s = CheckWritable("record GPU health transitions"); !s.ok()) return s;
  try {
    SQLite::Transaction tx(*db_);
    std::vector<HealthTransitionRecord> written = *rows;
    for (HealthTransitionRecord& r : written) InsertHealthTransition(&r);
    tx.commit();
    *rows = std::move(written);
    return Status::Ok();
  } catch (const SQLite::Exception& e) {
    return StatusFromSqlite(e, "cannot record GPU health transitions in " + path_);
  }
}

Result<std::vector<HealthTransitionRecord>> Store::ListHealthTransitions(const std::string& gpu_uuid) {
  try {
    SQLite::Statement q(*db_,
                        "SELECT id, time, gpu_uuid, from_state, to_state, reason, evidence_json, shadow "
                        "FROM gpu_health_transitions WHERE gpu_uuid = ? ORDER BY id");
    q.bind(1, gpu_uuid);
    std::vector<HealthTransitionRecord> out;
    while (q.executeStep()) {
      HealthTransitionRecord r;
      r.id = q.getColumn(0).getInt64();
      r.time = q.getColumn(1).getInt64();
      r.gpu_uuid = q.getColumn(2).getString();
      r.from_state = q.getColumn(3).getString();
      r.to_state = q.getColumn(4).getString();
      r.reason = q.getColumn(5).getString();
      r.evidence_json = q.getColumn(6).getString();
      r.shadow = q.getColumn(7).getInt() != 0;
      out.push_back(std::move(r));
    }
    return out;
  } catch (const SQLite::Exception& e) {
    return StatusFromSqlite(e, "cannot read the health transitions of " + gpu_uuid + " in " + path_);
  }
}

Result<int64_t> Store::CountSampledMinutes(const std::string& gpu_uuid) {
  try {
    SQLite::Statement q(*db_, "SELECT COUNT(*) FROM rollups WHERE uuid = ? AND samples > 0");
    q.bind(1, gpu_uuid);
    q.executeStep();
    return q.getColumn(0).getInt64();
  } catch (const SQLite::Exception& e) {
    return StatusFromSqlite(e, "cannot count the readings of " + gpu_uuid + " in " + path_);
  }
}

Status Store::SavePassportImport(const PassportImportRecord& r) {
  if (Status s = CheckWritable("import a passport"); !s.ok()) return s;
  try {
    SQLite::Statement q(*db_,
                        "INSERT OR REPLACE INTO passport_imports (card_key, source, imported_at, passport_json) "
                        "VALUES (?, ?, ?, ?)");
    q.bind(1, r.card_key);
    q.bind(2, r.source);
    q.bind(3, r.imported_at);
    q.bind(4, r.passport_json);
    q.exec();
    return Status::Ok();
  } catch (const SQLite::Exception& e) {
    return StatusFromSqlite(e, "cannot import the passport of " + r.card_key + " into " + path_);
  }
}

Result<std::vector<PassportImportRecord>> Store::ListPassportImports(const std::string& card_key) {
  try {
    SQLite::Statement q(*db_,
                        "SELECT card_key, source, imported_at, passport_json FROM passport_imports "
                        "WHERE card_key = ? ORDER BY imported_at, source");
    q.bind(1, card_key);
    std::vector<PassportImportRecord> out;
    while (q.executeStep()) {
      out.push_back({q.getColumn(0).getString(), q.getColumn(1).getString(), q.getColumn(2).getInt64(),
                     q.getColumn(3).getString()});
    }
    return out;
  } catch (const SQLite::Exception& e) {
    return StatusFromSqlite(e, "cannot read imported passports of " + card_key + " in " + path_);
  }
}

}  // namespace gpuherd::store
