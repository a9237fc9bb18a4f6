// Conversions from the GPU layer's types to the rows the store keeps.
#pragma once

#include "core/time.h"
#include "gpu/types.h"
#include "store/records.h"

namespace gpuherd::telemetry {

// The store's row for a GPU seen at `now`; info_json is the API's JSON form of
// `info`. first_seen is set to `now` too (the store keeps the earliest).
store::GpuRecord ToGpuRecord(const gpu::GpuInfo& info, TimeMs now);

}  // namespace gpuherd::telemetry
