// Store::Prepared apart from store.cc, so that the parsers' sanitizer build
// (fuzz/CMakeLists.txt), which links the idempotency table's code without the
// rest of the store, has it too.
#include <SQLiteCpp/Database.h>
#include <SQLiteCpp/Statement.h>

#include "store/store.h"

namespace gpuherd::store {

SQLite::Statement& Store::Prepared(std::unique_ptr<SQLite::Statement>* slot, const char* sql) {
  if (!*slot) *slot = std::make_unique<SQLite::Statement>(*db_, sql);
  // A statement that failed last time must be reset before it runs again.
  (*slot)->tryReset();
  return **slot;
}

}  // namespace gpuherd::store
