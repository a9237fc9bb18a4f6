// JSON of the store's records as the API serves them (part of /v1).
#pragma once

#include <nlohmann/json.hpp>

#include "store/records.h"

namespace gpuherd::daemon {

// {"id", "time", "kind", "severity", "gpu_uuid", "message", "data"}
nlohmann::json EventJson(const store::EventRecord& event);
// {"minute", "samples", "failures", "stats": {metric: {min, mean, max}}, ...}
nlohmann::json RollupJson(const store::RollupRecord& rollup);
// An alert: {rule, subject, gpu (index or null), state, pending_since,
// fired_at, resolved_at, value, severity, action, summary}. Shared with the
// CLI's reading of the store without a daemon.
nlohmann::json AlertJson(const store::AlertRecord& alert);

}  // namespace gpuherd::daemon
