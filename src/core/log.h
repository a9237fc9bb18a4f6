// Logging goes through spdlog; this sets it up once per process.
#pragma once

#include <functional>
#include <string>
#include <string_view>

#include <spdlog/spdlog.h>

namespace gpuherd {

// level: "debug", "info", "warn", "error". Logs to stderr; with a non-empty
// file path, also to that file. Safe to call again (replaces the sinks).
void SetUpLogging(const std::string& level, const std::string& file_path = "");

// Runs `task`; an exception it throws is logged ("<what> failed: ...") and
// goes no further: for threads of the daemon that no task may end. False
// when it threw.
bool RunLoggingExceptions(const std::function<void()>& task, std::string_view what);

}  // namespace gpuherd
