#include "telemetry/prometheus.h"

#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace gpuherd::telemetry {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

gpu::GpuInfo Info(int index) {
  gpu::GpuInfo info;
  info.index = index;
  info.uuid = "GPU-" + std::to_string(index);
  info.name = "NVIDIA H100 80GB HBM3";
  info.pci_bus_id = "00000000:1" + std::to_string(index) + ":00.0";
  info.memory_total_bytes = 80ull << 30;
  info.max_pcie_gen = 5;
  info.max_pcie_width = 16;
  info.temp_slowdown_c = 87;
  return info;
}

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

// The value of the one series starting with `prefix` (name plus labels).
std::string ValueOf(const std::string& text, const std::string& prefix) {
  std::string found;
  int hits = 0;
  for (const std::string& line : Lines(text)) {
    bool whole_name = prefix.find('{') != std::string::npos ||
                      (line.size() > prefix.size() && (line[prefix.size()] == ' ' || line[prefix.size()] == '{'));
    if (line.rfind(prefix, 0) == 0 && whole_name) {
      found = line.substr(line.rfind(' ') + 1);
      ++hits;
    }
  }
  EXPECT_LE(hits, 1) << prefix;
  return found;
}

class RenderTest : public ::testing::Test {
 protected:
  RenderTest() {
    infos_ = {Info(0), Info(1)};
    input_.hostname = "node-a";
    input_.version = "0.1.0";
    input_.driver = "sim";
    input_.simulated = true;
  }

  void AddGpu(int i, const gpu::GpuSample* latest) {
    GpuMetrics g;
    g.info = &infos_[i];
    g.latest = latest;
    input_.gpus.push_back(g);
  }

  std::vector<gpu::GpuInfo> infos_;
  MetricsInput input_;
};

TEST_F(RenderTest, ReadingsUseDcgmNamesLabelsAndUnits) {
  gpu::GpuSample s;
  s.gpu_util_pct = 50;
  s.mem_used_bytes = 1024ull << 20;  // 1024 MiB
  s.mem_total_bytes = 4096ull << 20;
  s.temp_c = 61;
  s.energy_mj = 123456789;
  s.sm_clock_mhz = 1980;
  AddGpu(0, &s);
  std::string text = RenderMetrics(input_);

  EXPECT_THAT(text, HasSubstr("# HELP DCGM_FI_DEV_GPU_TEMP GPU temperature (in C).\n"
                              "# TYPE DCGM_FI_DEV_GPU_TEMP gauge\n"
                              "DCGM_FI_DEV_GPU_TEMP{gpu=\"0\",UUID=\"GPU-0\",pci_bus_id=\"00000000:10:00.0\","
                              "device=\"nvidia0\",modelName=\"NVIDIA H100 80GB HBM3\",Hostname=\"node-a\"} 61\n"));
  EXPECT_EQ(ValueOf(text, "DCGM_FI_DEV_FB_USED"), "1024");
  EXPECT_EQ(ValueOf(text, "DCGM_FI_DEV_FB_FREE"), "3072");
  EXPECT_EQ(ValueOf(text, "DCGM_FI_DEV_GPU_UTIL"), "50");
  EXPECT_EQ(ValueOf(text, "DCGM_FI_PROF_GR_ENGINE_ACTIVE"), "0.5");
  EXPECT_EQ(ValueOf(text, "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION"), "123456789");
  EXPECT_EQ(ValueOf(text, "DCGM_FI_DEV_SM_CLOCK"), "1980");
  EXPECT_EQ(ValueOf(text, "DCGM_FI_DEV_XID_ERRORS"), "0");
  EXPECT_EQ(ValueOf(text, "gpuherd_gpu_up{gpu=\"0\",uuid=\"GPU-0\"}"), "1");
}

TEST_F(RenderTest, AbsentReadingsAreLeftOutNotZero) {
  gpu::GpuSample s;
  s.temp_c = 40;  // the only reading this GPU gives
  AddGpu(0, &s);
  std::string text = RenderMetrics(input_);

  EXPECT_THAT(text, HasSubstr("DCGM_FI_DEV_GPU_TEMP{"));
  for (const char* absent : {"DCGM_FI_DEV_POWER_USAGE", "DCGM_FI_DEV_FB_USED", "DCGM_FI_DEV_FB_FREE",
                             "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", "DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_PROF_GR_ENGINE_ACTIVE",
                             "DCGM_FI_DEV_ROW_REMAP_FAILURE", "gpuherd_gpu_throttle_reason",
                             "gpuherd_gpu_health_score", "gpuherd_scheduler_pass_seconds",
                             "gpuherd_http_connections"}) {
    // Neither a series nor the family's HELP line.
    EXPECT_THAT(text, Not(HasSubstr(absent))) << absent;
  }
}

