#include "telemetry/records_convert.h"

#include <nlohmann/json.hpp>

#include "gpu/json.h"

namespace gpuherd::telemetry {

store::GpuRecord ToGpuRecord(const gpu::GpuInfo& info, TimeMs now) {
  store::GpuRecord r;
  r.uuid = info.uuid;
  r.index = info.index;
  r.name = info.name;
  r.serial = info.serial;
  r.pci_bus_id = info.pci_bus_id;
  r.memory_total_bytes = info.memory_total_bytes;
  r.info_json = nlohmann::json(info).dump();
  r.first_seen = now;
  r.last_seen = now;
  return r;
}

}  // namespace gpuherd::telemetry
