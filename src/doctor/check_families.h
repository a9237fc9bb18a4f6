// Private to the doctor: one function per family of checks (one file each).
// Each returns its checks in a fixed order; none fails: what cannot be read
// becomes an info check that says so.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "doctor/check.h"
#include "doctor/doctor.h"
#include "host/host.h"

namespace gpuherd::doctor::internal {

std::vector<Check> KernelChecks(const host::Host& host);
std::vector<Check> CmdlineChecks(const host::Host& host);
std::vector<Check> GpuChecks(const DoctorInput& input);
std::vector<Check> StorageChecks(const host::Host& host);
std::vector<Check> LimitsChecks(const host::Host& host);
std::vector<Check> NetworkChecks(const host::Host& host, const std::map<std::string, std::string>& env);
std::vector<Check> ContainerChecks(const host::Host& host);

}  // namespace gpuherd::doctor::internal
