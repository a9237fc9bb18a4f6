#include "fence/fence_report.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>

#include "fence/ledger.h"

namespace gpuherd::fence {
namespace {

constexpr size_t kMaxStatusBytes = 512;

// Opens `name` in `dir` for reading when it is a regular file of at most
// `max_bytes`; -1 otherwise.
int OpenRegular(int dir_fd, const char* name, size_t max_bytes, size_t* size) {
  int fd = openat(dir_fd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return -1;
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size < 0 || static_cast<size_t>(st.st_size) > max_bytes) {
    close(fd);
    return -1;
  }
  *size = static_cast<size_t>(st.st_size);
  return fd;
}

// The status file is the job's: its first line, printable ASCII only, at most
// 200 bytes (what is stored; the CLI escapes what it prints besides).
std::string FirstAsciiLine(const std::string& text) {
  std::string out;
  for (char c : text) {
    if (c == '\n') break;
    if (c >= 0x20 && c < 0x7f) out += c;
    if (out.size() >= 200) break;
  }
  return out;
}

}  // namespace

FenceReport ReadFenceReport(const std::string& attempt_dir) {
  FenceReport report;
  int dir_fd = open(attempt_dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (dir_fd < 0) return report;
  size_t size = 0;
  int fd = OpenRegular(dir_fd, kStatusFileName, kMaxStatusBytes, &size);
  if (fd >= 0) {
    std::string text(size, '\0');
    ssize_t n = pread(fd, text.data(), text.size(), 0);
    close(fd);
    text.resize(n > 0 ? static_cast<size_t>(n) : 0);
    std::string line = FirstAsciiLine(text);
    std::string word = line.substr(0, line.find(' '));
    std::string rest = line.size() > word.size() ? line.substr(word.size() + 1) : "";
    if (word == "active" || word == "preloaded" || word == "off") {
      report.state = word;
      if (word == "off") report.detail = rest;
    } else {
      report.state = "off";
      report.detail = "unreadable status";
    }
  }
  fd = OpenRegular(dir_fd, kLedgerFileName, sizeof(LedgerFile), &size);
  if (fd >= 0 && size == sizeof(LedgerFile)) {
    LedgerFile ledger;
    if (pread(fd, &ledger, sizeof(ledger), 0) == static_cast<ssize_t>(sizeof(ledger)) &&
        ledger.magic == kLedgerMagic && ledger.version == kLedgerVersion) {
      report.used_bytes = ledger.used_bytes;
      report.share_bytes = ledger.limit_bytes;
    }
  }
  if (fd >= 0) close(fd);
  close(dir_fd);
  return report;
}

}  // namespace gpuherd::fence
