// Logging goes through spdlog; this sets it up once per process.
#pragma once

#include <string>

#include <spdlog/spdlog.h>

namespace gpuherd {

// level: "debug", "info", "warn", "error". Logs to stderr; with a non-empty
// file path, also to that file. Safe to call again (replaces the sinks).
void SetUpLogging(const std::string& level, const std::string& file_path = "");

}  // namespace gpuherd
