#include "cli/topo_matrix.h"

#include "cli/table.h"
#include "gpu/json.h"

namespace gpuherd::cli {

std::string TopoCode(const api::Fleet& fleet, size_t i, size_t j) {
  if (i == j) return "X";
  if (i >= fleet.topology.size() || j >= fleet.topology[i].size()) return "N/A";
  switch (fleet.topology[i][j]) {
    case gpu::Link::kSelf: return "X";
    case gpu::Link::kNvLink: {
      const bool counted = i < fleet.nvlinks.size() && j < fleet.nvlinks[i].size() && fleet.nvlinks[i][j] > 0;
      return counted ? "NV" + std::to_string(fleet.nvlinks[i][j]) : "NV";
    }
    case gpu::Link::kPcieSwitch: {
      const bool multiple = i < fleet.pcie_multiple.size() && j < fleet.pcie_multiple[i].size() && fleet.pcie_multiple[i][j];
      return multiple ? "PXB" : "PIX";
    }
    case gpu::Link::kHostBridge: return "PHB";
    case gpu::Link::kNumaNode: return "NODE";
    case gpu::Link::kCrossSocket: return "SYS";
    case gpu::Link::kUnknown: break;
  }
  return "N/A";
}

std::string RenderTopoMatrix(const api::Fleet& fleet, bool color) {
  std::string out;
  if (fleet.simulated) {
    out += Colored("SIMULATED FLEET", kYellow, color) + " (" + Printable(fleet.sim_reason) +
           "): these are not real GPUs.\n";
  }
  std::vector<std::string> headers = {""};
  for (const api::Gpu& g : fleet.gpus) headers.push_back("GPU" + std::to_string(g.info.index));
  headers.push_back("CPU Affinity");
  headers.push_back("NUMA Affinity");
  Table table(headers);
  for (size_t i = 0; i < fleet.gpus.size(); ++i) {
    const gpu::GpuInfo& info = fleet.gpus[i].info;
    std::vector<std::string> row = {"GPU" + std::to_string(info.index)};
    for (size_t j = 0; j < fleet.gpus.size(); ++j) {
      std::string code = TopoCode(fleet, i, j);
      if (code.rfind("NV", 0) == 0) code = Colored(code, kGreen, color);
      else if (code == "SYS") code = Colored(code, kYellow, color);
      row.push_back(code);
    }
    row.push_back(info.cpu_affinity.empty() ? "N/A" : Printable(info.cpu_affinity));
    row.push_back(info.numa_node ? std::to_string(*info.numa_node) : "N/A");
    table.AddRow(std::move(row));
  }
  out += table.Render();
  out +=
      "\nLegend:\n\n"
      "  X    = Self\n"
      "  SYS  = Connection traversing PCIe as well as the SMP interconnect between NUMA nodes (e.g., QPI/UPI)\n"
      "  NODE = Connection traversing PCIe as well as the interconnect between PCIe Host Bridges within a NUMA node\n"
      "  PHB  = Connection traversing PCIe as well as a PCIe Host Bridge (typically the CPU)\n"
      "  PXB  = Connection traversing multiple PCIe bridges (without traversing the PCIe Host Bridge)\n"
      "  PIX  = Connection traversing at most a single PCIe bridge\n"
      "  NV#  = Connection traversing a bonded set of # NVLinks\n";
  return out;
}

nlohmann::json TopoJson(const api::Fleet& fleet) {
  nlohmann::json gpus = nlohmann::json::array(), matrix = nlohmann::json::array(), links = nlohmann::json::array();
  for (size_t i = 0; i < fleet.gpus.size(); ++i) {
    const gpu::GpuInfo& info = fleet.gpus[i].info;
    gpus.push_back({{"index", info.index},
                    {"uuid", info.uuid},
                    {"name", info.name},
                    {"cpu_affinity", info.cpu_affinity},
                    {"numa_node", info.numa_node ? nlohmann::json(*info.numa_node) : nlohmann::json(nullptr)}});
    nlohmann::json codes = nlohmann::json::array(), names = nlohmann::json::array();
    for (size_t j = 0; j < fleet.gpus.size(); ++j) {
      codes.push_back(TopoCode(fleet, i, j));
      const bool known = i < fleet.topology.size() && j < fleet.topology[i].size();
      names.push_back(gpu::LinkName(known ? fleet.topology[i][j] : (i == j ? gpu::Link::kSelf : gpu::Link::kUnknown)));
    }
    matrix.push_back(codes);
    links.push_back(names);
  }
  return {{"simulated", fleet.simulated}, {"gpus", gpus}, {"matrix", matrix}, {"links", links}};
}

}  // namespace gpuherd::cli
