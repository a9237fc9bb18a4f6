#include "core/log.h"

#include <exception>
#include <memory>
#include <vector>

#include <spdlog/pattern_formatter.h>
#include <spdlog/sinks/basic_file_sink.h>
#include <spdlog/sinks/stdout_color_sinks.h>

#include "core/printable.h"

namespace gpuherd {
namespace {

// "%*": the message, escaped (core/printable.h). Messages quote what users
// and jobs wrote (a path, a name, a reason), and the daemon's log is read on
// root's terminal; one line per message, too, so no line can be forged.
class EscapedMessage : public spdlog::custom_flag_formatter {
 public:
  void format(const spdlog::details::log_msg& msg, const std::tm&, spdlog::memory_buf_t& dest) override {
    const std::string text = Printable(std::string_view(msg.payload.data(), msg.payload.size()));
    dest.append(text.data(), text.data() + text.size());
  }
  std::unique_ptr<custom_flag_formatter> clone() const override { return std::make_unique<EscapedMessage>(); }
};

}  // namespace

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
  auto formatter = std::make_unique<spdlog::pattern_formatter>();
  formatter->add_flag<EscapedMessage>('*').set_pattern("%Y-%m-%dT%H:%M:%S.%e %^%l%$ %*");
  logger->set_formatter(std::move(formatter));
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