TEST_F(RenderTest, LostGpuShowsNoStaleReadingsButKeepsItsLastXid) {
  gpu::GpuSample s;
  s.temp_c = 70;
  s.xids.push_back({1, 79, "fallen off the bus"});
  AddGpu(0, &s);
  input_.gpus[0].lost = true;
  std::string text = RenderMetrics(input_);

  EXPECT_THAT(text, Not(HasSubstr("DCGM_FI_DEV_GPU_TEMP")));
  EXPECT_EQ(ValueOf(text, "DCGM_FI_DEV_XID_ERRORS"), "79");
  EXPECT_EQ(ValueOf(text, "gpuherd_gpu_up"), "0");
}

TEST_F(RenderTest, RememberedXidWinsOverAnEmptyReading) {
  gpu::GpuSample s;
  s.temp_c = 70;
  AddGpu(0, &s);
  input_.gpus[0].last_xid = 48;
  input_.gpus[0].xid_count = 2;
  std::string text = RenderMetrics(input_);
  EXPECT_EQ(ValueOf(text, "DCGM_FI_DEV_XID_ERRORS"), "48");
  EXPECT_EQ(ValueOf(text, "gpuherd_gpu_xid_errors_total"), "2");
}

TEST_F(RenderTest, LabelValuesAreEscaped) {
  infos_[0].name = "Card \"X\" \\ rev\nB";
  input_.hostname = "h\"1";
  gpu::GpuSample s;
  s.temp_c = 40;
  AddGpu(0, &s);
  input_.jobs_by_state["we\\ird"] = 1;
  std::string text = RenderMetrics(input_);
  EXPECT_THAT(text, HasSubstr("modelName=\"Card \\\"X\\\" \\\\ rev\\nB\",Hostname=\"h\\\"1\""));
  EXPECT_THAT(text, HasSubstr("gpuherd_jobs{state=\"we\\\\ird\"} 1\n"));
  EXPECT_EQ(EscapeLabelValue("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
  EXPECT_EQ(EscapeLabelValue("plain"), "plain");
}

TEST_F(RenderTest, GpuherdFigures) {
  gpu::GpuSample s;
  s.pcie_gen = 4;
  s.pcie_width = 8;
  s.pcie_tx_kbps = 2;
  s.throttle_reasons = gpu::throttle::kSwPowerCap | gpu::throttle::kHwThermalSlowdown;
  AddGpu(0, &s);
  AddGpu(1, nullptr);  // never answered: only what does not need a reading
  input_.gpus[0].health_score = 93;
  input_.gpus[0].verdict = "healthy";
  input_.gpus[0].jobs = 2;
  input_.gpus[1].health_score = 41;
  input_.gpus[1].verdict = "unhealthy";
  input_.gpus[1].health_state = "quarantined";
  input_.jobs_by_state = {{"pending", 3}, {"running", 0}};
  input_.gpu_seconds_by_user = {{"ana", 7200.5}};
  input_.alerts_firing = {{"gpu_temp_high", "critical", 2}};
  input_.scheduler_pass_seconds = 0.00125;
  input_.ib_ports = {{"mlx5_0", "1", {{"port_rcv_errors", 4}, {"symbol_error", 0}}}};
  input_.connections = ConnectionMetrics{.open = 70,
                                         .limit = 4096,
                                         .refused_per_user = 2936,
                                         .refused_per_address = 0,
                                         .refused_total = 5,
                                         .accept_errors = 1};
  std::string text = RenderMetrics(input_);

  EXPECT_EQ(ValueOf(text, "gpuherd_gpu_health_score{gpu=\"0\",uuid=\"GPU-0\"}"), "93");
  EXPECT_EQ(ValueOf(text, "gpuherd_gpu_health_score{gpu=\"1\",uuid=\"GPU-1\"}"), "41");
  EXPECT_EQ(ValueOf(text, "gpuherd_gpu_verdict{gpu=\"0\",uuid=\"GPU-0\",verdict=\"healthy\"}"), "1");
  EXPECT_EQ(ValueOf(text, "gpuherd_gpu_verdict{gpu=\"0\",uuid=\"GPU-0\",verdict=\"unhealthy\"}"), "0");
  EXPECT_EQ(ValueOf(text, "gpuherd_gpu_verdict{gpu=\"1\",uuid=\"GPU-1\",verdict=\"unhealthy\"}"), "1");
  EXPECT_EQ(ValueOf(text, "gpuherd_gpu_state{gpu=\"1\",uuid=\"GPU-1\",state=\"quarantined\"}"), "1");
  EXPECT_EQ(ValueOf(text, "gpuherd_gpu_state{gpu=\"1\",uuid=\"GPU-1\",state=\"in_service\"}"), "0");
  EXPECT_THAT(text, Not(HasSubstr("gpuherd_gpu_state{gpu=\"0\"")));
  EXPECT_EQ(ValueOf(text, "gpuherd_gpu_pcie_link_width{gpu=\"0\""), "8");
  EXPECT_EQ(ValueOf(text, "gpuherd_gpu_pcie_link_width_max{gpu=\"0\""), "16");
  EXPECT_EQ(ValueOf(text, "gpuherd_gpu_pcie_tx_bytes_per_second{gpu=\"0\""), "2048");
  EXPECT_EQ(ValueOf(text, "gpuherd_gpu_throttle_reason{gpu=\"0\",uuid=\"GPU-0\",reason=\"sw_power_cap\"}"), "1");
  EXPECT_EQ(ValueOf(text, "gpuherd_gpu_throttle_reason{gpu=\"0\",uuid=\"GPU-0\",reason=\"hw_thermal\"}"), "1");
  EXPECT_EQ(ValueOf(text, "gpuherd_gpu_throttle_reason{gpu=\"0\",uuid=\"GPU-0\",reason=\"idle\"}"), "0");
  EXPECT_THAT(text, Not(HasSubstr("gpuherd_gpu_pcie_link_width{gpu=\"1\"")));
  EXPECT_EQ(ValueOf(text, "gpuherd_gpu_jobs{gpu=\"0\",uuid=\"GPU-0\"}"), "2");
  EXPECT_THAT(text, Not(HasSubstr("gpuherd_gpu_jobs{gpu=\"1\"")));
  EXPECT_EQ(ValueOf(text, "gpuherd_jobs{state=\"pending\"}"), "3");
  EXPECT_EQ(ValueOf(text, "gpuherd_jobs{state=\"running\"}"), "0");
  EXPECT_EQ(ValueOf(text, "gpuherd_user_gpu_seconds_total{user=\"ana\"}"), "7200.5");
  EXPECT_EQ(ValueOf(text, "gpuherd_alerts_firing{rule=\"gpu_temp_high\",severity=\"critical\"}"), "2");
  EXPECT_EQ(ValueOf(text, "gpuherd_scheduler_pass_seconds"), "0.00125");
  EXPECT_EQ(ValueOf(text, "gpuherd_http_connections"), "70");
  EXPECT_EQ(ValueOf(text, "gpuherd_http_connections_limit"), "4096");
  EXPECT_EQ(ValueOf(text, "gpuherd_http_connections_refused_total{limit=\"per_user\"}"), "2936");
  EXPECT_EQ(ValueOf(text, "gpuherd_http_connections_refused_total{limit=\"per_address\"}"), "0");
  EXPECT_EQ(ValueOf(text, "gpuherd_http_connections_refused_total{limit=\"total\"}"), "5");
  EXPECT_EQ(ValueOf(text, "gpuherd_http_accept_errors_total"), "1");
  EXPECT_EQ(ValueOf(text,
                    "gpuherd_infiniband_port_errors_total{device=\"mlx5_0\",port=\"1\",counter=\"port_rcv_errors\"}"),
            "4");
  EXPECT_EQ(ValueOf(text, "gpuherd_info{version=\"0.1.0\",driver=\"sim\",hostname=\"node-a\",simulated=\"true\"}"),
            "1");
}

// Each family once, its HELP and TYPE first and its series together, as the
// text format requires.
TEST_F(RenderTest, FamiliesAreContiguousWithOneHeaderEach) {
  gpu::GpuSample a, b;
  a.temp_c = 40;
  a.power_w = 100;
  b.temp_c = 41;
  b.throttle_reasons = 0;
  AddGpu(0, &a);
  AddGpu(1, &b);
  std::string text = RenderMetrics(input_);

  std::set<std::string> seen;
  std::string current;
  for (const std::string& line : Lines(text)) {
    if (line.rfind("# HELP ", 0) == 0) {
      current = line.substr(7, line.find(' ', 7) - 7);
      EXPECT_TRUE(seen.insert(current).second) << "second header for " << current;
      continue;
    }
    if (line.rfind("# TYPE ", 0) == 0) {
      EXPECT_EQ(line.substr(7, current.size() + 1), current + " ");
      continue;
    }
    std::string name = line.substr(0, line.find_first_of("{ "));
    EXPECT_EQ(name, current) << line;
  }
  EXPECT_TRUE(seen.count("DCGM_FI_DEV_POWER_USAGE"));
  EXPECT_EQ(text.back(), '\n');
}

}  // namespace
}  // namespace gpuherd::telemetry
