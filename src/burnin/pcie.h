// What a PCIe link should carry. Private to the burn-in.
#pragma once

namespace gpuherd::burnin {

// Theoretical bandwidth of one direction of a link in GB/s: lanes x GT/s x
// encoding / 8, with 2.5/5/8/16/32 GT/s for gen 1-5, 8b/10b encoding up to gen
// 2 and 128b/130b from gen 3 (gen 3 x16 = 15.75 GB/s). 0 for an unknown gen.
double PcieLinkGbs(int gen, int width);

// Host<->device copies reach 12-13 GB/s on a gen 3 x16 link in practice
// (about 80 %); below this share of the theoretical figure a check warns.
inline constexpr double kMinCopyShareOfLink = 0.70;

}  // namespace gpuherd::burnin
