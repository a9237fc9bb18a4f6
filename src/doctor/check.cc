#include "doctor/check.h"

namespace gpuherd::doctor {

const char* SeverityName(Severity severity) {
  switch (severity) {
    case Severity::kOk: return "ok";
    case Severity::kInfo: return "info";
    case Severity::kWarning: return "warning";
    case Severity::kCritical: return "critical";
  }
  return "unknown";
}

Result<Severity> ParseSeverity(std::string_view name) {
  for (Severity s : {Severity::kOk, Severity::kInfo, Severity::kWarning, Severity::kCritical}) {
    if (name == SeverityName(s)) return s;
  }
  return InvalidArgument("unknown severity \"" + std::string(name) +
                         "\": use ok, info, warning or critical");
}

}  // namespace gpuherd::doctor
