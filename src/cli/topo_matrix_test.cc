#include "cli/topo_matrix.h"

#include <sstream>

#include <gtest/gtest.h>

namespace gpuherd::cli {
namespace {

using gpu::Link;

// Four GPUs: 0-1 bonded by 12 NVLinks, 2-3 behind several PCIe bridges,
// 0-2 through a host bridge, 1-2 within a NUMA node, 3 across sockets.
api::Fleet Fleet() {
  api::Fleet f;
  for (int i = 0; i < 4; ++i) {
    api::Gpu g;
    g.info.index = i;
    g.info.uuid = "GPU-" + std::to_string(i);
    g.info.numa_node = i < 3 ? 0 : 1;
    g.info.cpu_affinity = i < 3 ? "0-15,32-47" : "16-31,48-63";
    f.gpus.push_back(g);
  }
  f.topology.assign(4, std::vector<Link>(4, Link::kCrossSocket));
  f.nvlinks.assign(4, std::vector<int>(4, 0));
  f.pcie_multiple.assign(4, std::vector<bool>(4, false));
  for (int i = 0; i < 4; ++i) f.topology[i][i] = Link::kSelf;
  auto set = [&](int a, int b, Link l) { f.topology[a][b] = f.topology[b][a] = l; };
  set(0, 1, Link::kNvLink);
  f.nvlinks[0][1] = f.nvlinks[1][0] = 12;
  set(2, 3, Link::kPcieSwitch);
  f.pcie_multiple[2][3] = f.pcie_multiple[3][2] = true;
  set(0, 2, Link::kHostBridge);
  set(1, 2, Link::kNumaNode);
  set(1, 3, Link::kUnknown);
  return f;
}

TEST(TopoMatrixTest, CodesAsNvidiaSmiPrintsThem) {
  api::Fleet f = Fleet();
  EXPECT_EQ(TopoCode(f, 0, 0), "X");
  EXPECT_EQ(TopoCode(f, 0, 1), "NV12");
  EXPECT_EQ(TopoCode(f, 2, 3), "PXB");
  EXPECT_EQ(TopoCode(f, 0, 2), "PHB");
  EXPECT_EQ(TopoCode(f, 1, 2), "NODE");
  EXPECT_EQ(TopoCode(f, 0, 3), "SYS");
  EXPECT_EQ(TopoCode(f, 3, 1), "N/A");
  f.pcie_multiple[2][3] = false;
  EXPECT_EQ(TopoCode(f, 2, 3), "PIX");
  // Without link counts (an older daemon) NVLink is still named.
  f.nvlinks.clear();
  f.pcie_multiple.clear();
  EXPECT_EQ(TopoCode(f, 1, 0), "NV");
  EXPECT_EQ(TopoCode(f, 3, 2), "PIX");
  // A matrix smaller than the fleet is never read past its end.
  f.topology.resize(2);
  EXPECT_EQ(TopoCode(f, 3, 2), "N/A");
}

TEST(TopoMatrixTest, MatrixRowsCarryAffinityAndLegend) {
  std::string out = RenderTopoMatrix(Fleet(), false);
  std::istringstream lines(out);
  std::string header, row0, row3;
  std::getline(lines, header);
  std::getline(lines, row0);
  std::getline(lines, row3);
  std::getline(lines, row3);
  std::getline(lines, row3);
  EXPECT_NE(header.find("GPU0  GPU1  GPU2  GPU3  CPU Affinity  NUMA Affinity"), std::string::npos) << out;
  EXPECT_EQ(row0.rfind("GPU0  X     NV12  PHB   SYS   0-15,32-47    0", 0), 0u) << out;
  EXPECT_EQ(row3.rfind("GPU3  SYS   N/A   PXB   X     16-31,48-63   1", 0), 0u) << out;
  EXPECT_NE(out.find("NV#  = Connection traversing a bonded set of # NVLinks"), std::string::npos);
  EXPECT_EQ(out.find("SIMULATED"), std::string::npos);
  api::Fleet sim = Fleet();
  sim.simulated = true;
  sim.sim_reason = "asked for with --sim 4";
  EXPECT_EQ(RenderTopoMatrix(sim, false).rfind("SIMULATED FLEET (asked for with --sim 4)", 0), 0u);
}

TEST(TopoMatrixTest, JsonHasCodesLinksAndAffinity) {
  nlohmann::json j = TopoJson(Fleet());
  EXPECT_EQ(j["matrix"][0][1], "NV12");
  EXPECT_EQ(j["links"][0][1], "nvlink");
  EXPECT_EQ(j["links"][2][2], "self");
  EXPECT_EQ(j["gpus"][3]["cpu_affinity"], "16-31,48-63");
  EXPECT_EQ(j["gpus"][3]["numa_node"], 1);
}

}  // namespace
}  // namespace gpuherd::cli
