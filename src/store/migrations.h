// The versioned schema of the state file: an ordered list of steps whose count
// is recorded in `PRAGMA user_version`. Private to the store module.
#pragma once

#include <span>
#include <string>

#include <SQLiteCpp/Database.h>
#include <SQLiteCpp/Exception.h>

#include "core/status.h"

namespace gpuherd::store {

// One step of the schema. Adding a version is adding one entry to the list in
// migrations.cc; a step is never edited once released, because files in the
// field already carry it.
struct Migration {
  int version;           // user_version once this step has run; 1, 2, 3, ...
  const char* summary;   // for error messages: "jobs tables"
  std::string (*sql)();  // the statements of the step, run as one script
};

// How many RollupMetric values, in enum order, have rollup columns once every
// step has run. A new RollupMetric needs a step that adds its three columns.
constexpr int kRollupMetricsWithColumns = 10;

// The steps of this build, oldest first.
std::span<const Migration> Migrations();
int LatestSchemaVersion();

// The user_version of an open database (0 for a new, empty file).
Result<int> ReadSchemaVersion(SQLite::Database& db);

// Runs every step of `migrations` newer than the file, each in its own
// IMMEDIATE transaction, so a failure leaves the file at the last good version
// and a second process opening the file at the same time waits rather than
// repeating a step. A file newer than the last step is refused untouched.
// `name` (usually the path) only goes into error messages.
Status Migrate(SQLite::Database& db, const std::string& name,
               std::span<const Migration> migrations = Migrations());

// The one mapping of SQLite errors to Status in the store: picks the Code from
// the SQLite result code and prefixes `context` ("cannot commit to /x/state.db").
Status StatusFromSqlite(const SQLite::Exception& e, const std::string& context);

}  // namespace gpuherd::store
