#include "core/log.h"

#include <exception>
#include <memory>
#include <vector>

#include <spdlog/sinks/basic_file_sink.h>
#include <spdlog/sinks/stdout_color_sinks.h>

namespace gpuherd {

void SetUpLogging(const std::string& level, const std::string& file_path) {
  std::vector<spdlog::sink_ptr> sinks;
  sinks.push_back(std::make_shared<spdlog::sinks::stderr_color_sink_mt>());
  if (!file_path.empty()) {
    try {
      sinks.push_back(std::make_shared<spdlog::sinks::basic_file_sink_mt>(file_path));
    } catch (const spdlog::spdlog_ex& e) {
      // Logging to stderr alone is better than not starting.
      sinks.front()->log(spdlog::details::log_msg("gpuherd", spdlog::level::warn,
                                                   std::string("cannot open log file: ") + e.what()));
    }
  }
  auto logger = std::make_shared<spdlog::logger>("gpuherd", sinks.begin(), sinks.end());
  logger->set_level(spdlog::level::from_str(level));
  logger->set_pattern("%Y-%m-%dT%H:%M:%S.%e %^%l%$ %v");
  spdlog::set_default_logger(logger);
}

bool RunLoggingExceptions(const std::function<void()>& task, std::string_view what) {
  try {
    task();
    return true;
  } catch (const std::exception& e) {
    spdlog::error("{} failed: {}", what, e.what());
  } catch (...) {
    spdlog::error("{} failed with an unknown exception", what);
  }
  return false;
}

}  // namespace gpuherd
