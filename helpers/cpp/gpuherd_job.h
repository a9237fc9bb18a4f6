// Job-side helpers for gpuherd's job protocol: header-only C++17, standard library and
// POSIX only, so a job copies this one file. The same protocol as helpers/python/
// gpuherd_job.py (README "Writing a job"):
//
//   gpuherd::InstallSignalHandlers();  // first thing: an early SIGTERM is then not fatal
//   std::mt19937_64 rng(seed);
//   long long step = 0;
//   if (auto bytes = gpuherd::LoadCheckpoint()) {
//     std::istringstream in(*bytes);
//     in >> step >> rng >> model;      // the data cursor and the RNG travel with the model
//   }
//   for (; step < steps; ++step) {
//     double loss = TrainOneStep(model, rng, step);
//     gpuherd::LogMetrics({{"loss", loss}}, step + 1);
//     if ((step + 1) % 100 == 0 || gpuherd::ShouldCheckpoint()) {
//       std::ostringstream out;
//       out << step + 1 << ' ' << rng << ' ' << model;
//       gpuherd::SaveCheckpoint(out.str());
//     }
//     if (gpuherd::ShouldExit()) return gpuherd::kExitStopped;
//   }
//
// Resume rule: LoadCheckpoint() returns the checkpoint whenever one exists in
// GPUHERD_CHECKPOINT_DIR, whether or not GPUHERD_RESUME is set; gpuherd keeps that
// directory per job across its restarts, so what is there is always this job's progress.
//
// Errors are returned, never thrown: a job should not die because a metric line could
// not be written. Functions that can fail return false (or std::nullopt) and, when given
// `error`, describe the failure there.

#ifndef GPUHERD_HELPERS_CPP_GPUHERD_JOB_H_
#define GPUHERD_HELPERS_CPP_GPUHERD_JOB_H_

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace gpuherd {

// The exit status of a job that checkpointed and stopped on SIGTERM (128 + 15, as a
// shell reports it): the work is not done, so it must not read as success.
inline constexpr int kExitStopped = 128 + SIGTERM;

// The file, inside the checkpoint directory, that SaveCheckpoint() replaces atomically.
inline constexpr char kCheckpointFile[] = "checkpoint.bin";

// Named values of one metric line, in the order they are written.
using Metrics = std::vector<std::pair<std::string, double>>;

namespace job_internal {

// Written by the signal handlers, hence lock-free atomics.
inline std::atomic<bool> checkpoint_requested{false};
inline std::atomic<bool> exit_requested{false};
static_assert(std::atomic<bool>::is_always_lock_free, "signal handlers need lock-free flags");

inline std::once_flag install_once;
inline std::atomic<bool> warned_no_metrics{false};

inline std::string Env(const char* name) {
  const char* v = std::getenv(name);
  return v == nullptr ? std::string() : std::string(v);
}

inline void SetError(std::string* error, std::string message) {
  if (error != nullptr) *error = std::move(message);
}

inline std::string Errno(const std::string& what, const std::string& path) {
  return what + " " + path + ": " + std::strerror(errno);
}

// The shortest decimal that reads back as the same double; NaN and infinities as the
// tokens Python's json writes (gpuherd's metric reader accepts them).
inline std::string FormatNumber(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "Infinity" : "-Infinity";
  char buf[32];
  for (int precision = 15; precision <= 17; ++precision) {
    std::snprintf(buf, sizeof buf, "%.*g", precision, v);
    if (std::strtod(buf, nullptr) == v) break;
  }
  return buf;
}

inline std::string QuoteJson(std::string_view s) {
  std::string out = "\"";
  for (char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      case '\r': out += "\\r"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(c));
          out += buf;
        } else {
          out += c;
        }
    }
  }
  return out + "\"";
}

