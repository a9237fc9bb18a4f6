// Rules that tell the application's faults from the card's, over the XIDs and
// hardware faults seen on each GPU. Pure: the caller keeps SelfHealState, passes
// time in every observation, and feeds the resulting HealthInput to the GPU's
// GpuStateMachine. In shadow mode every outcome is marked shadow: the daemon
// records it and acts on none of it.
//
// Defaults and their sources:
//  - An application-class XID (NVIDIA's catalogue: 13, 31, 43, 45, ...; its
//    immediate action is "restart the application") is the application's: the
//    job's owner is told, no GPU is drained. NVIDIA's XID 13/31 workflows say to
//    rerun the program on another GPU and suspect the card only if the error
//    follows the card; hence:
//  - the same XID on the same GPU from `suspect_jobs` (3) different jobs within
//    `window` (24 h) makes the GPU suspect, and from `quarantine_jobs` (4) jobs
//    quarantines it (the card keeps failing programs that run elsewhere);
//  - a fatal XID (catalogue: reset the GPU, reboot, inspect hardware) or a
//    double-bit ECC error or a lost GPU quarantines it, and `retire_fatal` (5)
//    of them within `window` retire it: NVIDIA's workflows escalate a fault
//    that survives a reset to hardware service, and five resets in a day is
//    past any transient.
//  - an XID the catalogue lacks, or lists as unused, makes the GPU suspect.
#pragma once

#include <deque>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "alerts/gpu_state.h"
#include "core/time.h"
#include "gpu/xid.h"

namespace gpuherd::alerts {

struct SelfHealPolicy {
  DurationMs window = 24 * kHourMs;
  int suspect_jobs = 3;
  int quarantine_jobs = 4;
  int retire_fatal = 5;
  bool shadow = false;
};

struct XidObservation {
  TimeMs time = 0;
  std::string gpu;     // the card's key (UUID)
  int xid = 0;
  std::string job_id;  // empty: no job held the GPU
  std::string owner;   // the job's owner
};

// "Your job hit XID 31; the GPU is fine": one per job and XID within the window.
struct OwnerNotice {
  std::string job_id;
  std::string owner;
  std::string gpu;
  int xid = 0;
  std::string message;
};

struct RuleOutcome {
  std::string rule;  // which rule decided; empty when none did
  gpu::XidVerdict verdict = gpu::XidVerdict::kInformational;
  std::vector<OwnerNotice> notices;
  std::optional<HealthInput> input;  // for this GPU's state machine
  bool shadow = false;
};

// What the rules remember: per GPU, the XIDs and hardware faults of the last window.
struct SelfHealState {
  struct Seen {
    TimeMs time;
    int xid;  // 0 for a hardware fault without an XID
    std::string job_id;
    bool fatal;
  };
  std::map<std::string, std::deque<Seen>> by_gpu;
  std::map<std::string, TimeMs> notified;  // "job/xid" -> when the owner was told
};

RuleOutcome EvaluateXid(const SelfHealPolicy& policy, SelfHealState& state,
                        const XidObservation& x);
// A fault seen without an XID ("ecc_dbe", "gpu_lost"): fatal for the card.
RuleOutcome EvaluateHardwareFault(const SelfHealPolicy& policy, SelfHealState& state,
                                  const std::string& gpu, TimeMs time, const std::string& kind,
                                  const std::string& job_id, const std::string& detail);

}  // namespace gpuherd::alerts
