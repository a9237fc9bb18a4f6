// Job spec files for `gpuherd submit -f`: JSON, or YAML turned into the same JSON.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "core/status.h"

namespace gpuherd::cli {

// Errors name the file and, for YAML, the line.
Result<nlohmann::json> LoadSpecFile(const std::string& path);

}  // namespace gpuherd::cli
