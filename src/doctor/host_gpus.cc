#include "doctor/host_gpus.h"

#include <algorithm>
#include <cctype>
#include <map>

#include "doctor/sysfs.h"

namespace gpuherd::doctor {
namespace {

using internal::List;
using internal::ReadInt;
using internal::ReadLine;
using internal::Trim;

// "16.0 GT/s PCIe" -> 4: the per-lane rate of each generation.
std::optional<int> GenOfSpeed(const std::string& text) {
  double gts = 0;
  try {
    gts = std::stod(text);
  } catch (const std::exception&) {
    return std::nullopt;
  }
  const std::pair<double, int> kGens[] = {{2.5, 1}, {5, 2}, {8, 3}, {16, 4}, {32, 5}, {64, 6}};
  for (const auto& [rate, gen] : kGens) {
    if (gts > rate - 0.1 && gts < rate + 0.1) return gen;
  }
  return std::nullopt;
}

std::optional<int> OptInt(std::optional<int64_t> v) {
  if (!v) return std::nullopt;
  return static_cast<int>(*v);
}

// "Key:   value" lines of the driver's information file.
std::map<std::string, std::string> ParseInformation(const std::string& text) {
  std::map<std::string, std::string> fields;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    std::string line = text.substr(start, end - start);
    size_t colon = line.find(':');
    if (colon != std::string::npos) fields[Trim(line.substr(0, colon))] = Trim(line.substr(colon + 1));
    start = end + 1;
  }
  return fields;
}

}  // namespace

std::string NormalizeBusId(std::string_view bus_id) {
  std::string id(bus_id);
  std::transform(id.begin(), id.end(), id.begin(), [](unsigned char c) { return std::tolower(c); });
  size_t colon = id.find(':');
  // A domain of more than four digits (NVML pads to eight) keeps its last four.
  if (colon != std::string::npos && colon > 4) id = id.substr(colon - 4);
  if (colon != std::string::npos && colon < 4) id = std::string(4 - colon, '0') + id;
  return id;
}

std::vector<HostGpu> ReadHostGpus(const host::Host& host) {
  std::map<std::string, HostGpu> by_bus;
  for (const std::string& dev : List(host, "/sys/bus/pci/devices")) {
    const std::string dir = "/sys/bus/pci/devices/" + dev;
    auto vendor = ReadLine(host, dir + "/vendor");
    auto klass = ReadLine(host, dir + "/class");
    // Class 0x03xxxx: display controllers (VGA and 3D); audio functions are skipped.
    if (vendor != "0x10de" || !klass || klass->rfind("0x03", 0) != 0) continue;
    HostGpu gpu;
    gpu.pci_bus_id = NormalizeBusId(dev);
    auto node = ReadInt(host, dir + "/numa_node");
    if (node && *node >= 0) gpu.numa_node = static_cast<int>(*node);
    gpu.cpu_list = ReadLine(host, dir + "/local_cpulist").value_or("");
    gpu.link_width = OptInt(ReadInt(host, dir + "/current_link_width"));
    gpu.max_link_width = OptInt(ReadInt(host, dir + "/max_link_width"));
    if (auto speed = ReadLine(host, dir + "/current_link_speed")) gpu.link_gen = GenOfSpeed(*speed);
    if (auto speed = ReadLine(host, dir + "/max_link_speed")) gpu.max_link_gen = GenOfSpeed(*speed);
    by_bus[gpu.pci_bus_id] = std::move(gpu);
  }
  const std::string driver_dir = "/proc/driver/nvidia/gpus/";
  for (const std::string& dev : List(host, driver_dir)) {
    auto text = host.ReadFile(driver_dir + dev + "/information");
    if (!text.ok()) continue;
    auto fields = ParseInformation(*text);
    const std::string bus = NormalizeBusId(fields.count("Bus Location") ? fields["Bus Location"] : dev);
    HostGpu& gpu = by_bus[bus];
    gpu.pci_bus_id = bus;
    gpu.driver_bound = true;
    gpu.model = fields["Model"];
    gpu.uuid = fields["GPU UUID"];
    if (fields.count("Device Minor")) {
      try {
        gpu.minor = std::stoi(fields["Device Minor"]);
      } catch (const std::exception&) {
      }
    }
  }
  std::vector<HostGpu> gpus;
  for (auto& [bus, gpu] : by_bus) gpus.push_back(std::move(gpu));
  return gpus;
}

std::optional<std::string> KernelModuleVersion(const host::Host& host) {
  auto line = ReadLine(host, "/proc/driver/nvidia/version");
  if (!line) return std::nullopt;
  // "NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.54.15  Tue Mar  5 22:23:56 UTC 2024"
  for (const std::string& word : internal::SplitWords(*line)) {
    if (!word.empty() && std::isdigit(static_cast<unsigned char>(word[0])) &&
        word.find('.') != std::string::npos) {
      return word;
    }
  }
  return std::nullopt;
}

}  // namespace gpuherd::doctor
