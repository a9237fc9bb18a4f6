// What NVIDIA's XID error numbers mean: the whole published catalogue (1-172),
// compiled in from xid_catalogue.yaml, and the verdict gpuherd draws from it.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace gpuherd::gpu {

// The likeliest origin of an XID, as NVIDIA's catalogue describes it.
enum class XidCause { kApplication, kDriver, kHardware, kNvlink, kInformational };
// NVIDIA's recommended immediate action.
enum class XidResolution { kNone, kRestartApp, kResetGpu, kRebootNode, kInspectHardware };
// What gpuherd makes of one occurrence, before rules look at history:
//   kInformational: recorded only; kApplication: the job's owner is told;
//   kSuspect: the GPU is watched (an unknown or unused number lands here, never ignored);
//   kFatal: the GPU takes no new work until reset and requalified.
enum class XidVerdict { kInformational, kApplication, kSuspect, kFatal };

struct XidInfo {
  int xid = 0;
  std::string mnemonic;     // the driver's name, e.g. ROBUST_CHANNEL_GPU_ECC_DBE
  bool in_use = true;       // false: NVIDIA lists it as unused by current drivers
  bool known = true;        // false: not in the catalogue at all
  XidCause cause = XidCause::kDriver;
  XidResolution resolution = XidResolution::kInspectHardware;
  bool fatal = false;
  std::string description;
};

// Parses a catalogue in the format of xid_catalogue.yaml (a top-level `xids`
// list). Refuses duplicates, unknown cause/resolution words and numbers
// outside 1..65535.
Result<std::vector<XidInfo>> ParseXidCatalogue(std::string_view yaml);

// The compiled-in catalogue, sorted by number (parsed once; a broken embedded
// file is a build defect and aborts at first use).
const std::vector<XidInfo>& XidCatalogue();

// The entry for `xid`; for a number the catalogue lacks, an entry with
// known=false, cause driver, resolution inspect_hardware.
XidInfo LookupXid(int xid);
XidVerdict VerdictOf(const XidInfo& info);
inline XidVerdict XidVerdictOf(int xid) { return VerdictOf(LookupXid(xid)); }

std::string_view XidCauseName(XidCause c);
std::string_view XidResolutionName(XidResolution r);
std::string_view XidVerdictName(XidVerdict v);

// A short description ("The GPU fell off the PCIe bus ..." for 79).
std::string XidDescription(int xid);
// True for XIDs after which the GPU must not take new work (79, 48, 74, 95, ...).
bool XidIsFatal(int xid);

}  // namespace gpuherd::gpu
