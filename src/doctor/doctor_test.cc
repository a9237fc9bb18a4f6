#include "doctor/doctor.h"

#include <set>

#include <gtest/gtest.h>

#include "doctor/test_tree.h"

namespace gpuherd::doctor {
namespace {

TEST(DoctorTest, TunedMachineExitsZero) {
  TestTree tree("tuned");
  const Report report = tree.Run();
  for (const Check& check : report.checks) {
    EXPECT_EQ(check.severity, Severity::kOk) << check.id << ": " << check.current;
  }
  EXPECT_EQ(report.ExitCode(), 0);
  EXPECT_EQ(report.hostname, "gpu-tuned-01");
}

TEST(DoctorTest, EveryCategoryIsAudited) {
  TestTree tree("untuned");
  const Report report = tree.Run();
  std::set<std::string> categories, ids;
  for (const Check& check : report.checks) {
    categories.insert(check.category);
    EXPECT_TRUE(ids.insert(check.id).second) << "duplicate id " << check.id;
    EXPECT_FALSE(check.title.empty()) << check.id;
    EXPECT_EQ(check.id.rfind(check.category, 0), 0u) << check.id << " starts with its category";
    if (check.severity == Severity::kWarning || check.severity == Severity::kCritical) {
      EXPECT_FALSE(check.why.empty()) << check.id;
      EXPECT_FALSE(check.fix.empty()) << check.id;
    }
  }
  EXPECT_EQ(categories, (std::set<std::string>{"kernel", "cmdline", "gpu", "storage", "limits", "network",
                                                "containers"}));
}

TEST(DoctorTest, ExitCodeFollowsTheWorstSeverity) {
  TestTree tree("tuned");
  EXPECT_EQ(tree.Run().ExitCode(), 0);
  // An info finding (a GPU link at idle) does not change the exit code.
  tree.Write("/sys/bus/pci/devices/0000:17:00.0/current_link_speed", "2.5 GT/s PCIe");
  EXPECT_EQ(tree.Run().Worst(), Severity::kInfo);
  EXPECT_EQ(tree.Run().ExitCode(), 0);
  tree.Write("/proc/sys/vm/swappiness", "60");
  EXPECT_EQ(tree.Run().ExitCode(), 1);
  tree.Write("/sys/bus/pci/devices/0000:17:00.0/current_link_width", "4");
  EXPECT_EQ(tree.Run().ExitCode(), 2);

  TestTree untuned("untuned");
  EXPECT_EQ(untuned.Run().ExitCode(), 2);
}

TEST(DoctorTest, JsonCarriesEveryCheckAndTheSummary) {
  TestTree tree("untuned");
  const Report report = tree.Run();
  const nlohmann::json json = ReportJson(report);
  EXPECT_EQ(json["hostname"], "gpu-untuned-02");
  EXPECT_EQ(json["exit_code"], 2);
  ASSERT_EQ(json["checks"].size(), report.checks.size());
  int total = 0, critical = 0;
  for (const auto& [name, n] : json["summary"].items()) total += n.get<int>();
  for (const Check& c : report.checks) critical += c.severity == Severity::kCritical;
  EXPECT_EQ(total, static_cast<int>(report.checks.size()));
  EXPECT_EQ(json["summary"]["critical"], critical);
  const nlohmann::json& first = json["checks"][0];
  EXPECT_EQ(first["id"], "kernel.vm.swappiness");
  EXPECT_EQ(first["severity"], "warning");
  EXPECT_EQ(first["current"], "60");
  EXPECT_EQ(first["fix"][0], "sysctl -w vm.swappiness=1");
}

TEST(DoctorTest, SeverityNamesRoundTrip) {
  for (Severity s : {Severity::kOk, Severity::kInfo, Severity::kWarning, Severity::kCritical}) {
    auto parsed = ParseSeverity(SeverityName(s));
    ASSERT_TRUE(parsed.ok());
    EXPECT_EQ(*parsed, s);
  }
  EXPECT_FALSE(ParseSeverity("fatal").ok());
}

}  // namespace
}  // namespace gpuherd::doctor
