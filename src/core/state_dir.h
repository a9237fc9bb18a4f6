// The state directory ("home"): the SQLite file, logs, checkpoints, the API
// token and the unix socket live here. Resolution order: --home, then
// $GPUHERD_HOME, then /var/lib/gpuherd for root or ~/.local/share/gpuherd.
#pragma once

#include <string>

#include "core/status.h"

namespace gpuherd {

struct StateDir {
  std::string root;
  // The daemon's unix socket when it is not <root>/gpuherd.sock (a system
  // daemon's /run/gpuherd/gpuherd.sock, found by the CLI).
  std::string socket = {};
  std::string db_path() const { return root + "/state.db"; }
  std::string socket_path() const { return socket.empty() ? root + "/gpuherd.sock" : socket; }
  std::string token_path() const { return root + "/api-token"; }
  std::string port_path() const { return root + "/api-port"; }    // the TCP port the daemon listens on
  std::string pid_path() const { return root + "/daemon.pid"; }
  std::string log_dir() const { return root + "/logs"; }
  std::string checkpoint_dir() const { return root + "/checkpoints"; }
  std::string jobs_dir() const { return root + "/jobs"; }            // the jobs' own files, their users'
  // The daemon's private tree (exec/job_trees.h): what it trusts of each
  // attempt, only root (the daemon's user) can write there at any level.
  std::string private_dir() const { return root + "/run"; }
  std::string records_dir() const { return root + "/run/jobs"; }
};

// Resolves the directory without touching the disk.
StateDir ResolveStateDir(const std::string& flag_value);
// Creates the directory and its subdirectories if missing; the root,
// checkpoints/ and jobs/ are 0711 (traversable), logs/ and run/ (with
// run/jobs/) 0700.
Status EnsureStateDir(const StateDir& dir);

// Writes `content` to `path` atomically (temp file, rename) with the given
// mode, so a reader never sees half a file. The folder is opened once and
// everything happens relative to it: the temporary file is a new one
// (O_EXCL | O_NOFOLLOW, never a planted link's target), and the rename
// replaces the name's entry in that folder, never what a link points to. With `sync`, the data is fsync'd
// before the rename (durable across a power cut, not only a crash).
Status WriteFileAtomically(const std::string& path, const std::string& content, int mode, bool sync = true);

}  // namespace gpuherd
