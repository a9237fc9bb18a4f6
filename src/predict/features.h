// Failure-risk features of one GPU over a sliding window of its minute
// rollups (the stored telemetry): temperature level and slope, temperature
// creep at constant power, fan speed against temperature, corrected-error and
// PCIe-replay rates and their acceleration, throttling, power and clock
// instability, XIDs. Pure; a missing reading gives NaN, which the model
// treats as missing.
#pragma once

#include <array>
#include <cstddef>
#include <optional>
#include <span>

#include "core/time.h"
#include "store/records.h"

namespace gpuherd::predict {

enum class Feature {
  kTempMean = 0,       // °C
  kTempHeadroom,       // slowdown temperature minus the hottest of the last 5 minutes
  kTempSlope,          // °C per minute over the window
  kTempSlope15,        // °C per minute over the last 15 minutes
  kTempCreep,          // °C per minute at constant power (temp ~ power + time)
  kThermalRatioChange, // (temp - 25) / power, last 15 minutes against the first 15, - 1
  kFanMean,            // %
  kFanPerDegreeChange, // fan % per °C over 25, last 15 minutes against the first 15, - 1
  kFanWobble,          // mean spread of the fan within a minute, last 15 minutes
  kUtilMean,           // %
  kSbeWindow,          // corrected ECC errors over the window
  kSbe15,              // ... over the last 15 minutes
  kSbeAccel,           // log(1 + last 15) - log(1 + the 15 before)
  kReplayWindow,       // PCIe replays over the window
  kReplay15,
  kReplayAccel,
  kThermalThrottleShare,  // share of minutes with a thermal throttle reason
  kPowerCapShare,         // share of minutes at the power cap
  kPowerWobble,        // mean (max - min) / mean of the power within a minute loaded throughout
  kClockWobble15,      // the same for the SM clock, last 15 minutes
  kClockWobble,        // ... over the window
  kClockWobbleChange,  // last 15 minutes minus the first 15
  kXidWindow,          // XIDs over the window
  kFailuresWindow,     // readings that did not answer
  kDbeWindow,          // uncorrectable ECC errors over the window
  kCount,
};
constexpr int kFeatureCount = static_cast<int>(Feature::kCount);
using FeatureRow = std::array<float, kFeatureCount>;

// "temp_mean", "temp_headroom", ... (stable: they are written into model files).
const char* FeatureName(Feature f);

struct FeatureOptions {
  DurationMs window = 60 * kMinuteMs;
  int min_minutes = 10;  // fewer minutes with readings in the window: no features
};

// What the features need to know about the card besides its readings.
struct CardFacts {
  std::optional<double> slowdown_c;
};

// The features of the window that ends with minutes[end] (inclusive): the
// minutes within `window` before it. `minutes` is one GPU's, oldest first.
// nullopt when the window holds fewer than min_minutes minutes with readings.
std::optional<FeatureRow> ExtractFeatures(std::span<const store::RollupRecord> minutes,
                                          size_t end, const CardFacts& card,
                                          const FeatureOptions& options = {});

}  // namespace gpuherd::predict
