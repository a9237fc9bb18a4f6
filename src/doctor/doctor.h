// The node doctor: audits a GPU server's kernel, command line, GPUs, storage,
// limits, network and container settings and says, for each, why it matters
// and how to fix it. It reads the machine only through the host interface
// (so it runs on fixture trees) and never changes anything.
#pragma once

#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "doctor/check.h"
#include "gpu/types.h"
#include "host/host.h"

namespace gpuherd::doctor {

struct PcieLink {
  int gen = 0;
  int width = 0;
};

struct DoctorInput {
  const host::Host* host = nullptr;  // not owned; must outlive RunDoctor
  // The environment jobs will see (NCCL_*), passed in rather than read from
  // this process so that callers and tests control it.
  std::map<std::string, std::string> env;
  // GPUs as the driver enumerates them. Empty: the GPUs are read from
  // /proc/driver/nvidia and /sys under the host's root.
  std::vector<gpu::GpuInfo> gpus;
  // By GPU UUID: the link a GPU runs at now (links down-train at idle), and
  // the highest link it reached under load (e.g. its latest burn-in). Where
  // only the idle link is known a lower generation is reported as info.
  std::map<std::string, PcieLink> pcie_now;
  std::map<std::string, PcieLink> pcie_under_load;
};

struct Report {
  std::string hostname;
  std::string root;        // "/" or the fixture tree audited
  std::vector<Check> checks;

  Severity Worst() const;
  // 0: nothing worse than info; 1: warnings; 2: something critical.
  int ExitCode() const;
};

Report RunDoctor(const DoctorInput& input);

// {"hostname", "root", "exit_code", "summary": {"ok": n, ...}, "checks": [...]}
nlohmann::json ReportJson(const Report& report);

}  // namespace gpuherd::doctor
