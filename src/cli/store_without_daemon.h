// The state database opened read-only, for commands that read it when no
// daemon answers (events, alerts). Apart from daemon_client.h so that the
// static client (src/app) links no SQLite.
#pragma once

#include <memory>

#include "core/state_dir.h"
#include "core/status.h"
#include "store/store.h"

namespace gpuherd::cli {

// kUnavailable that says to start a daemon when the database cannot be read.
Result<std::unique_ptr<store::Store>> OpenStoreWithoutDaemon(const StateDir& dir);

}  // namespace gpuherd::cli
