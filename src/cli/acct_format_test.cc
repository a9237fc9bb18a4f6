#include "cli/acct_format.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace gpuherd::cli {
namespace {

using ::testing::HasSubstr;

constexpr TimeMs kNow = 1'796'774'400'000;  // 2026-12-09T00:00:00Z

TEST(ParseSinceTest, PeriodsDatesAndTimes) {
  EXPECT_EQ(ParseSince("24h", kNow), kNow - 24 * kHourMs);
  EXPECT_EQ(ParseSince("7d", kNow), kNow - 7 * 24 * kHourMs);
  EXPECT_EQ(ParseSince("2026-12-01", kNow), kNow - 8 * 24 * kHourMs);
  EXPECT_EQ(ParseSince("2026-12-01T08:00", kNow), kNow - 8 * 24 * kHourMs + 8 * kHourMs);
  EXPECT_EQ(ParseSince("2026-12-01 08:00:30Z", kNow), kNow - 8 * 24 * kHourMs + 8 * kHourMs + 30 * kSecondMs);
  for (const char* bad : {"", "yesterday", "5x", "2026-13-01", "2026-02-31", "2026-12-01T25:00", "2026-12-1",
                          "2026-12-01T08:00:00junk", "-5d"}) {
    EXPECT_FALSE(ParseSince(bad, kNow).has_value()) << bad;
  }
}

api::AcctReport Report() {
  api::AcctReport r;
  api::AcctJob j;
  j.id = 7;
  j.name = "sweep, \"lr\"\x1b[31m";
  j.user = "ada";
  j.state = "completed";
  j.submitted = kNow - kHourMs;
  j.first_started = kNow - kHourMs + 90 * kSecondMs;
  j.ended = kNow;
  j.wait_ms = 90 * kSecondMs;
  j.usage.attempts = 2;
  j.usage.gpu_hours = 1.5;
  j.usage.measured_gpu_hours = 1.5;
  j.usage.used_gpu_hours = 0.75;
  j.usage.mean_gpu_util = 50;
  j.usage.peak_gpu_mem_bytes = uint64_t{3} << 30;
  r.jobs.push_back(j);
  api::AcctUser u;
  u.user = "ada";
  u.jobs = 1;
  u.wait_ms_mean = j.wait_ms;
  u.usage = j.usage;
  r.users.push_back(u);
  r.total = u;
  return r;
}

TEST(AcctFormatTest, CsvQuotesAndEscapesUserText) {
  std::string csv = AcctJobsCsv(Report());
  EXPECT_THAT(csv, HasSubstr("id,name,user,state,"));
  // The comma and quotes are quoted; the escape sequence never reaches a terminal.
  EXPECT_THAT(csv, HasSubstr("7,\"sweep, \"\"lr\"\"\\e[31m\",ada,completed,"));
  EXPECT_EQ(csv.find('\x1b'), std::string::npos);
  EXPECT_THAT(csv, HasSubstr(",2,90.000,1.500000,0.750000,50.0,3221225472,0.5000\n"));
  std::string users = AcctUsersCsv(Report());
  EXPECT_THAT(users, HasSubstr("ada,1,2,90.000,1.500000,0.750000,50.0,3221225472,0.5000\n"));
}

TEST(AcctFormatTest, TablesShowHoursPercentagesAndMemory) {
  std::string jobs = AcctJobsTable(Report());
  EXPECT_THAT(jobs, HasSubstr("GPU-HOURS"));
  EXPECT_THAT(jobs, HasSubstr("1.50"));
  EXPECT_THAT(jobs, HasSubstr("3.0 GiB"));
  EXPECT_THAT(jobs, HasSubstr("50%"));
  EXPECT_EQ(jobs.find('\x1b'), std::string::npos);
  std::string users = AcctUsersTable(Report());
  EXPECT_THAT(users, HasSubstr("EFFICIENCY"));
  EXPECT_THAT(users, ::testing::Not(HasSubstr("(all)")));  // one user: no total row
}

TEST(AcctFormatTest, AttemptsTableSaysHowEachEnded) {
  api::AttemptView first;
  first.attempt = 1;
  first.gpus = {2};
  first.gpu_twentieths = 20;
  first.started = kNow - 2 * kHourMs;
  first.ended = kNow - kHourMs;
  first.end_cause = "gpu_fault";
  first.exit_signal = 15;
  first.gpu_util_mean = 97.4;
  first.peak_gpu_mem_bytes = uint64_t{512} << 20;
  first.reason = "GPU 2 fault: XID 79";
  api::AttemptView second;
  second.attempt = 2;
  second.gpus = {0, -1};
  second.gpu_twentieths = 10;
  second.started = kNow - 30 * kMinuteMs;
  std::string t = AttemptsTable({first, second}, kNow);
  EXPECT_THAT(t, HasSubstr("GPU fault"));
  EXPECT_THAT(t, HasSubstr("signal 15"));
  EXPECT_THAT(t, HasSubstr("97%"));
  EXPECT_THAT(t, HasSubstr("512 MiB"));
  EXPECT_THAT(t, HasSubstr("1h00m"));
  EXPECT_THAT(t, HasSubstr("running"));
  EXPECT_THAT(t, HasSubstr("0,? (0.5)"));
  EXPECT_THAT(t, HasSubstr("30m"));
}

}  // namespace
}  // namespace gpuherd::cli
