// JSON of the store's records as the API serves them (part of /v1).
#pragma once

#include <nlohmann/json.hpp>

#include "store/records.h"

namespace gpuherd::daemon {

// {"id", "time", "kind", "severity", "gpu_uuid", "message", "data"}
nlohmann::json EventJson(const store::EventRecord& event);
// {"minute", "samples", "failures", "stats": {metric: {min, mean, max}}, ...}
nlohmann::json RollupJson(const store::RollupRecord& rollup);

}  // namespace gpuherd::daemon