inline bool WriteAll(int fd, std::string_view data) {
  while (!data.empty()) {
    ssize_t n = ::write(fd, data.data(), data.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    data.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

// mkdir -p.
inline bool MakeDirs(const std::string& dir, std::string* error) {
  for (size_t pos = 1; pos <= dir.size(); ++pos) {
    if (pos != dir.size() && dir[pos] != '/') continue;
    std::string prefix = dir.substr(0, pos);
    if (::mkdir(prefix.c_str(), 0755) != 0 && errno != EEXIST) {
      SetError(error, Errno("cannot create", prefix));
      return false;
    }
  }
  struct stat st;
  if (::stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    SetError(error, dir + " is not a directory");
    return false;
  }
  return true;
}

inline void OnUsr1(int) { checkpoint_requested.store(true); }

inline void OnTerm(int) {
  checkpoint_requested.store(true);
  exit_requested.store(true);
}

}  // namespace job_internal

// GPUHERD_METRICS_FILE, or "" outside gpuherd.
inline std::string MetricsFile() { return job_internal::Env("GPUHERD_METRICS_FILE"); }

// GPUHERD_CHECKPOINT_DIR, or "" outside gpuherd.
inline std::string CheckpointDir() { return job_internal::Env("GPUHERD_CHECKPOINT_DIR"); }

// True when gpuherd restarted this job (GPUHERD_RESUME=1).
inline bool Resuming() { return job_internal::Env("GPUHERD_RESUME") == "1"; }

// How many times gpuherd restarted this job; 0 on the first run or when unreadable.
inline int RestartCount() {
  std::string raw = job_internal::Env("GPUHERD_RESTART_COUNT");
  char* end = nullptr;
  long n = std::strtol(raw.c_str(), &end, 10);
  if (raw.empty() || *end != '\0' || n < 0) return 0;
  return static_cast<int>(n);
}

// Appends one JSON line {"time": <s since the epoch>, "step": step, name: value...} to
// GPUHERD_METRICS_FILE with a single write on a file opened for appending. Outside
// gpuherd (the variable unset) it does nothing, warns once on stderr and returns true;
// it returns false only when the line could not be written. Thread-safe.
inline bool LogMetrics(const Metrics& values, std::optional<long long> step = std::nullopt,
                       std::string* error = nullptr) {
  std::string path = MetricsFile();
  if (path.empty()) {
    if (!job_internal::warned_no_metrics.exchange(true)) {
      std::fputs("gpuherd_job: GPUHERD_METRICS_FILE is not set; metrics are not recorded\n", stderr);
    }
    return true;
  }
  auto now = std::chrono::system_clock::now().time_since_epoch();
  long long ms = std::chrono::duration_cast<std::chrono::milliseconds>(now).count();
  char time_buf[32];
  std::snprintf(time_buf, sizeof time_buf, "%lld.%03lld", ms / 1000, ms % 1000);
  std::string line = std::string("{\"time\":") + time_buf;
  if (step) line += ",\"step\":" + std::to_string(*step);
  for (const auto& [name, value] : values) {
    line += "," + job_internal::QuoteJson(name) + ":" + job_internal::FormatNumber(value);
  }
  line += "}\n";
  int fd = ::open(path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) {
    job_internal::SetError(error, job_internal::Errno("cannot open", path));
    return false;
  }
  bool ok = job_internal::WriteAll(fd, line);
  if (!ok) job_internal::SetError(error, job_internal::Errno("cannot write", path));
  ::close(fd);
  return ok;
}

// Installs the SIGUSR1 (checkpoint now, go on) and SIGTERM (checkpoint and exit)
// handlers once; later calls do nothing. They replace earlier handlers for those
// signals and use SA_RESTART, so interrupted system calls resume.
inline void InstallSignalHandlers() {
  std::call_once(job_internal::install_once, [] {
    struct sigaction sa {};
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    sa.sa_handler = job_internal::OnUsr1;
    ::sigaction(SIGUSR1, &sa, nullptr);
    sa.sa_handler = job_internal::OnTerm;
    ::sigaction(SIGTERM, &sa, nullptr);
  });
}

// True while a signal's request for a checkpoint is pending: SIGUSR1's until the next
// successful SaveCheckpoint(), SIGTERM's for good. Installs the handlers on first use.
inline bool ShouldCheckpoint() {
  InstallSignalHandlers();
  return job_internal::checkpoint_requested.load();
}

// True once SIGTERM came: save a checkpoint and exit with kExitStopped soon.
inline bool ShouldExit() {
  InstallSignalHandlers();
  return job_internal::exit_requested.load();
}

// Atomically replaces dir/checkpoint.bin with `bytes`: a temporary file is written,
// fsync'd and renamed over it, and the directory fsync'd, so a crash at any moment
// leaves the old checkpoint or the new one, never a torn file. Creates `dir` if missing.
inline bool SaveCheckpointTo(const std::string& dir, std::string_view bytes, std::string* error = nullptr) {
  using job_internal::Errno;
  using job_internal::SetError;
  if (dir.empty()) {
    SetError(error, "GPUHERD_CHECKPOINT_DIR is not set; run under gpuherd or pass a directory");
    return false;
  }
  if (!job_internal::MakeDirs(dir, error)) return false;
  std::string path = dir + "/" + kCheckpointFile;
  std::string tmp = dir + "/." + kCheckpointFile + ".XXXXXX";
  int fd = ::mkstemp(tmp.data());
  if (fd < 0) {
    SetError(error, Errno("cannot create a temporary file in", dir));
    return false;
  }
  bool ok = job_internal::WriteAll(fd, bytes);
  if (!ok) SetError(error, Errno("cannot write", tmp));
  if (ok && ::fsync(fd) != 0) {
    SetError(error, Errno("cannot fsync", tmp));
    ok = false;
  }
  ::close(fd);
  if (ok && ::rename(tmp.c_str(), path.c_str()) != 0) {
    SetError(error, Errno("cannot rename to", path));
    ok = false;
  }
  if (!ok) {
    ::unlink(tmp.c_str());
    return false;
  }
  int dir_fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir_fd >= 0) {
    ::fsync(dir_fd);
    ::close(dir_fd);
  }
  if (!job_internal::exit_requested.load()) job_internal::checkpoint_requested.store(false);
  return true;
}

// SaveCheckpointTo(GPUHERD_CHECKPOINT_DIR).
inline bool SaveCheckpoint(std::string_view bytes, std::string* error = nullptr) {
  return SaveCheckpointTo(CheckpointDir(), bytes, error);
}

// The bytes last saved in dir, or std::nullopt when there is no checkpoint (then
// `error` is left empty) or it cannot be read (then `error` says why).
inline std::optional<std::string> LoadCheckpointFrom(const std::string& dir, std::string* error = nullptr) {
  using job_internal::Errno;
  using job_internal::SetError;
  SetError(error, "");
  if (dir.empty()) {
    SetError(error, "GPUHERD_CHECKPOINT_DIR is not set; run under gpuherd or pass a directory");
    return std::nullopt;
  }
  std::string path = dir + "/" + kCheckpointFile;
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno != ENOENT) SetError(error, Errno("cannot open", path));
    return std::nullopt;
  }
  std::string bytes;
  char buf[1 << 16];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      SetError(error, Errno("cannot read", path));
      ::close(fd);
      return std::nullopt;
    }
    if (n == 0) break;
    bytes.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  return bytes;
}

// LoadCheckpointFrom(GPUHERD_CHECKPOINT_DIR).
inline std::optional<std::string> LoadCheckpoint(std::string* error = nullptr) {
  return LoadCheckpointFrom(CheckpointDir(), error);
}

}  // namespace gpuherd

#endif  // GPUHERD_HELPERS_CPP_GPUHERD_JOB_H_
