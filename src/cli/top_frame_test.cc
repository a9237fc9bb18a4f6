#include "cli/top_frame.h"

#include <gtest/gtest.h>

namespace gpuherd::cli {
namespace {

api::Event E(int64_t id, const std::string& kind, const std::string& severity, const std::string& message) {
  api::Event e;
  e.id = id;
  e.time = 1764763200000 + id * 1000;
  e.kind = kind;
  e.severity = severity;
  e.message = message;
  return e;
}

api::Alert A(const std::string& rule, const std::string& state, TimeMs fired_at) {
  api::Alert a;
  a.rule = rule;
  a.state = state;
  a.gpu = 3;
  a.severity = "critical";
  a.fired_at = fired_at;
  a.summary = rule + " summary";
  return a;
}

TEST(TopFrameTest, FiringAlertsAndFaultsShownPendingFolded) {
  std::vector<api::Alert> alerts = {A("gpu_hot", "pending", 0), A("gpu_lost", "firing", 1764763205000),
                                    A("ecc_dbe", "firing", 1764763209000), A("slow_fan", "pending", 0)};
  std::vector<api::Event> events = {E(1, "daemon.start", "info", "daemon started"),
                                    E(2, "alert.pending", "warning", "gpu_hot pending on GPU 3"),
                                    E(3, "gpu.lost", "critical", "GPU 3 stopped answering"),
                                    E(4, "job.started", "info", "job 7 started"),
                                    E(5, "alert.firing", "critical", "gpu_lost firing on GPU 3"),
                                    E(6, "alert.resolved", "info", "x resolved")};
  std::string out = RenderAttentionPane(alerts, events, 8, false);
  EXPECT_EQ(out.rfind("Firing alerts\n", 0), 0u) << out;
  EXPECT_LT(out.find("ecc_dbe"), out.find("gpu_lost "));  // newest firing first
  EXPECT_NE(out.find("GPU 3"), std::string::npos);
  EXPECT_NE(out.find("GPU 3 stopped answering"), std::string::npos) << out;
  EXPECT_NE(out.find("gpu_lost firing on GPU 3"), std::string::npos);
  EXPECT_EQ(out.find("daemon started"), std::string::npos) << out;
  EXPECT_EQ(out.find("job 7 started"), std::string::npos);
  EXPECT_EQ(out.find("gpu_hot pending"), std::string::npos);
  EXPECT_EQ(out.find("gpu_hot"), std::string::npos);
  EXPECT_NE(out.find("2 pending alerts not firing yet"), std::string::npos) << out;
}

TEST(TopFrameTest, KeepsTheNewestFaultsAndIsEmptyWhenNothingMatters) {
  std::vector<api::Event> events;
  for (int i = 1; i <= 12; ++i) events.push_back(E(i, "gpu.xid", "warning", "xid number " + std::to_string(i)));
  std::string out = RenderAttentionPane({}, events, 3, false);
  EXPECT_EQ(out.find("xid number 9\n"), std::string::npos) << out;
  EXPECT_NE(out.find("xid number 10\n"), std::string::npos);
  EXPECT_NE(out.find("xid number 12\n"), std::string::npos);
  EXPECT_EQ(RenderAttentionPane({}, {E(1, "daemon.start", "info", "x")}, 8, false), "");
  // A message a job wrote reaches the terminal escaped.
  std::string hostile = RenderAttentionPane({}, {E(1, "job.memory_over", "warning", "a\x1b[2Jb")}, 8, false);
  EXPECT_EQ(hostile.find('\x1b'), std::string::npos);
}

}  // namespace
}  // namespace gpuherd::cli
