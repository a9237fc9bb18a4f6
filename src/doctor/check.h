// One finding of the node doctor: a setting, what it is, what it should be,
// why that matters and the commands that would fix it. The doctor only
// prints the commands; the admin reviews and runs them.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace gpuherd::doctor {

// Ordered: a report's worst severity decides the exit code.
enum class Severity { kOk = 0, kInfo, kWarning, kCritical };
const char* SeverityName(Severity severity);  // "ok", "info", "warning", "critical"
Result<Severity> ParseSeverity(std::string_view name);

struct Check {
  std::string id;           // stable key, e.g. "kernel.vm.swappiness"
  std::string category;     // "kernel", "cmdline", "gpu", "storage", "limits", "network", "containers"
  std::string title;        // for people: "vm.swappiness"
  std::string current;      // what the machine has now
  std::string recommended;  // what it should have
  std::string why;          // why it matters, with the figure behind it
  Severity severity = Severity::kOk;
  // Shell commands for root, in order; lines starting with '#' are notes for
  // the admin. Empty when nothing is to be done (or nothing can be scripted).
  std::vector<std::string> fix;
};

}  // namespace gpuherd::doctor
