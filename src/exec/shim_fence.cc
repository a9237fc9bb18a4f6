#include "exec/shim_fence.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "fence/fence_report.h"

namespace gpuherd::exec {
namespace {

std::string OwnDirectory() {
  char path[4096];
  ssize_t n = readlink("/proc/self/exe", path, sizeof(path) - 1);
  if (n <= 0) return "";
  std::string exe(path, static_cast<size_t>(n));
  return exe.substr(0, exe.rfind('/'));
}

}  // namespace

std::vector<JobFile> AddMemoryFence(const LaunchSpec& spec, std::map<std::string, std::string>* env) {
  if (!env->contains("GPUHERD_GPU_MEM_LIMIT_MB")) return {};
  const std::string library = OwnDirectory() + "/" + fence::kLibraryFileName;
  if (access(library.c_str(), R_OK) != 0) {
    return {{fence::kStatusFileName, 0644,
             "off the fence library is not installed (" + library + ": " + std::strerror(errno) + ")\n"}};
  }
  std::string& preload = (*env)["LD_PRELOAD"];
  preload = preload.empty() ? library : preload + ":" + library;
  (*env)["GPUHERD_FENCE_LEDGER"] = spec.output_dir + "/" + fence::kLedgerFileName;
  (*env)["GPUHERD_FENCE_STATUS"] = spec.output_dir + "/" + fence::kStatusFileName;
  // The ledger is private to the job's user: it holds what each process of
  // the job allocated, and the fence trusts it.
  return {{fence::kLedgerFileName, 0600, ""}, {fence::kStatusFileName, 0644, "preloaded\n"}};
}

}  // namespace gpuherd::exec
