#include "exec/shim_fence.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "fence/fence_report.h"

namespace gpuherd::exec {
namespace {

// Creates `name` in the attempt folder for the job's user, holding `text`.
bool CreateJobFile(const LaunchSpec& spec, const char* name, mode_t mode, const std::string& text) {
  std::string path = spec.dir + "/" + name;
  int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, mode);
  if (fd < 0) return false;
  bool ok = text.empty() || write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  if (geteuid() == 0 && (spec.uid || spec.gid) && fchown(fd, spec.uid.value_or(-1), spec.gid.value_or(-1)) != 0) {
    ok = false;
  }
  close(fd);
  return ok;
}

std::string OwnDirectory() {
  char path[4096];
  ssize_t n = readlink("/proc/self/exe", path, sizeof(path) - 1);
  if (n <= 0) return "";
  std::string exe(path, static_cast<size_t>(n));
  return exe.substr(0, exe.rfind('/'));
}

}  // namespace

void AddMemoryFence(const LaunchSpec& spec, std::map<std::string, std::string>* env) {
  if (!env->contains("GPUHERD_GPU_MEM_LIMIT_MB")) return;
  const std::string library = OwnDirectory() + "/" + fence::kLibraryFileName;
  if (access(library.c_str(), R_OK) != 0) {
    CreateJobFile(spec, fence::kStatusFileName, 0644,
                  "off the fence library is not installed (" + library + ": " + std::strerror(errno) + ")\n");
    return;
  }
  if (!CreateJobFile(spec, fence::kLedgerFileName, 0600, "") ||
      !CreateJobFile(spec, fence::kStatusFileName, 0644, "preloaded\n")) {
    CreateJobFile(spec, fence::kStatusFileName, 0644, "off the shim cannot create the ledger in the attempt folder\n");
    return;
  }
  std::string& preload = (*env)["LD_PRELOAD"];
  preload = preload.empty() ? library : preload + ":" + library;
  (*env)["GPUHERD_FENCE_LEDGER"] = spec.dir + "/" + fence::kLedgerFileName;
  (*env)["GPUHERD_FENCE_STATUS"] = spec.dir + "/" + fence::kStatusFileName;
}

}  // namespace gpuherd::exec
