// `gpuherd topo`: the GPU topology matrix as `nvidia-smi topo -m` prints it,
// from the fleet the API serves (api/gpus.h).
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "api/gpus.h"

namespace gpuherd::cli {

// nvidia-smi's code for how GPU i reaches GPU j: "X" (itself), "NV#" (#
// bonded NVLinks; "NV" when the count is unknown), "PIX" (at most one PCIe
// bridge), "PXB" (several PCIe bridges), "PHB" (a PCIe host bridge), "NODE"
// (host bridges within a NUMA node), "SYS" (across NUMA nodes), "N/A".
std::string TopoCode(const api::Fleet& fleet, size_t i, size_t j);

// The matrix with each GPU's CPU and NUMA affinity, then the legend.
std::string RenderTopoMatrix(const api::Fleet& fleet, bool color);

// {"gpus": [{"index", "uuid", "name", "cpu_affinity", "numa_node"}],
//  "matrix": [[codes]], "links": [[link names]]}
nlohmann::json TopoJson(const api::Fleet& fleet);

}  // namespace gpuherd::cli
