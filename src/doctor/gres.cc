#include "doctor/gres.h"

#include <algorithm>
#include <cctype>

#include "doctor/cpulist.h"
#include "doctor/host_gpus.h"

namespace gpuherd::doctor {

std::string GresTypeName(std::string_view model) {
  std::string name;
  for (char c : model) name += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (name.rfind("nvidia ", 0) == 0) name = name.substr(7);
  std::string type;
  for (char c : name) {
    // Slurm separates fields with ':' and ','; keep letters, digits, '-' and '.'.
    if (std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '.') {
      type += c;
    } else if (!type.empty() && type.back() != '_') {
      type += '_';
    }
  }
  while (!type.empty() && type.back() == '_') type.pop_back();
  return type.empty() ? "gpu" : type;
}

Result<GresConfig> GenerateGres(const std::vector<gpu::GpuInfo>& gpus, const GresOptions& options) {
  if (gpus.empty()) return FailedPrecondition("no GPUs found: gres.conf needs at least one");
  if (options.shards_per_gpu < 0) {
    return InvalidArgument("--shards must be 0 or more, not " + std::to_string(options.shards_per_gpu));
  }
  GresConfig config;
  const bool simulated = gpus.front().simulated;
  config.gres_conf = "# gres.conf for " + options.node_name + ", written by gpuherd slurm gres-conf from " +
                     std::to_string(gpus.size()) + " GPUs" + (simulated ? " of a SIMULATED fleet" : "") + "\n" +
                     "# Cores= lists each GPU's closest CPUs so that --gpu-bind=closest works.\n";
  std::vector<std::pair<std::string, int>> types;  // in order of first appearance
  std::vector<std::string> files;
  for (const gpu::GpuInfo& gpu : gpus) {
    const std::string type = GresTypeName(gpu.name);
    auto it = std::find_if(types.begin(), types.end(), [&](const auto& t) { return t.first == type; });
    if (it == types.end()) {
      types.emplace_back(type, 1);
    } else {
      ++it->second;
    }
    auto minor = options.minor_by_bus_id.find(NormalizeBusId(gpu.pci_bus_id));
    const int n = minor != options.minor_by_bus_id.end() ? minor->second : gpu.index;
    const std::string file = "/dev/nvidia" + std::to_string(n);
    files.push_back(file);
    std::string line = "Name=gpu Type=" + type + " File=" + file;
    if (!gpu.cpu_affinity.empty()) {
      auto cpus = ParseCpuList(gpu.cpu_affinity);
      if (!cpus.ok()) return cpus.status().Annotate("GPU " + std::to_string(gpu.index));
      std::vector<int> cores;
      for (int cpu : *cpus) {
        auto first = options.first_thread_of_cpu.find(cpu);
        cores.push_back(first == options.first_thread_of_cpu.end() ? cpu : first->second);
      }
      line += " Cores=" + FormatCpuList(cores);
    }
    config.gres_conf += line + "\n";
  }
  if (options.shards_per_gpu > 0) {
    // Slurm needs File= on shard lines: each GPU's shards share its device file.
    for (const std::string& file : files) {
      config.gres_conf += "Name=shard Count=" + std::to_string(options.shards_per_gpu) + " File=" + file + "\n";
    }
  }
  std::string gres;
  for (const auto& [type, count] : types) gres += (gres.empty() ? "" : ",") + ("gpu:" + type + ":" + std::to_string(count));
  if (options.shards_per_gpu > 0) {
    gres += ",shard:" + std::to_string(options.shards_per_gpu * static_cast<int>(gpus.size()));
  }
  config.slurm_conf = std::string("GresTypes=gpu") + (options.shards_per_gpu > 0 ? ",shard" : "") + "\n" +
                      "NodeName=" + options.node_name + " Gres=" + gres +
                      "  # add CPUs=, RealMemory= and the rest as slurmd -C prints them\n";
  return config;
}

}  // namespace gpuherd::doctor
