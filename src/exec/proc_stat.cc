#include "exec/proc_stat.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstring>

namespace gpuherd::exec {
namespace {

// A stat line is 52 numbers and a name of at most 64 bytes: well under this.
constexpr size_t kMaxStatBytes = 4096;

Status DataLoss(std::string message) { return Status(Code::kDataLoss, std::move(message)); }

// The next space-separated field of `rest`, or empty at the end.
std::string_view NextField(std::string_view* rest) {
  size_t start = rest->find_first_not_of(" \n");
  if (start == std::string_view::npos) {
    *rest = {};
    return {};
  }
  size_t end = rest->find_first_of(" \n", start);
  std::string_view field = rest->substr(start, end == std::string_view::npos ? end : end - start);
  *rest = end == std::string_view::npos ? std::string_view() : rest->substr(end);
  return field;
}

template <class T>
bool ToNumber(std::string_view text, T* out) {
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), *out);
  return ec == std::errc() && ptr == text.data() + text.size();
}

}  // namespace

Result<ProcStat> ParseProcStat(std::string_view text) {
  size_t close_paren = text.rfind(')');
  if (close_paren == std::string_view::npos) return DataLoss("no command name in the stat line");
  std::string_view rest = text.substr(close_paren + 1);
  ProcStat stat;
  for (int i = 3; i <= 22; ++i) {
    std::string_view field = NextField(&rest);
    if (field.empty()) return DataLoss("the stat line has " + std::to_string(i - 1) + " fields; 22 or more expected");
    bool ok = true;
    switch (i) {
      case 3: ok = field.size() == 1; stat.state = field[0]; break;
      case 4: ok = ToNumber(field, &stat.ppid); break;
      case 5: ok = ToNumber(field, &stat.pgrp); break;
      case 6: ok = ToNumber(field, &stat.session); break;
      case 22: ok = ToNumber(field, &stat.start_time); break;
      default: break;
    }
    if (!ok) return DataLoss("field " + std::to_string(i) + " of the stat line is malformed");
  }
  return stat;
}

Result<ProcStat> ReadProcStat(int pid, const std::string& proc_root) {
  std::string path = proc_root + "/" + std::to_string(pid) + "/stat";
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
  if (fd < 0) {
    if (errno == ENOENT || errno == ESRCH) return NotFound("no process " + std::to_string(pid));
    return IoError("cannot open " + path + ": " + std::strerror(errno));
  }
  char buf[kMaxStatBytes];
  size_t used = 0;
  int err = 0;
  while (used < sizeof(buf)) {
    ssize_t n = ::read(fd, buf + used, sizeof(buf) - used);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      err = errno;
      break;
    }
    if (n == 0) break;
    used += static_cast<size_t>(n);
  }
  ::close(fd);
  // The process ended (and was reaped) after open(): as if it never was.
  if (err == ESRCH) return NotFound("process " + std::to_string(pid) + " ended while its stat was read");
  if (err != 0) return IoError("cannot read " + path + ": " + std::strerror(err));
  if (used == sizeof(buf)) return DataLoss(path + " is larger than " + std::to_string(kMaxStatBytes) + " bytes");
  auto stat = ParseProcStat(std::string_view(buf, used));
  if (!stat.ok()) return DataLoss(path + ": " + stat.status().message());
  return stat;
}

}  // namespace gpuherd::exec
