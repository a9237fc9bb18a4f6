// The daemon's private tree: folders that only the daemon's user can write,
// at every level from "/" down. What the daemon writes and later trusts (a
// job's supervisor identity and exit record, read again after a restart)
// lives only there, so no other user can plant, swap or forge anything in it.
//
// A folder counts as private when it and every folder above it belong to
// root or to the daemon's user and no one else may write to it, except that
// a sticky folder owned by root (/tmp) may sit on the way: there, others can
// neither rename nor remove what they do not own. This is the check OpenSSH
// makes of a key file's folders (StrictModes), with the sticky exception.
#pragma once

#include <sys/types.h>

#include <string>

#include "core/safe_file.h"
#include "core/status.h"

namespace gpuherd {

// Opens the absolute folder `path` (O_DIRECTORY, no symbolic link followed
// at any level) after checking that it is private as above.
// PermissionDenied, naming the folder that is not, when it is not.
Result<UniqueFd> OpenPrivateDir(const std::string& path);

// Below the private folder `base` (its descriptor, from OpenPrivateDir or
// this function), makes each missing folder of `relative` (plain names, no
// "." or "..") with `mode` and opens the last one. A component that exists
// must be a folder of the daemon's user that no one else may write to:
// anything else (a link, a file, a folder of another user) is refused, not
// followed. `base_name` only names the folder in messages.
Result<UniqueFd> MakePrivateDirs(int base, const std::string& base_name, const std::string& relative,
                                 mode_t mode = 0700);

}  // namespace gpuherd
