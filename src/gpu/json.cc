#include "gpu/json.h"

namespace gpuherd::gpu {
namespace {

using nlohmann::json;

template <typename T>
void Put(json& j, const char* key, const std::optional<T>& v) {
  if (v) j[key] = *v;
}

template <typename T>
void Get(const json& j, const char* key, std::optional<T>& v) {
  auto it = j.find(key);
  if (it != j.end() && !it->is_null()) v = it->get<T>();
}

template <typename T>
void GetPlain(const json& j, const char* key, T& v) {
  auto it = j.find(key);
  if (it != j.end() && !it->is_null()) v = it->get<T>();
}

}  // namespace

Link ParseLink(const std::string& name) {
  for (int i = 0; i <= static_cast<int>(Link::kUnknown); ++i) {
    if (name == LinkName(static_cast<Link>(i))) return static_cast<Link>(i);
  }
  return Link::kUnknown;
}

void to_json(json& j, const GpuInfo& g) {
  j = json{{"index", g.index},
           {"uuid", g.uuid},
           {"name", g.name},
           {"serial", g.serial},
           {"pci_bus_id", g.pci_bus_id},
           {"memory_total_bytes", g.memory_total_bytes},
           {"driver_version", g.driver_version},
           {"cuda_version", g.cuda_version},
           {"compute_capability", std::to_string(g.cc_major) + "." + std::to_string(g.cc_minor)},
           {"cpu_affinity", g.cpu_affinity},
           {"simulated", g.simulated}};
  Put(j, "max_pcie_gen", g.max_pcie_gen);
  Put(j, "max_pcie_width", g.max_pcie_width);
  Put(j, "numa_node", g.numa_node);
  Put(j, "power_limit_default_w", g.power_limit_default_w);
  Put(j, "temp_slowdown_c", g.temp_slowdown_c);
  Put(j, "temp_shutdown_c", g.temp_shutdown_c);
  Put(j, "ecc_enabled", g.ecc_enabled);
}

void from_json(const json& j, GpuInfo& g) {
  GetPlain(j, "index", g.index);
  GetPlain(j, "uuid", g.uuid);
  GetPlain(j, "name", g.name);
  GetPlain(j, "serial", g.serial);
  GetPlain(j, "pci_bus_id", g.pci_bus_id);
  GetPlain(j, "memory_total_bytes", g.memory_total_bytes);
  GetPlain(j, "driver_version", g.driver_version);
  GetPlain(j, "cuda_version", g.cuda_version);
  GetPlain(j, "cpu_affinity", g.cpu_affinity);
  GetPlain(j, "simulated", g.simulated);
  std::string cc;
  GetPlain(j, "compute_capability", cc);
  if (auto dot = cc.find('.'); dot != std::string::npos) {
    g.cc_major = std::atoi(cc.substr(0, dot).c_str());
    g.cc_minor = std::atoi(cc.substr(dot + 1).c_str());
  }
  Get(j, "max_pcie_gen", g.max_pcie_gen);
  Get(j, "max_pcie_width", g.max_pcie_width);
  Get(j, "numa_node", g.numa_node);
  Get(j, "power_limit_default_w", g.power_limit_default_w);
  Get(j, "temp_slowdown_c", g.temp_slowdown_c);
  Get(j, "temp_shutdown_c", g.temp_shutdown_c);
  Get(j, "ecc_enabled", g.ecc_enabled);
}

void to_json(json& j, const XidEvent& x) {
  j = json{{"time", x.time}, {"xid", x.xid}, {"description", x.description}};
}
void from_json(const json& j, XidEvent& x) {
  GetPlain(j, "time", x.time);
  GetPlain(j, "xid", x.xid);
  GetPlain(j, "description", x.description);
}

void to_json(json& j, const GpuProcess& p) {
  j = json{{"pid", p.pid}, {"used_memory_bytes", p.used_memory_bytes}, {"name", p.name}};
}
void from_json(const json& j, GpuProcess& p) {
  GetPlain(j, "pid", p.pid);
  GetPlain(j, "used_memory_bytes", p.used_memory_bytes);
  GetPlain(j, "name", p.name);
}

void to_json(json& j, const GpuSample& s) {
  j = json{{"time", s.time}};
  Put(j, "gpu_util_pct", s.gpu_util_pct);
  Put(j, "mem_util_pct", s.mem_util_pct);
  Put(j, "mem_used_bytes", s.mem_used_bytes);
  Put(j, "mem_total_bytes", s.mem_total_bytes);
  Put(j, "temp_c", s.temp_c);
  Put(j, "power_w", s.power_w);
  Put(j, "power_limit_w", s.power_limit_w);
  Put(j, "energy_mj", s.energy_mj);
  Put(j, "sm_clock_mhz", s.sm_clock_mhz);
  Put(j, "mem_clock_mhz", s.mem_clock_mhz);
  Put(j, "fan_pct", s.fan_pct);
  Put(j, "pcie_gen", s.pcie_gen);
  Put(j, "pcie_width", s.pcie_width);
  Put(j, "pcie_tx_kbps", s.pcie_tx_kbps);
  Put(j, "pcie_rx_kbps", s.pcie_rx_kbps);
  Put(j, "pcie_replay_count", s.pcie_replay_count);
  Put(j, "ecc_sbe_volatile", s.ecc_sbe_volatile);
  Put(j, "ecc_dbe_volatile", s.ecc_dbe_volatile);
  Put(j, "retired_pages_sbe", s.retired_pages_sbe);
  Put(j, "retired_pages_dbe", s.retired_pages_dbe);
  Put(j, "retired_pages_pending", s.retired_pages_pending);
  Put(j, "remapped_rows_correctable", s.remapped_rows_correctable);
  Put(j, "remapped_rows_uncorrectable", s.remapped_rows_uncorrectable);
  Put(j, "remapped_rows_pending", s.remapped_rows_pending);
  Put(j, "remapped_rows_failure", s.remapped_rows_failure);
  if (s.throttle_reasons) {
    j["throttle_reasons"] = *s.throttle_reasons;
    j["throttle"] = throttle::Describe(*s.throttle_reasons);
  }
  j["xids"] = s.xids;
  j["processes"] = s.processes;
}

void from_json(const json& j, GpuSample& s) {
  GetPlain(j, "time", s.time);
  Get(j, "gpu_util_pct", s.gpu_util_pct);
  Get(j, "mem_util_pct", s.mem_util_pct);
  Get(j, "mem_used_bytes", s.mem_used_bytes);
  Get(j, "mem_total_bytes", s.mem_total_bytes);
  Get(j, "temp_c", s.temp_c);
  Get(j, "power_w", s.power_w);
  Get(j, "power_limit_w", s.power_limit_w);
  Get(j, "energy_mj", s.energy_mj);
  Get(j, "sm_clock_mhz", s.sm_clock_mhz);
  Get(j, "mem_clock_mhz", s.mem_clock_mhz);
  Get(j, "fan_pct", s.fan_pct);
  Get(j, "pcie_gen", s.pcie_gen);
  Get(j, "pcie_width", s.pcie_width);
  Get(j, "pcie_tx_kbps", s.pcie_tx_kbps);
  Get(j, "pcie_rx_kbps", s.pcie_rx_kbps);
  Get(j, "pcie_replay_count", s.pcie_replay_count);
  Get(j, "ecc_sbe_volatile", s.ecc_sbe_volatile);
  Get(j, "ecc_dbe_volatile", s.ecc_dbe_volatile);
  Get(j, "retired_pages_sbe", s.retired_pages_sbe);
  Get(j, "retired_pages_dbe", s.retired_pages_dbe);
  Get(j, "retired_pages_pending", s.retired_pages_pending);
  Get(j, "remapped_rows_correctable", s.remapped_rows_correctable);
  Get(j, "remapped_rows_uncorrectable", s.remapped_rows_uncorrectable);
  Get(j, "remapped_rows_pending", s.remapped_rows_pending);
  Get(j, "remapped_rows_failure", s.remapped_rows_failure);
  Get(j, "throttle_reasons", s.throttle_reasons);
  if (j.contains("xids")) s.xids = j["xids"].get<std::vector<XidEvent>>();
  if (j.contains("processes")) s.processes = j["processes"].get<std::vector<GpuProcess>>();
}

}  // namespace gpuherd::gpu
