// For the predict tests: where a generated card warms up after an idle spell.
#pragma once

#include <cstddef>
#include <vector>

#include "predict/history.h"

namespace gpuherd::predict {

// Indexes of the loaded minutes that follow at least `idle` idle minutes
// (utilisation under 5 % all minute): warm-ups of a card that cooled down.
inline std::vector<size_t> WarmUps(const Series& s, int idle) {
  std::vector<size_t> found;
  int idle_run = 0;
  for (size_t i = 0; i < s.minutes.size(); ++i) {
    const auto& util = s.minutes[i].stat(store::RollupMetric::kGpuUtil);
    if (!util) continue;
    if (util->max < 5) {
      ++idle_run;
      continue;
    }
    if (idle_run >= idle) found.push_back(i);
    idle_run = 0;
  }
  return found;
}

}  // namespace gpuherd::predict
