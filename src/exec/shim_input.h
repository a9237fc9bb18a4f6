// What the launcher hands a shim over the shim's control pipe: the launch spec
// and the user the job runs as. The launcher resolves the user (passwd and
// group lookups go through NSS, which loads shared libraries) because the shim
// is a small static binary that starts in a fraction of the time.
//
// The pipe carries one frame, a 32-bit length (host order) and the JSON text,
// then, once the launcher has recorded the shim, the go byte. End-of-file
// before the go byte cancels the launch: the shim exits without running
// anything.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/status.h"
#include "exec/launch_spec.h"
#include "exec/user_switch.h"

namespace gpuherd::exec {

// The shim's control pipe is this descriptor in the shim.
inline constexpr int kShimControlFd = 3;
inline constexpr char kShimGoByte = 'g';
// The largest spec a launcher accepts or a shim reads (argv and environment
// together; exec itself refuses far less).
inline constexpr uint32_t kMaxSpecBytes = 16 << 20;

nlohmann::json LaunchSpecToJson(const LaunchSpec& spec);
// InvalidArgument on a missing or mistyped field.
Result<LaunchSpec> LaunchSpecFromJson(const nlohmann::json& j);

struct ShimInput {
  LaunchSpec spec;
  UserSwitch user;
};
std::string EncodeShimInput(const LaunchSpec& spec, const UserSwitch& user);
Result<ShimInput> DecodeShimInput(std::string_view text);

}  // namespace gpuherd::exec
