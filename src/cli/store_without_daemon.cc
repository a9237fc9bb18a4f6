#include "cli/store_without_daemon.h"

namespace gpuherd::cli {

Result<std::unique_ptr<store::Store>> OpenStoreWithoutDaemon(const StateDir& dir) {
  store::StoreOptions options;
  options.read_only = true;
  auto db = store::Store::Open(dir.db_path(), options);
  if (!db.ok()) {
    return Unavailable("no daemon answers on " + dir.socket_path() + " and its database cannot be read (" +
                       db.status().message() + "); start one with `gpuherd daemon`");
  }
  return db;
}

}  // namespace gpuherd::cli
