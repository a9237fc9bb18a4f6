// Reading files that a job (its user) can write, as root, without being led
// elsewhere: the path below a directory the daemon made is resolved without
// following any symbolic link and without leaving that directory
// (openat2 RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS where the kernel has it,
// else openat with O_NOFOLLOW one component at a time); the open never
// blocks (O_NONBLOCK: a FIFO in the file's place cannot stall the caller);
// only a regular file with a single link is read (a hard link to a file the
// user may not read is refused), and never more than the caller's cap.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"

namespace gpuherd {

// Owns a descriptor; closes it on destruction.
class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) : fd_(fd) {}
  UniqueFd(UniqueFd&& other) noexcept : fd_(other.release()) {}
  UniqueFd& operator=(UniqueFd&& other) noexcept;
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;
  ~UniqueFd();

  int get() const { return fd_; }
  int release() {
    const int fd = fd_;
    fd_ = -1;
    return fd;
  }

 private:
  int fd_ = -1;
};

// Splits "a/b/c" into its names; false for an absolute path, an empty one
// or one with "", "." or ".." components (what no folder walk may follow).
bool SplitRelativePath(const std::string& relative, std::vector<std::string>* names);

struct BeneathOptions {
  bool use_openat2 = true;  // false: always the per-component fallback (tests)
};

// Opens `relative` ("7/metrics.jsonl": not absolute, no "." or ".."
// components) beneath the directory `dir`, read-only, as described above.
// NotFound when it does not exist; PermissionDenied when a component is a
// symbolic link, or the file is not a regular file with one link;
// Unavailable when the process is out of descriptors (try again later).
Result<UniqueFd> OpenBeneath(const std::string& dir, const std::string& relative,
                             const BeneathOptions& options = {});

struct FileChunk {
  std::string data;   // at most max_bytes, from the offset asked for
  uint64_t size = 0;  // the file's size when it was opened
};

// OpenBeneath, then up to `max_bytes` from `offset` (nothing when the file
// is not longer than `offset`).
Result<FileChunk> ReadBeneath(const std::string& dir, const std::string& relative, uint64_t offset,
                              size_t max_bytes, const BeneathOptions& options = {});

// The whole of a small file (its size at most `max_bytes`, else
// ResourceExhausted), read as ReadBeneath does.
Result<std::string> ReadSmallFileBeneath(const std::string& dir, const std::string& relative,
                                         size_t max_bytes);

}  // namespace gpuherd
