// libFuzzer target: lines of a job's metrics file (GPUHERD_METRICS_FILE),
// which the daemon reads as root and a job writes as it likes.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "pipeline/metric_line.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  while (!text.empty()) {
    size_t end = text.find('\n');
    auto line = gpuherd::pipeline::ParseMetricLine(text.substr(0, end));
    if (line.ok()) (void)line->dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    if (end == std::string_view::npos) break;
    text.remove_prefix(end + 1);
  }
  return 0;
}
