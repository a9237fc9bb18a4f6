#include "http/token.h"

#include <sys/random.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

namespace gpuherd::http {

Result<std::string> ReadToken(const StateDir& dir) {
  std::ifstream in(dir.token_path());
  if (!in) {
    if (errno == EACCES) {
      return PermissionDenied("cannot read the API token " + dir.token_path() +
                              "; run as the daemon's user (or root) to change state");
    }
    return NotFound("no API token at " + dir.token_path() + "; start `gpuherd daemon` once");
  }
  std::string token;
  std::getline(in, token);
  if (token.size() < 32) return Internal("API token " + dir.token_path() + " is truncated; delete it and restart the daemon");
  return token;
}

Result<std::string> LoadOrCreateToken(const StateDir& dir) {
  auto existing = ReadToken(dir);
  if (existing.ok() || existing.status().code() != Code::kNotFound) return existing;
  unsigned char bytes[32];
  if (getrandom(bytes, sizeof(bytes), 0) != static_cast<ssize_t>(sizeof(bytes))) {
    return Internal(std::string("cannot read random bytes for the API token: ") + std::strerror(errno));
  }
  std::string token;
  for (unsigned char b : bytes) token += fmt::format("{:02x}", b);
  GPUHERD_RETURN_IF_ERROR(WriteFileAtomically(dir.token_path(), token + "\n", 0600));
  return token;
}

bool HasValidToken(const std::map<std::string, std::string>& headers, const std::string& token) {
  auto it = headers.find("authorization");
  if (it == headers.end() || token.empty()) return false;
  const std::string prefix = "Bearer ";
  if (it->second.compare(0, prefix.size(), prefix) != 0) return false;
  std::string given = it->second.substr(prefix.size());
  if (given.size() != token.size()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < token.size(); ++i) diff |= static_cast<unsigned char>(given[i] ^ token[i]);
  return diff == 0;
}

}  // namespace gpuherd::http
