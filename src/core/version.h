#pragma once

namespace gpuherd {
// The program's version, from the top-level CMakeLists.txt.
inline constexpr const char* kVersion = GPUHERD_VERSION;
}  // namespace gpuherd
