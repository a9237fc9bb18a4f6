#include "doctor/fix_script.h"

#include <algorithm>

#include "core/word_wrap.h"

namespace gpuherd::doctor {
namespace {

// Long explanations wrapped as shell comments of at most ~90 columns.
std::string CommentLines(const std::string& text) {
  std::string out;
  for (const std::string& line : WrapWords(text, 88)) out += (line.empty() ? "#" : "# " + line) + "\n";
  return out;
}

}  // namespace

std::string FixScript(const Report& report) {
  std::vector<const Check*> failing;
  for (const Check& check : report.checks) {
    if (check.severity != Severity::kOk && !check.fix.empty()) failing.push_back(&check);
  }
  std::stable_sort(failing.begin(), failing.end(),
                   [](const Check* a, const Check* b) { return a->severity > b->severity; });
  std::string script =
      "#!/usr/bin/env bash\n"
      "# Written by gpuherd doctor for " + report.hostname +
      (report.root == "/" ? std::string() : " (audited tree " + report.root + ")") +
      ".\n"
      "# Review every block before running it as root; gpuherd itself never changes these settings.\n"
      "# Settings are made persistent in /etc/sysctl.d/90-gpuherd.conf,\n"
      "# /etc/security/limits.d/90-gpuherd.conf and /etc/udev/rules.d/60-gpuherd-*.rules.\n"
      "set -euo pipefail\n";
  if (failing.empty()) return script + "\n# Nothing to fix: every check passed.\n";
  for (const Check* check : failing) {
    script += "\n# --- " + check->title + " [" + SeverityName(check->severity) + ", " + check->id + "]\n";
    script += "# now: " + check->current + "\n";
    if (!check->recommended.empty()) script += "# recommended: " + check->recommended + "\n";
    if (!check->why.empty()) script += CommentLines(check->why);
    for (const std::string& command : check->fix) script += command + "\n";
  }
  return script;
}

}  // namespace gpuherd::doctor
