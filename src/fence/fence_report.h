// What the daemon learns of a job's memory fence for `gpuherd show`: the
// status line the fence (or the shim) wrote in the attempt folder, and what
// the job's processes hold by the ledger. Both files are the job's to write:
// they are read as hostile (no symbolic links, regular files only, bounded,
// printable characters only).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace gpuherd::fence {

// In the attempt folder; created by the shim, owned by the job's user.
inline constexpr char kLedgerFileName[] = "fence.ledger";
inline constexpr char kStatusFileName[] = "fence.status";
inline constexpr char kLibraryFileName[] = "libgpuherd-fence.so";

struct FenceReport {
  // "active": a process of the job opened the ledger and fences its calls;
  // "preloaded": the fence is in the job but no CUDA call reached it yet (a
  // job without a GPU driver, as on the simulated fleet, stays so);
  // "off": it cannot hold (`detail` says why); "none": no fence for this job.
  std::string state = "none";
  std::string detail;
  std::optional<uint64_t> used_bytes, share_bytes;
};

FenceReport ReadFenceReport(const std::string& attempt_dir);

}  // namespace gpuherd::fence
