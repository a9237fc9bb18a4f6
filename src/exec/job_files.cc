#include "exec/job_files.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include <nlohmann/json.hpp>

#include "core/safe_file.h"
#include "core/state_dir.h"
#include "exec/proc_stat.h"

namespace gpuherd::exec {
namespace {

using nlohmann::json;

Status DataLoss(std::string message) { return Status(Code::kDataLoss, std::move(message)); }

// The shim and exit files live in the private tree; they are still read
// without following links, blocking or reading more than a record can be.
constexpr size_t kMaxRecordBytes = 64 << 10;

Result<std::optional<std::string>> ReadJobFile(const std::string& dir, const char* name) {
  auto content = ReadSmallFileBeneath(dir, name, kMaxRecordBytes);
  if (content.status().code() == Code::kNotFound) return std::optional<std::string>();
  if (!content.ok()) return content.status();
  return std::optional<std::string>(std::move(*content));
}

std::optional<ExitRecord::How> ParseHow(const std::string& name) {
  for (auto how : {ExitRecord::How::kExited, ExitRecord::How::kSignaled, ExitRecord::How::kTimeLimit,
                   ExitRecord::How::kStopped, ExitRecord::How::kLaunchFailed, ExitRecord::How::kShimLost}) {
    if (name == HowName(how)) return how;
  }
  return std::nullopt;
}

}  // namespace

std::string ShimFilePath(const std::string& dir) { return dir + "/shim"; }
std::string ExitFilePath(const std::string& dir) { return dir + "/exit"; }

Result<uint64_t> ProcessStartTime(int pid) {
  auto stat = ReadProcStat(pid);
  if (!stat.ok()) return stat.status();
  return stat->start_time;
}

bool IsAlive(const ShimIdentity& id) {
  auto start = ProcessStartTime(id.pid);
  return start.ok() && *start == id.start_time;
}

Status WriteShimFile(const std::string& dir, const ShimIdentity& shim) {
  json j = {{"pid", shim.pid}, {"start_time", shim.start_time}};
  return WriteFileAtomically(ShimFilePath(dir), j.dump() + "\n", 0644, /*sync=*/false);
}

Result<std::optional<ShimIdentity>> ReadShimFile(const std::string& dir) {
  std::string path = ShimFilePath(dir);
  auto content = ReadJobFile(dir, "shim");
  if (!content.ok()) return content.status();
  if (!content->has_value()) return std::optional<ShimIdentity>();
  try {
    json j = json::parse(**content);
    ShimIdentity id;
    id.pid = j.at("pid").get<int>();
    id.start_time = j.at("start_time").get<uint64_t>();
    if (id.pid <= 0) return DataLoss(path + ": pid must be positive");
    return std::optional<ShimIdentity>(id);
  } catch (const json::exception& e) {
    return DataLoss("corrupt supervisor file " + path + ": " + e.what());
  }
}

std::string ExitRecordToJson(const ExitRecord& r) {
  json j = {{"job_id", r.job_id}, {"attempt", r.attempt}, {"how", HowName(r.how)},
            {"code", r.code},     {"signal", r.signal},   {"started", r.started},
            {"ended", r.ended},   {"message", r.message}};
  if (r.out_of_memory) j["out_of_memory"] = true;
  return j.dump() + "\n";
}

namespace {

std::string ReservePath(const std::string& dir) { return dir + "/exit.reserved"; }

// Writes all of `data` at offset 0 of `fd`.
bool WriteAllAt(int fd, const std::string& data) {
  size_t off = 0;
  while (off < data.size()) {
    ssize_t n = ::pwrite(fd, data.data() + off, data.size() - off, static_cast<off_t>(off));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    off += static_cast<size_t>(n);
  }
  return true;
}

}  // namespace

Status ReserveExitRecord(const std::string& dir) {
  // JSON allows any amount of trailing whitespace: the record written over
  // the blanks parses as it is.
  return WriteFileAtomically(ReservePath(dir), std::string(kExitReserveBytes - 1, ' ') + "\n", 0644,
                             /*sync=*/false);
}

namespace {

// Writes `text` over the reserved blanks in place (no new blocks) and renames
// the reservation to `dest`. False when there is no reservation this process
// made or any step fails; `dest` is then untouched.
bool WriteIntoReservation(const std::string& reserve, const std::string& text, const std::string& dest) {
  int fd = ::open(reserve.c_str(), O_WRONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return false;
  struct stat st {};
  // Only the file this process reserved: a job's user who swapped in a hard
  // link to another file gets nothing written there.
  bool ok = ::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_nlink == 1 && st.st_uid == ::geteuid() &&
            static_cast<size_t>(st.st_size) >= text.size() && WriteAllAt(fd, text);
  // The blanks left after the record still parse as JSON: a failed truncate
  // only leaves the file longer.
  if (ok) (void)::ftruncate(fd, static_cast<off_t>(text.size()));
  ::close(fd);
  return ok && ::rename(reserve.c_str(), dest.c_str()) == 0;
}

}  // namespace

Status WriteExitRecord(const std::string& dir, const ExitRecord& record) {
  const std::string reserve = ReservePath(dir);
  const std::string dest = ExitFilePath(dir);
  std::string text = ExitRecordToJson(record);
  // The usual record fits the reservation and is written into it: no new
  // inode and no unlink per job. On ext4 without a journal every inode freed
  // in the last minutes is skipped, one by one, by each later allocation in
  // its group, so an unlink per job made every job's files dearer to create.
  if (text.size() <= kExitReserveBytes && WriteIntoReservation(reserve, text, dest)) return Status::Ok();
  Status written = WriteFileAtomically(dest, text, 0644, /*sync=*/false);
  if (written.ok()) {
    ::unlink(reserve.c_str());
    return written;
  }
  // A record too long for the reservation, on a full disk: cut its message.
  ExitRecord cut = record;
  while (text.size() > kExitReserveBytes && !cut.message.empty()) {
    cut.message.resize(cut.message.size() / 2);
    text = ExitRecordToJson(cut);
  }
  if (!WriteIntoReservation(reserve, text, dest)) {
    return IoError(written.message() + "; writing it into the reserved space failed too");
  }
  return Status::Ok();
}

Result<std::optional<ExitRecord>> ReadExitRecord(const std::string& dir) {
  std::string path = ExitFilePath(dir);
  auto content = ReadJobFile(dir, "exit");
  if (!content.ok()) return content.status();
  if (!content->has_value()) return std::optional<ExitRecord>();
  try {
    json j = json::parse(**content);
    ExitRecord r;
    r.job_id = j.at("job_id").get<int64_t>();
    r.attempt = j.at("attempt").get<int>();
    auto how = ParseHow(j.at("how").get<std::string>());
    if (!how) return DataLoss(path + ": unknown \"how\" " + j.at("how").dump());
    r.how = *how;
    r.code = j.at("code").get<int>();
    r.signal = j.at("signal").get<int>();
    r.started = j.at("started").get<TimeMs>();
    r.ended = j.at("ended").get<TimeMs>();
    r.message = j.at("message").get<std::string>();
    r.out_of_memory = j.value("out_of_memory", false);
    return std::optional<ExitRecord>(std::move(r));
  } catch (const json::exception& e) {
    return DataLoss("corrupt exit record " + path + ": " + e.what());
  }
}

}  // namespace gpuherd::exec
