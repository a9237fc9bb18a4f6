#include "api/acct.h"

#include <gtest/gtest.h>

#include "api/decode.h"
#include "api/job_detail.h"

namespace gpuherd::api {
namespace {

using nlohmann::json;

constexpr TimeMs kT0 = 1'800'000'000'000;

store::JobRecord Job(int64_t id, const std::string& user, const std::string& state, TimeMs submitted,
                     TimeMs ended = 0) {
  store::JobRecord j;
  j.id = id;
  j.name = "job" + std::to_string(id);
  j.user = user;
  j.state = state;
  j.submitted = submitted;
  j.ended = ended;
  return j;
}

store::AttemptRecord Attempt(int64_t job, int n, int tenths, TimeMs started, TimeMs ended,
                             std::optional<double> util, std::optional<uint64_t> peak = std::nullopt) {
  store::AttemptRecord a;
  a.job_id = job;
  a.attempt = n;
  a.gpu_twentieths = 2 * tenths;
  a.started = started;
  a.ended = ended;
  a.end_cause = ended > 0 ? "completed" : "";
  a.gpu_util_mean = util;
  a.util_samples = util ? 10 : 0;
  a.peak_gpu_mem_bytes = peak;
  return a;
}

TEST(AcctTest, GpuHoursUtilizationEfficiencyAndWaitPerJobAndUser) {
  const TimeMs now = kT0 + 10 * kHourMs;
  std::vector<store::JobRecord> jobs = {
      Job(1, "ada", "completed", kT0, kT0 + 3 * kHourMs),
      Job(2, "ada", "completed", kT0, kT0 + 6 * kHourMs),
      Job(3, "bob", "running", now - kHourMs),
      Job(4, "bob", "pending", now - 10 * kMinuteMs),
  };
  std::vector<store::AttemptRecord> attempts = {
      // Preempted after an hour at 50 %, then an hour at 100 %.
      Attempt(1, 1, 10, kT0 + 5 * kMinuteMs, kT0 + 5 * kMinuteMs + kHourMs, 50.0, uint64_t{8} << 30),
      Attempt(1, 2, 10, kT0 + 2 * kHourMs, kT0 + 3 * kHourMs, 100.0, uint64_t{10} << 30),
      // Half a GPU for two hours on a GPU 40 % busy: 80 % of its share.
      Attempt(2, 1, 5, kT0 + 4 * kHourMs, kT0 + 6 * kHourMs, 40.0),
      // Two GPUs for the last half hour, still running, no readings yet.
      Attempt(3, 1, 20, now - 30 * kMinuteMs, 0, std::nullopt),
  };
  AcctReport r = Account(jobs, attempts, kT0, now, "");
  ASSERT_EQ(r.jobs.size(), 4u);
  const AcctJob& j1 = r.jobs[0];
  EXPECT_EQ(j1.usage.attempts, 2);
  EXPECT_DOUBLE_EQ(j1.usage.gpu_hours, 2.0);
  EXPECT_DOUBLE_EQ(j1.usage.used_gpu_hours, 1.5);
  EXPECT_DOUBLE_EQ(*j1.usage.efficiency(), 0.75);
  EXPECT_DOUBLE_EQ(*j1.usage.mean_gpu_util, 75.0);
  EXPECT_EQ(*j1.usage.peak_gpu_mem_bytes, uint64_t{10} << 30);
  EXPECT_EQ(j1.wait_ms, 5 * kMinuteMs);
  EXPECT_EQ(j1.first_started, kT0 + 5 * kMinuteMs);

  const AcctJob& j2 = r.jobs[1];
  EXPECT_DOUBLE_EQ(j2.usage.gpu_hours, 1.0);
  EXPECT_NEAR(*j2.usage.efficiency(), 0.8, 1e-9);
  EXPECT_FALSE(j2.usage.peak_gpu_mem_bytes.has_value());
  EXPECT_EQ(j2.wait_ms, 4 * kHourMs);

  const AcctJob& j3 = r.jobs[2];
  EXPECT_DOUBLE_EQ(j3.usage.gpu_hours, 1.0);  // running: until now
  EXPECT_FALSE(j3.usage.efficiency().has_value());
  EXPECT_FALSE(j3.usage.mean_gpu_util.has_value());
  EXPECT_EQ(j3.wait_ms, 30 * kMinuteMs);

  EXPECT_EQ(r.jobs[3].wait_ms, 10 * kMinuteMs);  // pending: so far
  EXPECT_EQ(r.jobs[3].usage.attempts, 0);

  ASSERT_EQ(r.users.size(), 2u);
  const AcctUser& ada = r.users[0];
  EXPECT_EQ(ada.user, "ada");
  EXPECT_EQ(ada.jobs, 2);
  EXPECT_DOUBLE_EQ(ada.usage.gpu_hours, 3.0);
  EXPECT_NEAR(ada.usage.used_gpu_hours, 2.3, 1e-9);
  EXPECT_NEAR(*ada.usage.efficiency(), 2.3 / 3.0, 1e-9);
  EXPECT_NEAR(*ada.usage.mean_gpu_util, (75.0 * 2 + 40.0 * 1) / 3, 1e-9);
  EXPECT_EQ(ada.wait_ms_mean, (5 * kMinuteMs + 4 * kHourMs) / 2);
  const AcctUser& bob = r.users[1];
  EXPECT_DOUBLE_EQ(bob.usage.gpu_hours, 1.0);
  EXPECT_FALSE(bob.usage.efficiency().has_value());
  EXPECT_EQ(r.total.jobs, 4);
  EXPECT_DOUBLE_EQ(r.total.usage.gpu_hours, 4.0);
  EXPECT_NEAR(*r.total.usage.efficiency(), 2.3 / 3.0, 1e-9);  // bob's unmeasured hour is not held against it
}

TEST(AcctTest, ReportRoundTripsThroughJson) {
  const TimeMs now = kT0 + kHourMs;
  AcctReport r = Account({Job(1, "ada", "completed", kT0, now)},
                         {Attempt(1, 1, 10, kT0, now, 60.0, uint64_t{1} << 30)}, kT0, now, "ada");
  json j = r;
  EXPECT_EQ(j["jobs"][0]["id"], 1);
  EXPECT_DOUBLE_EQ(j["jobs"][0]["efficiency"].get<double>(), 0.6);
  EXPECT_EQ(j["users"][0]["user"], "ada");
  EXPECT_TRUE(j["total"]["peak_gpu_mem_bytes"].is_number());
  auto back = Decode<AcctReport>(j, "the accounting");
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(json(*back), j);
}

TEST(JobDetailTest, AttemptAndSpecRoundTrip) {
  store::AttemptRecord r = Attempt(7, 2, 10, kT0, kT0 + kMinuteMs, 12.5, uint64_t{3} << 30);
  r.gpus_json = R"(["GPU-a","GPU-b"])";
  r.end_cause = "gpu_fault";
  r.exit_signal = 15;
  AttemptView a = AttemptViewOf(r, {0, -1});
  EXPECT_EQ(a.gpu_uuids, (std::vector<std::string>{"GPU-a", "GPU-b"}));
  json j = a;
  EXPECT_FALSE(j.contains("exit_code"));
  EXPECT_EQ(j["exit_signal"], 15);
  EXPECT_EQ(json(j.get<AttemptView>()), j);
  EXPECT_EQ(EndCauseText("gpu_fault"), "GPU fault");
  EXPECT_EQ(EndCauseText("time_limit"), "time limit");
  EXPECT_EQ(EndCauseText(""), "running");

  JobSpecView s;
  s.command = {"python3", "train.py"};
  s.env = {{"SEED", "1"}};
  s.min_cc = 80;
  s.depends_on = {3, 4};
  json sj = s;
  EXPECT_EQ(sj["min_cc"], 80);
  EXPECT_EQ(json(sj.get<JobSpecView>()), sj);
  s.min_cc.reset();
  EXPECT_TRUE(json(s)["min_cc"].is_null());
}

}  // namespace
}  // namespace gpuherd::api
