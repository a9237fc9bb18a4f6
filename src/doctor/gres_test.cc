#include "doctor/gres.h"

#include <map>
#include <sstream>

#include <gtest/gtest.h>

#include "doctor/cpulist.h"
#include "gpu/sim/sim_driver.h"

namespace gpuherd::doctor {
namespace {

// One gres.conf line as Slurm reads it: Key=Value words.
std::map<std::string, std::string> ParseLine(const std::string& line) {
  std::map<std::string, std::string> fields;
  std::istringstream words(line);
  std::string word;
  while (words >> word) {
    const size_t eq = word.find('=');
    EXPECT_NE(eq, std::string::npos) << "not Key=Value: " << word << " in " << line;
    fields[word.substr(0, eq)] = word.substr(eq + 1);
  }
  return fields;
}

std::vector<std::map<std::string, std::string>> ParseGresConf(const std::string& text) {
  std::vector<std::map<std::string, std::string>> lines;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    lines.push_back(ParseLine(line));
  }
  return lines;
}

GresOptions Options(const std::string& node, int shards) {
  GresOptions options;
  options.node_name = node;
  options.shards_per_gpu = shards;
  return options;
}

gpu::Fleet SimFleet(int count) {
  gpu::sim::SimOptions options;
  options.count = count;
  auto driver = gpu::sim::OpenSimDriver(options);
  EXPECT_TRUE(driver.ok()) << driver.status().ToString();
  auto fleet = (*driver)->Discover();
  EXPECT_TRUE(fleet.ok());
  return *fleet;
}

TEST(GresTest, TypeNamesFollowSlurmsNvmlNaming) {
  EXPECT_EQ(GresTypeName("NVIDIA H100 80GB HBM3"), "h100_80gb_hbm3");
  EXPECT_EQ(GresTypeName("NVIDIA GeForce RTX 3090"), "geforce_rtx_3090");
  EXPECT_EQ(GresTypeName("Tesla V100-SXM2-32GB"), "tesla_v100-sxm2-32gb");
  EXPECT_EQ(GresTypeName("NVIDIA A100-SXM4-40GB"), "a100-sxm4-40gb");
  EXPECT_EQ(GresTypeName("weird: name, (x)"), "weird_name_x");
  EXPECT_EQ(GresTypeName(""), "gpu");
}

TEST(GresTest, LinesMatchTheSimulatedTopology) {
  const gpu::Fleet fleet = SimFleet(8);
  auto config = GenerateGres(fleet.gpus, Options("node7", 0));
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  EXPECT_NE(config->gres_conf.find("SIMULATED"), std::string::npos);
  const auto lines = ParseGresConf(config->gres_conf);
  ASSERT_EQ(lines.size(), fleet.gpus.size());
  std::map<int, std::string> cores_of_node;
  for (size_t i = 0; i < lines.size(); ++i) {
    const gpu::GpuInfo& g = fleet.gpus[i];
    const auto& line = lines[i];
    EXPECT_EQ(line.at("Name"), "gpu");
    EXPECT_EQ(line.at("Type"), GresTypeName(g.name));
    EXPECT_EQ(line.at("File"), "/dev/nvidia" + std::to_string(g.index));
    EXPECT_EQ(line.at("Cores"), g.cpu_affinity);
    // GPUs of one NUMA node share its cores; different nodes share none.
    ASSERT_TRUE(g.numa_node.has_value());
    auto [it, inserted] = cores_of_node.emplace(*g.numa_node, line.at("Cores"));
    EXPECT_EQ(it->second, line.at("Cores")) << "GPU " << i;
  }
  ASSERT_EQ(cores_of_node.size(), 2u);
  auto node0 = ParseCpuList(cores_of_node[0]), node1 = ParseCpuList(cores_of_node[1]);
  ASSERT_TRUE(node0.ok() && node1.ok());
  for (int cpu : *node0) EXPECT_EQ(std::count(node1->begin(), node1->end(), cpu), 0) << cpu;
  EXPECT_EQ(config->slurm_conf,
            "GresTypes=gpu\nNodeName=node7 Gres=gpu:h100_80gb_hbm3:4,gpu:geforce_rtx_3090:4"
            "  # add CPUs=, RealMemory= and the rest as slurmd -C prints them\n");
}

TEST(GresTest, ShardsShareTheirGpusFile) {
  const gpu::Fleet fleet = SimFleet(2);
  auto config = GenerateGres(fleet.gpus, Options("n1", 10));
  ASSERT_TRUE(config.ok());
  const auto lines = ParseGresConf(config->gres_conf);
  ASSERT_EQ(lines.size(), 4u);
  EXPECT_EQ(lines[2].at("Name"), "shard");
  EXPECT_EQ(lines[2].at("Count"), "10");
  EXPECT_EQ(lines[2].at("File"), lines[0].at("File"));
  EXPECT_EQ(lines[3].at("File"), lines[1].at("File"));
  EXPECT_NE(config->slurm_conf.find("GresTypes=gpu,shard\n"), std::string::npos);
  EXPECT_NE(config->slurm_conf.find(",shard:20 "), std::string::npos);
}

TEST(GresTest, CoresAreFirstThreadsAndFilesAreMinorNumbers) {
  gpu::GpuInfo g;
  g.index = 0;
  g.name = "NVIDIA H100 80GB HBM3";
  g.pci_bus_id = "00000000:B1:00.0";
  g.cpu_affinity = "4-7,12-15";
  GresOptions options = Options("n", 0);
  for (int cpu = 0; cpu < 8; ++cpu) options.first_thread_of_cpu[cpu] = options.first_thread_of_cpu[cpu + 8] = cpu;
  options.minor_by_bus_id["0000:b1:00.0"] = 2;
  auto config = GenerateGres({g}, options);
  ASSERT_TRUE(config.ok());
  const auto lines = ParseGresConf(config->gres_conf);
  EXPECT_EQ(lines[0].at("Cores"), "4-7");
  EXPECT_EQ(lines[0].at("File"), "/dev/nvidia2");
}

TEST(GresTest, Errors) {
  EXPECT_EQ(GenerateGres({}, {}).status().code(), Code::kFailedPrecondition);
  gpu::GpuInfo g;
  g.cpu_affinity = "0-x";
  auto bad = GenerateGres({g}, {});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("GPU 0"), std::string::npos);
  EXPECT_EQ(GenerateGres({gpu::GpuInfo{}}, Options("n", -1)).status().code(), Code::kInvalidArgument);
  g.cpu_affinity = "";
  auto no_affinity = GenerateGres({g}, {});
  ASSERT_TRUE(no_affinity.ok());
  EXPECT_EQ(ParseGresConf(no_affinity->gres_conf).at(0).count("Cores"), 0u);
}

}  // namespace
}  // namespace gpuherd::doctor
