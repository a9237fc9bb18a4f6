#include "core/safe_file.h"

#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <vector>

namespace gpuherd {
namespace {

constexpr int kFileFlags = O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | O_NOCTTY;

Status OpenError(int err, const std::string& dir, const std::string& relative) {
  const std::string path = dir + "/" + relative;
  switch (err) {
    case ENOENT:
      return NotFound(path + " does not exist");
    case ELOOP:
    case ENOTDIR:
    case EXDEV:
      return PermissionDenied(path + " is or passes through a symbolic link; files a job writes "
                              "are read without following links");
    case EMFILE:
    case ENFILE:
      // Out of descriptors for now: the caller tries again later.
      return Unavailable("cannot open " + path + ": " + std::strerror(err));
    default:
      return IoError("cannot open " + path + ": " + std::strerror(err));
  }
}


// -1 with errno ENOSYS when openat2 is missing (old kernel) or filtered.
int OpenAt2(int dirfd, const std::string& relative) {
#ifdef SYS_openat2
  struct open_how how {};
  how.flags = static_cast<uint64_t>(kFileFlags);
  how.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS;
  int fd;
  do {
    fd = static_cast<int>(::syscall(SYS_openat2, dirfd, relative.c_str(), &how, sizeof(how)));
  } while (fd < 0 && errno == EAGAIN);  // a rename raced the lookup: try again
  if (fd < 0 && (errno == EPERM || errno == E2BIG || errno == EINVAL)) errno = ENOSYS;
  return fd;
#else
  errno = ENOSYS;
  return -1;
#endif
}

// One component at a time, none followed if it is a symbolic link.
int OpenPerComponent(int dirfd, const std::vector<std::string>& parts) {
  UniqueFd current;
  int at = dirfd;
  for (size_t i = 0; i + 1 < parts.size(); ++i) {
    const int next = ::openat(at, parts[i].c_str(), O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (next < 0) return -1;
    current = UniqueFd(next);
    at = current.get();
  }
  return ::openat(at, parts.back().c_str(), kFileFlags);
}

}  // namespace

bool SplitRelativePath(const std::string& relative, std::vector<std::string>* parts) {
  if (relative.empty() || relative[0] == '/') return false;
  size_t start = 0;
  while (start <= relative.size()) {
    size_t slash = relative.find('/', start);
    if (slash == std::string::npos) slash = relative.size();
    std::string part = relative.substr(start, slash - start);
    if (part.empty() || part == "." || part == "..") return false;
    parts->push_back(std::move(part));
    start = slash + 1;
  }
  return true;
}

UniqueFd& UniqueFd::operator=(UniqueFd&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = other.release();
  }
  return *this;
}

UniqueFd::~UniqueFd() {
  if (fd_ >= 0) ::close(fd_);
}

Result<UniqueFd> OpenBeneath(const std::string& dir, const std::string& relative,
                             const BeneathOptions& options) {
  std::vector<std::string> parts;
  if (!SplitRelativePath(relative, &parts)) {
    return InvalidArgument("'" + relative + "' is not a plain relative path below " + dir);
  }
  UniqueFd base(::open(dir.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  if (base.get() < 0) {
    const int err = errno;
    if (err == ENOENT) return NotFound(dir + " does not exist");
    if (err == EMFILE || err == ENFILE) return Unavailable("cannot open directory " + dir + ": " + std::strerror(err));
    return IoError("cannot open directory " + dir + ": " + std::strerror(err));
  }
  int fd = -1;
  if (options.use_openat2) fd = OpenAt2(base.get(), relative);
  if (!options.use_openat2 || (fd < 0 && errno == ENOSYS)) fd = OpenPerComponent(base.get(), parts);
  if (fd < 0) return OpenError(errno, dir, relative);
  UniqueFd file(fd);
  struct stat st {};
  if (::fstat(file.get(), &st) != 0) return IoError("cannot stat " + dir + "/" + relative + ": " + std::strerror(errno));
  if (!S_ISREG(st.st_mode)) {
    return PermissionDenied(dir + "/" + relative + " is not a regular file (a FIFO, device, socket "
                            "or directory); it is not read");
  }
  if (st.st_nlink > 1) {
    return PermissionDenied(dir + "/" + relative + " has " + std::to_string(st.st_nlink) +
                            " hard links; a file a job writes is read only when it has one");
  }
  return file;
}

Result<FileChunk> ReadBeneath(const std::string& dir, const std::string& relative, uint64_t offset,
                              size_t max_bytes, const BeneathOptions& options) {
  auto file = OpenBeneath(dir, relative, options);
  if (!file.ok()) return file.status();
  struct stat st {};
  if (::fstat(file->get(), &st) != 0) return IoError("cannot stat " + dir + "/" + relative);
  FileChunk chunk;
  chunk.size = static_cast<uint64_t>(st.st_size);
  if (chunk.size <= offset || max_bytes == 0) return chunk;
  chunk.data.resize(static_cast<size_t>(std::min<uint64_t>(chunk.size - offset, max_bytes)));
  size_t got = 0;
  while (got < chunk.data.size()) {
    const ssize_t n = ::pread(file->get(), chunk.data.data() + got, chunk.data.size() - got,
                              static_cast<off_t>(offset + got));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return IoError("cannot read " + dir + "/" + relative + ": " + std::strerror(errno));
    if (n == 0) break;  // the file shrank meanwhile
    got += static_cast<size_t>(n);
  }
  chunk.data.resize(got);
  return chunk;
}

Result<std::string> ReadSmallFileBeneath(const std::string& dir, const std::string& relative,
                                         size_t max_bytes) {
  auto chunk = ReadBeneath(dir, relative, 0, max_bytes + 1);
  if (!chunk.ok()) return chunk.status();
  if (chunk->size > max_bytes || chunk->data.size() > max_bytes) {
    // The file's size, or, when it grew while read, at least what was read.
    const uint64_t size = std::max<uint64_t>(chunk->size, chunk->data.size());
    return ResourceExhausted(dir + "/" + relative + " is " + (chunk->size < size ? "at least " : "") +
                             std::to_string(size) + " bytes; at most " + std::to_string(max_bytes) + " are read");
  }
  return std::move(chunk->data);
}

}  // namespace gpuherd
