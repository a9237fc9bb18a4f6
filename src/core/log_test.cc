#include "core/log.h"

#include <stdexcept>

#include <gtest/gtest.h>

namespace gpuherd {
namespace {

TEST(RunLoggingExceptionsTest, RunsTheTaskAndStopsWhatItThrows) {
  int runs = 0;
  EXPECT_TRUE(RunLoggingExceptions([&] { ++runs; }, "a counting task"));
  EXPECT_FALSE(RunLoggingExceptions([&] {
    ++runs;
    throw std::runtime_error("disk full");
  }, "a failing task"));
  EXPECT_FALSE(RunLoggingExceptions([&] {
    ++runs;
    throw 42;  // not a std::exception
  }, "an odd task"));
  EXPECT_EQ(runs, 3);
}

}  // namespace
}  // namespace gpuherd
