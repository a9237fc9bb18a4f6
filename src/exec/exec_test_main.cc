// exec_test is also the launcher its executors spawn (/proc/self/exe), as
// the gpuherd binary is in production.
#include <gtest/gtest.h>

#include "exec/launcher.h"

int main(int argc, char** argv) {
  int launcher_status = gpuherd::exec::MaybeRunLauncher(argc, argv);
  if (launcher_status >= 0) return launcher_status;
  testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
