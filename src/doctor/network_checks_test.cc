#include <gtest/gtest.h>

#include "doctor/test_tree.h"

namespace gpuherd::doctor {
namespace {

TEST(NetworkChecksTest, TunedPortsAreUpAtFullRate) {
  TestTree tree("tuned");
  const Report report = tree.Run();
  const Check& port = FindCheck(report, "network.port.mlx5_0/1");
  EXPECT_EQ(port.severity, Severity::kOk);
  EXPECT_EQ(port.current, "ACTIVE, 200 Gb/sec (4X HDR) (InfiniBand)");
  EXPECT_EQ(port.recommended, "ACTIVE at 200 Gb/sec");
  EXPECT_EQ(FindCheck(report, "network.port.mlx5_1/1").severity, Severity::kOk);
  EXPECT_EQ(FindCheck(report, "network.mtu.ib0").severity, Severity::kOk);
  EXPECT_EQ(FindCheck(report, "network.nccl").current, "none set");
}

TEST(NetworkChecksTest, UntunedPorts) {
  TestTree tree("untuned");
  const Report report = tree.Run();
  EXPECT_EQ(FindCheck(report, "network.port.mlx5_0/1").severity, Severity::kOk);
  const Check& slow = FindCheck(report, "network.port.mlx5_1/1");
  EXPECT_EQ(slow.severity, Severity::kWarning) << "EDR next to HDR: a down-trained link";
  const Check& down = FindCheck(report, "network.port.mlx5_2/1");
  EXPECT_EQ(down.severity, Severity::kWarning) << "another port is up";
  EXPECT_EQ(FindCheck(report, "network.port.mlx5_3/1").severity, Severity::kOk) << "RoCE compared with RoCE only";
  const Check& roce_mtu = FindCheck(report, "network.mtu.ens3f0np0");
  EXPECT_EQ(roce_mtu.severity, Severity::kWarning);
  EXPECT_EQ(roce_mtu.fix[0], "ip link set dev ens3f0np0 mtu 9000");
}

TEST(NetworkChecksTest, OnlyPortDownOrWithoutSubnetManagerIsCritical) {
  TestTree tree("tuned");
  tree.Write("/sys/class/infiniband/mlx5_0/ports/1/state", "1: DOWN");
  tree.Write("/sys/class/infiniband/mlx5_1/ports/1/state", "2: INIT");
  const Report report = tree.Run();
  EXPECT_EQ(FindCheck(report, "network.port.mlx5_0/1").severity, Severity::kCritical);
  const Check& init = FindCheck(report, "network.port.mlx5_1/1");
  EXPECT_EQ(init.severity, Severity::kCritical);
  EXPECT_NE(init.current.find("no subnet manager"), std::string::npos);
}

TEST(NetworkChecksTest, NcclVariablesAgainstTheHardware) {
  TestTree tree("tuned");
  const Report good = tree.Run({{"NCCL_SOCKET_IFNAME", "eno,ib0"}, {"NCCL_IB_HCA", "mlx5_0:1,mlx5_1"},
                                {"NCCL_IB_DISABLE", "0"}});
  EXPECT_EQ(FindCheck(good, "network.nccl.socket_ifname").severity, Severity::kOk);
  EXPECT_EQ(FindCheck(good, "network.nccl.ib_hca").severity, Severity::kOk);
  EXPECT_EQ(FindCheck(good, "network.nccl.ib_disable").severity, Severity::kOk);
  EXPECT_FALSE(HasCheck(good, "network.nccl"));

  const Report bad = tree.Run({{"NCCL_SOCKET_IFNAME", "=eno"}, {"NCCL_IB_HCA", "mlx4_0"},
                               {"NCCL_IB_DISABLE", "1"}});
  const Check& ifname = FindCheck(bad, "network.nccl.socket_ifname");
  EXPECT_EQ(ifname.severity, Severity::kCritical) << "=eno asks for an exact name";
  EXPECT_EQ(ifname.current, "=eno (no interface matches eno)");
  EXPECT_EQ(FindCheck(bad, "network.nccl.ib_hca").severity, Severity::kCritical);
  EXPECT_EQ(FindCheck(bad, "network.nccl.ib_disable").severity, Severity::kWarning);

  EXPECT_EQ(FindCheck(tree.Run({{"NCCL_SOCKET_IFNAME", "^docker,lo"}}), "network.nccl.socket_ifname").severity,
            Severity::kOk);
}

TEST(NetworkChecksTest, IbDisableIsFineWithoutRdma) {
  TestTree tree("tuned");
  tree.Remove("/sys/class/infiniband");
  const Report report = tree.Run({{"NCCL_IB_DISABLE", "1"}});
  EXPECT_EQ(FindCheck(report, "network.nccl.ib_disable").severity, Severity::kOk);
  EXPECT_EQ(FindCheck(report, "network.rdma").current, "no RDMA adapters");
}

}  // namespace
}  // namespace gpuherd::doctor
