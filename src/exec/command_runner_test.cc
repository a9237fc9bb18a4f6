#include "exec/command_runner.h"

#include <gtest/gtest.h>

namespace gpuherd::exec {
namespace {

TEST(CommandRunnerTest, CollectsOutputExitCodeAndStdin) {
  auto runner = NewProcessRunner();
  CommandRequest c;
  c.argv = {"sh", "-c", "cat; echo \"$GREETING\" >&2; exit 4"};
  c.stdin_text = std::string(100000, 'x');  // more than a pipe holds
  c.env = {{"GREETING", "hello"}};
  auto r = runner->Run(c);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->exit_code, 4);
  EXPECT_EQ(r->out.size(), 100000u);
  EXPECT_EQ(r->err, "hello\n");
}

TEST(CommandRunnerTest, AMissingProgramAndATimeoutAreErrors) {
  auto runner = NewProcessRunner();
  CommandRequest missing;
  missing.argv = {"gpuherd-no-such-program"};
  auto r = runner->Run(missing);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kNotFound);

  CommandRequest slow;
  slow.argv = {"sleep", "10"};
  slow.timeout = 200;
  r = runner->Run(slow);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kUnavailable);
}

}  // namespace
}  // namespace gpuherd::exec
