#include "core/time.h"

#include <gtest/gtest.h>

namespace gpuherd {
namespace {

TEST(TimeTest, FormatsUtcWithMilliseconds) {
  EXPECT_EQ(FormatTimeUtc(0), "1970-01-01T00:00:00.000Z");
  EXPECT_EQ(FormatTimeUtc(1796214806123), "2026-12-02T12:33:26.123Z");
}

TEST(TimeTest, SaturatingAddClampsInsteadOfOverflowing) {
  EXPECT_EQ(SaturatingAdd(5, 7), 12);
  EXPECT_EQ(SaturatingAdd(INT64_MAX - 1, 5), INT64_MAX);
  EXPECT_EQ(SaturatingAdd(INT64_MIN + 1, -5), INT64_MIN);
  EXPECT_EQ(SaturatingAdd(INT64_MAX, -1), INT64_MAX - 1);
}

TEST(TimeTest, FormatsDurations) {
  EXPECT_EQ(FormatDuration(250), "250ms");
  EXPECT_EQ(FormatDuration(5000), "5s");
  EXPECT_EQ(FormatDuration(200 * kSecondMs), "3m20s");
  EXPECT_EQ(FormatDuration(2 * kHourMs + 5 * kMinuteMs), "2h05m");
  EXPECT_EQ(FormatDuration(76 * kHourMs), "3d04h");
}

TEST(TimeTest, ParsesDurationsAndRejectsGarbage) {
  DurationMs d = 0;
  ASSERT_TRUE(ParseDuration("100ms", &d));
  EXPECT_EQ(d, 100);
  ASSERT_TRUE(ParseDuration("5", &d));
  EXPECT_EQ(d, 5000);
  ASSERT_TRUE(ParseDuration("1.5m", &d));
  EXPECT_EQ(d, 90000);
  ASSERT_TRUE(ParseDuration("2h", &d));
  EXPECT_EQ(d, 2 * kHourMs);
  EXPECT_FALSE(ParseDuration("", &d));
  EXPECT_FALSE(ParseDuration("fast", &d));
  EXPECT_FALSE(ParseDuration("5 parsecs", &d));
  // Beyond the range: refused, not converted (a double beyond int64 made an
  // undefined conversion, then an overflow in Now() + grace).
  EXPECT_FALSE(ParseDuration("106751991167d", &d));
  EXPECT_FALSE(ParseDuration("11575d", &d));
  EXPECT_FALSE(ParseDuration(std::string(400, '9'), &d));
  ASSERT_TRUE(ParseDuration("11574d", &d));
  EXPECT_LE(d, kMaxDurationMs);
}

TEST(TimeTest, FloorsToStep) {
  EXPECT_EQ(FloorTo(61'500, kMinuteMs), 60'000);
  EXPECT_EQ(FloorTo(-1, kMinuteMs), -60'000);
}

}  // namespace
}  // namespace gpuherd
