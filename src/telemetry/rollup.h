// Per-minute aggregation of one GPU's readings into store::RollupRecord rows.
// Pure: no clock, no I/O. Not thread-safe.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>

#include "core/time.h"
#include "gpu/types.h"
#include "store/records.h"

namespace gpuherd::telemetry {

class Rollup {
 public:
  explicit Rollup(std::string uuid) : uuid_(std::move(uuid)) {}

  // Adds a reading taken at sample.time. When it belongs to a later minute
  // than the open one, the open minute is closed and returned. A reading from
  // an earlier minute (the wall clock stepped back) is folded into the open
  // minute so that no minute is ever emitted twice.
  std::optional<store::RollupRecord> AddSample(const gpu::GpuSample& sample);
  // Counts a reading that did not answer, with the same minute handling.
  std::optional<store::RollupRecord> AddFailure(TimeMs time);
  // Closes the open minute even though it has not ended (shutdown); nullopt
  // when nothing was added since the last close.
  std::optional<store::RollupRecord> Flush();

  const std::string& uuid() const { return uuid_; }

 private:
  struct Accumulator {
    double min = 0, max = 0, sum = 0;
    int count = 0;
  };

  // Closes the open minute if `time` lies in a later one, then makes sure a
  // minute is open.
  std::optional<store::RollupRecord> Advance(TimeMs time);
  void Accumulate(store::RollupMetric metric, std::optional<double> value);

  std::string uuid_;
  std::optional<store::RollupRecord> open_;  // stats unfilled until closed
  std::array<Accumulator, store::kRollupMetricCount> acc_{};
};

}  // namespace gpuherd::telemetry
