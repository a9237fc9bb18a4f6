// The Store's idempotency keys (schema version 9). Same class as store.cc.
#include <SQLiteCpp/Database.h>
#include <SQLiteCpp/Statement.h>

#include "store/migrations.h"
#include "store/store.h"

namespace gpuherd::store {

Result<std::optional<IdempotencyRecord>> Store::GetIdempotency(uint32_t uid, const std::string& key) {
  try {
    SQLite::Statement& q = Prepared(&get_idempotency_,
                                    "SELECT request, created, status, content_type, body FROM idempotency_keys"
                                    " WHERE uid = ? AND key = ?");
    q.bind(1, static_cast<int64_t>(uid));
    q.bind(2, key);
    if (!q.executeStep()) return std::optional<IdempotencyRecord>();
    // Reset once read: a statement left on its row would hold the
    // connection's read transaction open.
    struct ResetAfter {
      SQLite::Statement& q;
      ~ResetAfter() { q.tryReset(); }
    } reset_after{q};
    IdempotencyRecord r;
    r.uid = uid;
    r.key = key;
    r.request = q.getColumn(0).getString();
    r.created = q.getColumn(1).getInt64();
    r.status = q.getColumn(2).getInt();
    r.content_type = q.getColumn(3).getString();
    r.body = q.getColumn(4).getString();
    return std::optional<IdempotencyRecord>(std::move(r));
  } catch (const SQLite::Exception& e) {
    return StatusFromSqlite(e, "cannot read an idempotency key from " + path_);
  }
}

// Inside Commit's transaction: expiry first, so that a key sent again after
// it expired is stored afresh.
void Store::WriteIdempotency(const WriteBatch& batch) {
  if (batch.idempotency_expire_before > 0) {
    SQLite::Statement del(*db_, "DELETE FROM idempotency_keys WHERE created < ?");
    del.bind(1, batch.idempotency_expire_before);
    del.exec();
  }
  if (batch.idempotency.empty()) return;
  SQLite::Statement& q =
      Prepared(&insert_idempotency_,
               "INSERT OR REPLACE INTO idempotency_keys (uid, key, request, created, status, content_type, body)"
               " VALUES (?, ?, ?, ?, ?, ?, ?)");
  for (const IdempotencyRecord& r : batch.idempotency) {
    q.reset();
    q.bind(1, static_cast<int64_t>(r.uid));
    q.bind(2, r.key);
    q.bind(3, r.request);
    q.bind(4, r.created);
    q.bind(5, r.status);
    q.bind(6, r.content_type);
    q.bind(7, r.body);
    q.exec();
  }
}

}  // namespace gpuherd::store
