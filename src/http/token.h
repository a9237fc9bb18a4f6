// The API token: written at the daemon's first start (mode 0600) in the state
// directory; a mutation must present it as "Authorization: Bearer <token>".
// Whoever can read the file is trusted with mutations (like the Docker socket).
#pragma once

#include <map>
#include <string>

#include "core/state_dir.h"
#include "core/status.h"

namespace gpuherd::http {

// Reads the token, creating it on first use from the kernel's random source.
Result<std::string> LoadOrCreateToken(const StateDir& dir);

// Reads an existing token (the CLI); kNotFound when the daemon never ran here,
// kPermissionDenied when this user may not read it.
Result<std::string> ReadToken(const StateDir& dir);

// True when `headers` (names lower-cased) carry the token. Compares in
// constant time so the token cannot be guessed byte by byte.
bool HasValidToken(const std::map<std::string, std::string>& headers, const std::string& token);

}  // namespace gpuherd::http
