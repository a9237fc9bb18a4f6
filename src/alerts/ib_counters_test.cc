#include "alerts/ib_counters.h"

#include <filesystem>
#include <fstream>
#include <string>

#include <gtest/gtest.h>

namespace gpuherd::alerts {
namespace {

namespace fs = std::filesystem;

class IbCountersTest : public ::testing::Test {
 protected:
  IbCountersTest() : root_(fs::path(::testing::TempDir()) / "ib_fixture") {
    fs::remove_all(root_);
    fs::create_directories(root_);
  }
  ~IbCountersTest() override { fs::remove_all(root_); }

  void Write(const std::string& path, const std::string& text) {
    fs::path p = root_ / path.substr(1);
    fs::create_directories(p.parent_path());
    std::ofstream(p) << text;
  }

  fs::path root_;
};

TEST_F(IbCountersTest, NoInfinibandIsAnEmptyList) {
  auto host = host::NewHost(root_.string());
  auto ports = ReadIbCounters(*host);
  ASSERT_TRUE(ports.ok()) << ports.status().ToString();
  EXPECT_TRUE(ports->empty());
}

TEST_F(IbCountersTest, ReadsEveryPortsErrorCounters) {
  const std::string mlx0 = "/sys/class/infiniband/mlx5_0/ports/1/counters/";
  Write(mlx0 + "port_rcv_errors", "12\n");
  Write(mlx0 + "port_xmit_discards", "0\n");
  Write(mlx0 + "symbol_error", "garbage\n");      // unreadable values are left out
  Write(mlx0 + "port_rcv_data", "123456789\n");   // not an error counter
  const std::string mlx1 = "/sys/class/infiniband/mlx5_1/ports/";
  Write(mlx1 + "1/counters/link_downed", "1\n");
  Write(mlx1 + "2/counters/VL15_dropped", "5\n");
  Write("/sys/class/infiniband/mlx5_2/ports/1/state", "4: ACTIVE\n");  // no counters dir

  auto host = host::NewHost(root_.string());
  auto ports = ReadIbCounters(*host);
  ASSERT_TRUE(ports.ok()) << ports.status().ToString();
  ASSERT_EQ(ports->size(), 3u);
  const IbPortCounters& a = (*ports)[0];
  EXPECT_EQ(a.device, "mlx5_0");
  EXPECT_EQ(a.port, "1");
  EXPECT_EQ(a.counters, (std::map<std::string, uint64_t>{{"port_rcv_errors", 12}, {"port_xmit_discards", 0}}));
  EXPECT_EQ((*ports)[1].device, "mlx5_1");
  EXPECT_EQ((*ports)[1].counters.at("link_downed"), 1u);
  EXPECT_EQ((*ports)[2].port, "2");
  EXPECT_EQ((*ports)[2].counters.at("VL15_dropped"), 5u);
}

}  // namespace
}  // namespace gpuherd::alerts
