#include "gpu/xid.h"

#include <gtest/gtest.h>

#include <set>

namespace gpuherd::gpu {
namespace {

TEST(XidCatalogueTest, CoversEveryPublishedNumber) {
  const auto& cat = XidCatalogue();
  ASSERT_EQ(cat.size(), 172u);
  std::set<int> numbers;
  for (const XidInfo& x : cat) {
    numbers.insert(x.xid);
    EXPECT_FALSE(x.description.empty()) << x.xid;
    EXPECT_FALSE(x.mnemonic.empty()) << x.xid;
    EXPECT_TRUE(x.known);
  }
  EXPECT_EQ(*numbers.begin(), 1);
  EXPECT_EQ(*numbers.rbegin(), 172);
  EXPECT_EQ(numbers.size(), 172u);
}

TEST(XidCatalogueTest, WellKnownXidsCarryNvidiasFacts) {
  XidInfo dbe = LookupXid(48);
  EXPECT_EQ(dbe.mnemonic, "ROBUST_CHANNEL_GPU_ECC_DBE");
  EXPECT_EQ(dbe.cause, XidCause::kHardware);
  EXPECT_EQ(dbe.resolution, XidResolution::kResetGpu);
  EXPECT_EQ(XidVerdictOf(48), XidVerdict::kFatal);

  XidInfo bus = LookupXid(79);
  EXPECT_EQ(bus.resolution, XidResolution::kRebootNode);
  EXPECT_TRUE(XidIsFatal(79));

  for (int app : {13, 31, 43, 45}) {
    EXPECT_EQ(LookupXid(app).cause, XidCause::kApplication) << app;
    EXPECT_EQ(XidVerdictOf(app), XidVerdict::kApplication) << app;
    EXPECT_FALSE(XidIsFatal(app)) << app;
  }
  EXPECT_EQ(LookupXid(74).cause, XidCause::kNvlink);
  EXPECT_TRUE(XidIsFatal(74));
  EXPECT_TRUE(XidIsFatal(95));
  EXPECT_FALSE(XidIsFatal(94));  // contained: only the processes that used it are hit
  EXPECT_EQ(XidVerdictOf(63), XidVerdict::kInformational);  // a row remap, applied at reset
  EXPECT_EQ(XidVerdictOf(92), XidVerdict::kInformational);
  EXPECT_TRUE(XidIsFatal(119));
  EXPECT_EQ(LookupXid(54).resolution, XidResolution::kInspectHardware);
}

TEST(XidCatalogueTest, UnknownAndUnusedNumbersAreSuspectNeverIgnored) {
  XidInfo unknown = LookupXid(999);
  EXPECT_FALSE(unknown.known);
  EXPECT_EQ(VerdictOf(unknown), XidVerdict::kSuspect);
  EXPECT_NE(XidDescription(999).find("999"), std::string::npos);
  // NVIDIA lists 1 as unused by current drivers; a driver that sends it anyway is odd.
  XidInfo unused = LookupXid(1);
  EXPECT_TRUE(unused.known);
  EXPECT_FALSE(unused.in_use);
  EXPECT_EQ(VerdictOf(unused), XidVerdict::kSuspect);
  EXPECT_EQ(XidVerdictOf(0), XidVerdict::kSuspect);
  EXPECT_EQ(XidVerdictOf(-5), XidVerdict::kSuspect);
}

TEST(XidCatalogueTest, EveryVerdictFollowsFromTheData) {
  int fatal = 0, app = 0;
  for (const XidInfo& x : XidCatalogue()) {
    XidVerdict v = VerdictOf(x);
    if (x.fatal) {
      EXPECT_TRUE(!x.in_use || v == XidVerdict::kFatal) << x.xid;
      // A fatal entry's resolution needs more than restarting the program.
      EXPECT_NE(x.resolution, XidResolution::kNone) << x.xid;
      EXPECT_NE(x.resolution, XidResolution::kRestartApp) << x.xid;
      ++fatal;
    }
    if (v == XidVerdict::kApplication) ++app;
  }
  EXPECT_GE(fatal, 20);
  EXPECT_GE(app, 8);
}

TEST(XidCatalogueParseTest, RefusesBrokenCatalogues) {
  EXPECT_FALSE(ParseXidCatalogue("foo: 1").ok());
  EXPECT_FALSE(ParseXidCatalogue("xids: [{xid: 1, mnemonic: A, in_use: true, cause: gremlins, "
                                 "resolution: none, fatal: false, description: d}]")
                   .ok());
  EXPECT_FALSE(ParseXidCatalogue("xids: [{xid: 1, mnemonic: A, in_use: true, cause: driver, "
                                 "resolution: pray, fatal: false, description: d}]")
                   .ok());
  const char* twice =
      "xids:\n"
      "  - {xid: 7, mnemonic: A, in_use: true, cause: driver, resolution: none, fatal: false, "
      "description: d}\n"
      "  - {xid: 7, mnemonic: B, in_use: true, cause: driver, resolution: none, fatal: false, "
      "description: d}\n";
  EXPECT_FALSE(ParseXidCatalogue(twice).ok());
  EXPECT_FALSE(ParseXidCatalogue("xids: [{xid: 1}]").ok());
  auto ok = ParseXidCatalogue(
      "xids: [{xid: 9, mnemonic: A, in_use: true, cause: nvlink, resolution: reset_gpu, "
      "fatal: true, description: \"a, b\"}]");
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_EQ(ok->at(0).description, "a, b");
  EXPECT_EQ(ok->at(0).cause, XidCause::kNvlink);
}

TEST(XidCatalogueParseTest, ErrorsNameTheLineAndRefuseUnknownKeys) {
  const char* typo =
      "xids:\n"
      "  - {xid: 7, mnemonic: A, in_use: true, cause: driver, resolution: none, fatal: false, description: d}\n"
      "  - {xid: 8, mnemonic: B, in_use: true, cause: driver, resolution: none, fatal: false, descripton: d}\n";
  auto parsed = ParseXidCatalogue(typo);
  ASSERT_FALSE(parsed.ok());
  EXPECT_NE(parsed.status().message().find("XID catalogue:3"), std::string::npos) << parsed.status().message();
  EXPECT_NE(parsed.status().message().find("description"), std::string::npos) << parsed.status().message();

  auto not_bool = ParseXidCatalogue(
      "xids:\n"
      "  - {xid: 9, mnemonic: A, in_use: maybe, cause: driver, resolution: none, fatal: false, description: d}\n");
  ASSERT_FALSE(not_bool.ok());
  EXPECT_NE(not_bool.status().message().find("XID catalogue:2"), std::string::npos) << not_bool.status().message();
  EXPECT_NE(not_bool.status().message().find("in_use"), std::string::npos) << not_bool.status().message();
  EXPECT_FALSE(ParseXidCatalogue("xids: [{xid: 70000, mnemonic: A, in_use: true, cause: driver, "
                                 "resolution: none, fatal: false, description: d}]")
                   .ok());
}

}  // namespace
}  // namespace gpuherd::gpu
