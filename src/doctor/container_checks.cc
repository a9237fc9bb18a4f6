// Containers: where Docker is installed, its daemon knows the NVIDIA runtime.
#include <nlohmann/json.hpp>

#include "doctor/check_families.h"
#include "doctor/sysfs.h"

namespace gpuherd::doctor::internal {
namespace {

bool AnyExists(const host::Host& host, std::initializer_list<const char*> paths) {
  for (const char* path : paths) {
    if (host.Exists(path)) return true;
  }
  return false;
}

}  // namespace

std::vector<Check> ContainerChecks(const host::Host& host) {
  Check check;
  check.id = "containers.nvidia_runtime";
  check.category = "containers";
  check.title = "NVIDIA container runtime";
  check.recommended = "\"nvidia\" in the runtimes of /etc/docker/daemon.json";
  check.why =
      "Without the NVIDIA runtime Docker starts GPU containers without the devices and driver "
      "libraries: CUDA reports no GPU, and jobs silently fall back to the CPU or fail.";
  if (!AnyExists(host, {"/usr/bin/dockerd", "/usr/sbin/dockerd", "/usr/local/bin/dockerd", "/etc/docker"})) {
    check.current = "Docker not installed";
    check.recommended = "nothing to do without Docker";
    return {check};
  }
  const bool toolkit = AnyExists(host, {"/usr/bin/nvidia-ctk", "/usr/bin/nvidia-container-runtime",
                                        "/usr/local/bin/nvidia-ctk"});
  const std::vector<std::string> configure = {"nvidia-ctk runtime configure --runtime=docker",
                                              "systemctl restart docker"};
  auto text = host.ReadFile("/etc/docker/daemon.json");
  if (!text.ok()) {
    check.current = "Docker installed, no /etc/docker/daemon.json";
  } else {
    const nlohmann::json config = nlohmann::json::parse(*text, nullptr, /*allow_exceptions=*/false);
    if (config.is_discarded() || !config.is_object()) {
      check.current = "/etc/docker/daemon.json is not a JSON object";
      check.why = "dockerd refuses to start with a daemon.json it cannot parse; no container runs.";
      check.severity = Severity::kCritical;
      check.fix = {"# fix the syntax of /etc/docker/daemon.json (python3 -m json.tool /etc/docker/daemon.json "
                   "shows where), then systemctl restart docker"};
      return {check};
    }
    const auto runtimes = config.find("runtimes");
    if (runtimes != config.end() && runtimes->is_object() && runtimes->contains("nvidia")) {
      check.current = "configured";
      const auto def = config.find("default-runtime");
      if (def != config.end() && def->is_string()) check.current += " (default runtime " + def->get<std::string>() + ")";
      return {check};
    }
    check.current = "Docker installed, daemon.json has no nvidia runtime";
  }
  check.severity = Severity::kWarning;
  if (toolkit) {
    check.fix = configure;
  } else {
    check.current += "; NVIDIA Container Toolkit not installed";
    check.fix = {"apt-get install -y nvidia-container-toolkit  # from NVIDIA's repository", configure[0], configure[1]};
  }
  return {check};
}

}  // namespace gpuherd::doctor::internal
