// Where `gpuherd burnin` and `gpuherd health` read and record burn-in runs:
// the running daemon's API, or, when none runs, the state database itself.
// While a daemon runs it owns the database and this never writes to it.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "burnin/result.h"
#include "cli/burnin_format.h"
#include "cli/daemon_client.h"
#include "core/state_dir.h"
#include "core/status.h"
#include "store/store.h"

namespace gpuherd::cli {

class BurnInHistory {
 public:
  // Through the daemon's /v1/burnin routes. `client` must outlive this.
  static std::unique_ptr<BurnInHistory> ViaDaemon(DaemonClient* client);
  // The database of `dir`: read-only for `gpuherd health`, read-write (and
  // created when missing) for a burn-in that records its runs.
  static Result<std::unique_ptr<BurnInHistory>> ViaStore(const StateDir& dir, bool writable);
  // For the commands that only read: the daemon of `dir` when it answers
  // within `timeout`, else its database opened read-only (that failure when
  // neither can be read).
  static Result<std::unique_ptr<BurnInHistory>> ForReading(const StateDir& dir, DurationMs timeout);

  bool via_daemon() const { return client_ != nullptr; }
  // "the daemon" or the database's path, for messages.
  std::string where() const;

  // The newest `limit` runs of one model, newest first (the fleet reference).
  Result<std::vector<burnin::BurnInRun>> RunsOfModel(const std::string& model, int limit);
  // The newest `limit` runs of the GPU named by an index or UUID.
  Result<std::vector<burnin::BurnInRun>> RunsOfGpu(const std::string& id, int limit);
  // The newest finished run of every GPU, and the GPUs the state knows that
  // have none.
  Result<std::vector<burnin::BurnInRun>> LatestPerGpu();
  Result<std::vector<UntestedGpu>> Untested(const std::vector<burnin::BurnInRun>& latest);

  // Checks, before a long burn-in, that Record will be allowed (the daemon
  // records runs for admins only).
  Status CheckCanRecord();
  // Records the runs with their events in one transaction; sets their ids
  // where the store assigns them here (through the daemon they stay 0).
  Status Record(std::vector<burnin::BurnInRun>* runs);

 private:
  BurnInHistory() = default;
  Result<std::vector<burnin::BurnInRun>> FromDaemon(const std::string& target);
  static Result<std::vector<burnin::BurnInRun>> FromRecords(const std::vector<store::BurnInRecord>& records);

  DaemonClient* client_ = nullptr;
  std::unique_ptr<DaemonClient> own_client_;  // ForReading's: client_ points to it
  std::unique_ptr<store::Store> store_;
};

}  // namespace gpuherd::cli
