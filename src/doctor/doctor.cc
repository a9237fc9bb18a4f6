#include "doctor/doctor.h"

#include <algorithm>

#include "doctor/check_families.h"

namespace gpuherd::doctor {

Severity Report::Worst() const {
  Severity worst = Severity::kOk;
  for (const Check& check : checks) worst = std::max(worst, check.severity);
  return worst;
}

int Report::ExitCode() const {
  switch (Worst()) {
    case Severity::kCritical: return 2;
    case Severity::kWarning: return 1;
    default: return 0;
  }
}

Report RunDoctor(const DoctorInput& input) {
  Report report;
  report.hostname = input.host->Hostname();
  report.root = input.host->root();
  const host::Host& host = *input.host;
  for (std::vector<Check> family : {internal::KernelChecks(host), internal::CmdlineChecks(host),
                                    internal::GpuChecks(input), internal::StorageChecks(host),
                                    internal::LimitsChecks(host), internal::NetworkChecks(host, input.env),
                                    internal::ContainerChecks(host)}) {
    for (Check& check : family) report.checks.push_back(std::move(check));
  }
  return report;
}

nlohmann::json ReportJson(const Report& report) {
  nlohmann::json summary = {{"ok", 0}, {"info", 0}, {"warning", 0}, {"critical", 0}};
  nlohmann::json checks = nlohmann::json::array();
  for (const Check& c : report.checks) {
    summary[SeverityName(c.severity)] = summary[SeverityName(c.severity)].get<int>() + 1;
    checks.push_back({{"id", c.id},
                      {"category", c.category},
                      {"title", c.title},
                      {"current", c.current},
                      {"recommended", c.recommended},
                      {"why", c.why},
                      {"severity", SeverityName(c.severity)},
                      {"fix", c.fix}});
  }
  return {{"hostname", report.hostname},
          {"root", report.root},
          {"exit_code", report.ExitCode()},
          {"summary", summary},
          {"checks", checks}};
}

}  // namespace gpuherd::doctor
