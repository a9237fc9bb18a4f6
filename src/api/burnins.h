// Burn-in runs between the burn-in layer's record and the store's row, and as
// the API serves them: the record's JSON with the id the store assigned.
// Shared by the daemon's /v1/burnin routes and the CLI's direct mode, so both
// store and show a run the same way.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "burnin/result.h"
#include "core/status.h"
#include "store/records.h"
#include "store/store.h"

namespace gpuherd::api {

// POST /v1/burnin's body: {"gpus": ["0", "GPU-…"] or "all" (default),
// "level": 1-3, "duration": "15m" (level 3), "memtest_fraction": 0.9,
// "reset_first": false (reset each GPU first where no process uses it)}.
struct BurnInRequest {
  std::vector<std::string> gpus;  // indices or UUIDs; empty: every GPU
  int level = 0;
  std::string duration = "15m";
  double memtest_fraction = 0.90;
  bool reset_first = false;
};
// kInvalidArgument names the field to fix.
Result<BurnInRequest> ParseBurnInRequest(const nlohmann::json& body);

// The row for a run: the indexed columns and the whole record as JSON.
store::BurnInRecord ToBurnInRecord(const burnin::BurnInRun& run);

// The event-log entry that announces a finished burn-in ("burnin.result"):
// critical for faults or an unhealthy verdict, a warning for a degraded one
// or a GPU that could not be tested, info otherwise.
store::EventRecord BurnInEvent(const burnin::BurnInRun& run);

// Checks what the store would refuse, so that a bad run sent to the daemon
// is refused on its own instead of failing the commit of everything else.
Status ValidateForStore(const burnin::BurnInRun& run);

// The stored run, with the store's id. kDataLoss when the stored JSON is not
// a burn-in record (names the run).
Result<burnin::BurnInRun> BurnInRunFromRecord(const store::BurnInRecord& record);

// A GPU named by the user among the stored burn-ins, for GPUs the caller's
// own fleet does not list (a simulated fleet tested directly): a UUID with
// stored runs, or the index of the GPU whose newest run had that index.
// kNotFound says how to list what is stored.
Result<std::string> FindBurnInGpu(store::Store& store, const std::string& id);

}  // namespace gpuherd::api
