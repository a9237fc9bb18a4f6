// Who is asking: from the unix socket's peer credentials, or the API token.
#pragma once

#include <cstdint>
#include <string>

namespace gpuherd::daemon {

struct Caller {
  // The uid of a caller who proved nothing (TCP without the token); (uid_t)-1
  // is no account's uid.
  static constexpr uint32_t kNoUid = UINT32_MAX;

  uint32_t uid = 0;
  uint32_t gid = 0;
  std::string user;     // the account name ("uid 1234" when it has none)
  bool admin = false;   // root, the daemon's user, the admin group, or the token
  bool authenticated = false;  // false: a TCP caller without the token (reads only)

  // A user may act on their own jobs; an admin on any.
  bool MayActOn(uint32_t owner_uid) const { return admin || uid == owner_uid; }
};

}  // namespace gpuherd::daemon
