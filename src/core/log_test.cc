#include "core/log.h"

#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
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

// A message that quotes a job's text (its cwd, a name) is written escaped:
// the daemon's log is read on root's terminal.
TEST(SetUpLoggingTest, MessagesAreEscapedOnOneLine) {
  char dir[] = "/tmp/gpuherd-log-XXXXXX";
  ASSERT_NE(::mkdtemp(dir), nullptr);
  const std::string path = std::string(dir) + "/daemon.log";
  SetUpLogging("info", path);
  spdlog::info("job 7: cannot enter {}", "/x\x1b[8mHIDDEN\nforged line\xc2\x9b");
  spdlog::default_logger()->flush();
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  EXPECT_NE(text.str().find(" info job 7: cannot enter /x\\e[8mHIDDEN\\nforged line\\u009b\n"), std::string::npos)
      << text.str();
  EXPECT_EQ(text.str().find('\x1b'), std::string::npos);
  SetUpLogging("info");  // stderr only again: the file goes
  std::remove(path.c_str());
  ::rmdir(dir);
}

}  // namespace
}  // namespace gpuherd
