#include "doctor/fix_script.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>

#include <gtest/gtest.h>

#include "doctor/test_tree.h"

namespace gpuherd::doctor {
namespace {

size_t Count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

TEST(FixScriptTest, OneCommentedBlockPerFailingCheckWorstFirst) {
  TestTree tree("untuned");
  const Report report = tree.Run();
  const std::string script = FixScript(report);
  EXPECT_EQ(script.rfind("#!/usr/bin/env bash\n", 0), 0u);
  EXPECT_NE(script.find("\nset -euo pipefail\n"), std::string::npos);
  size_t blocks = 0;
  for (const Check& c : report.checks) {
    const bool fails = c.severity != Severity::kOk && !c.fix.empty();
    blocks += fails;
    EXPECT_EQ(script.find(c.id + "]") != std::string::npos, fails) << c.id;
  }
  EXPECT_EQ(Count(script, "\n# --- "), blocks);
  // Criticals come before warnings.
  EXPECT_LT(script.find("[critical, limits.memlock]"), script.find("[warning, kernel.vm.swappiness]"));
  // The block says what, why and how.
  const size_t block = script.find("# --- vm.swappiness");
  ASSERT_NE(block, std::string::npos);
  const std::string text = script.substr(block, script.find("\n# --- ", block + 1) - block);
  EXPECT_NE(text.find("# now: 60\n"), std::string::npos);
  EXPECT_NE(text.find("# recommended: 1 (at most 10)\n"), std::string::npos);
  EXPECT_NE(text.find("40%"), std::string::npos);
  EXPECT_NE(text.find("\nsysctl -w vm.swappiness=1\n"), std::string::npos);
  EXPECT_NE(text.find("/etc/sysctl.d/90-gpuherd.conf"), std::string::npos);
  for (size_t at = 0; (at = text.find('\n', at)) != std::string::npos && at + 1 < text.size(); ++at) {
    const std::string line = text.substr(at + 1, text.find('\n', at + 1) - at - 1);
    if (!line.empty() && line[0] == '#') {
      EXPECT_LE(line.size(), 100u) << line;
    }
  }
}

TEST(FixScriptTest, InfoChecksWithAHintAreIncludedButNotOkOnes) {
  TestTree tree("tuned");
  tree.Write("/sys/bus/pci/devices/0000:17:00.0/current_link_speed", "2.5 GT/s PCIe");
  const std::string script = FixScript(tree.Run());
  EXPECT_EQ(Count(script, "\n# --- "), 1u);
  EXPECT_NE(script.find("gpuherd burnin --level 2"), std::string::npos);
}

TEST(FixScriptTest, TunedMachineHasNothingToFix) {
  TestTree tree("tuned");
  const std::string script = FixScript(tree.Run());
  EXPECT_NE(script.find("# Nothing to fix"), std::string::npos);
  EXPECT_EQ(Count(script, "\n# --- "), 0u);
}

// The script is valid shell: bash parses it without running it.
TEST(FixScriptTest, BashParsesTheScript) {
  if (std::system("command -v bash >/dev/null 2>&1") != 0) GTEST_SKIP() << "no bash";
  TestTree tree("untuned");
  const std::string path = ::testing::TempDir() + "/gpuherd_fix_" + std::to_string(getpid()) + ".sh";
  std::ofstream(path) << FixScript(tree.Run());
  EXPECT_EQ(std::system(("bash -n " + path).c_str()), 0);
  std::remove(path.c_str());
}

}  // namespace
}  // namespace gpuherd::doctor
