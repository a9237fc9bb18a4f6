// main() of the test binaries whose daemon runs jobs: the daemon starts the
// binary again as its job launcher, which this hands over to.
#include <gtest/gtest.h>

#include "exec/launcher.h"

int main(int argc, char** argv) {
  if (int code = gpuherd::exec::MaybeRunLauncher(argc, argv); code >= 0) return code;
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
