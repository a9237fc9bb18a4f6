#include "exec/proc_stat.h"

#include <unistd.h>

#include <string>

#include <gtest/gtest.h>

namespace gpuherd::exec {
namespace {

TEST(ProcStatTest, NameWithSpacesAndParenthesesIsSkipped) {
  std::string line = "42 (a) b) (c d) S 7 8 9 0 -1 4194560";
  for (int i = 10; i <= 21; ++i) line += " " + std::to_string(i);
  line += " 123456 more 0\n";
  auto stat = ParseProcStat(line);
  ASSERT_TRUE(stat.ok()) << stat.status().message();
  EXPECT_EQ(stat->state, 'S');
  EXPECT_EQ(stat->ppid, 7);
  EXPECT_EQ(stat->pgrp, 8);
  EXPECT_EQ(stat->session, 9);
  EXPECT_EQ(stat->start_time, 123456u);
}

TEST(ProcStatTest, ShortOrMalformedLinesAreDataLoss) {
  EXPECT_EQ(ParseProcStat("").status().code(), Code::kDataLoss);
  EXPECT_EQ(ParseProcStat("1 (x) S 1 1").status().code(), Code::kDataLoss);
  EXPECT_EQ(ParseProcStat("1 (x) S 1 1 notanumber 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 5").status().code(),
            Code::kDataLoss);
  // The start time must fit: 2^64 does not.
  EXPECT_EQ(ParseProcStat("1 (x) S 1 1 1 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 18446744073709551616").status().code(),
            Code::kDataLoss);
}

TEST(ProcStatTest, ReadsThisProcessAndNotAMissingOne) {
  auto self = ReadProcStat(getpid());
  ASSERT_TRUE(self.ok()) << self.status().message();
  EXPECT_EQ(self->ppid, getppid());
  EXPECT_EQ(self->session, getsid(0));
  EXPECT_GT(self->start_time, 0u);
  // Above the kernel's largest pid_max.
  EXPECT_EQ(ReadProcStat(4194305).status().code(), Code::kNotFound);
}

}  // namespace
}  // namespace gpuherd::exec
