// libFuzzer target: an alert rules file (--alert-rules FILE), and each
// line on its own as a rule's condition.
#include <cstddef>
#include <cstdint>
#include <string>

#include "alerts/rules.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  (void)gpuherd::alerts::ParseRules(text, "fuzz.yaml");
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    (void)gpuherd::alerts::ParseCondition(text.substr(start, end - start));
    start = end + 1;
  }
  return 0;
}
