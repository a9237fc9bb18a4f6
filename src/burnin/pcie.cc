#include "burnin/pcie.h"

namespace gpuherd::burnin {

double PcieLinkGbs(int gen, int width) {
  static constexpr double kGtPerS[] = {0, 2.5, 5, 8, 16, 32};
  if (gen < 1 || gen > 5 || width < 1) return 0;
  const double encoding = gen <= 2 ? 8.0 / 10.0 : 128.0 / 130.0;
  return kGtPerS[gen] * encoding / 8 * width;
}

}  // namespace gpuherd::burnin
