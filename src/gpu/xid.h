// What NVIDIA's XID error numbers mean, for events and views.
#pragma once

#include <string>

namespace gpuherd::gpu {

// A short description ("GPU has fallen off the bus" for 79); a generic text
// for numbers without one.
std::string XidDescription(int xid);
// True for XIDs after which the GPU must not take new work (79, 48, 74, 92, 94, 95, ...).
bool XidIsFatal(int xid);

}  // namespace gpuherd::gpu
