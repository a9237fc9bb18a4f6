// The fleet as a table in the spirit of nvidia-smi and nvitop, from the JSON
// that the API serves (api/gpus.h): `gpuherd gpus`, its CSV, and `top`'s
// frame with bars.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "api/gpus.h"
#include "core/status.h"

namespace gpuherd::cli {

// What a lost GPU shows for each reading: never its last, stale numbers.
inline constexpr char kNoReading[] = "–";

// A banner when the fleet is simulated, then one row per GPU: index, model,
// utilization, memory, temperature, power, PCIe gen/width (marked "!" with the
// maximum when below it), fan, throttle reasons, health (latest burn-in score
// and verdict), state and its jobs (id, user, GPU memory used, "/share" for a
// fraction); then why each drained GPU is drained. With `bars`, utilization
// and memory are drawn as bars (top). With a `width` (a terminal's columns;
// 0: no limit), the table's rows fit it where they can: the model's "NVIDIA"
// goes first, then the fan, throttle and PCIe columns, then narrower bars
// and memory, then power, risk and health; the JOBS column stays.
std::string RenderFleetTable(const api::Fleet& fleet, bool color, bool bars = false, size_t width = 0);

// One line per GPU for scripts, with a header line (README "gpus --format
// csv" lists the columns). Readings a GPU does not give, or a lost GPU's,
// are empty fields; jobs are "id:user:used_mib:share_mib" joined by ';'
// (used "" when unknown, share 0 for whole GPUs). Fields are quoted as
// RFC 4180 says, control characters escaped.
std::string RenderFleetCsv(const api::Fleet& fleet);

// Keeps the GPUs that `ids` ("0,2" or UUIDs, comma-separated) names, in
// fleet order; kInvalidArgument naming an id that names no GPU.
Status SelectGpus(const std::string& ids, api::Fleet* fleet);

// top's sort keys: "index" (ascending), "util", "mem", "temp", "power",
// "jobs" (descending; a GPU without the reading last).
inline const std::vector<std::string> kSortKeys = {"index", "util", "mem", "temp", "power", "jobs"};
// Sorts the GPUs by `key` (one of kSortKeys), ties by index.
void SortGpus(const std::string& key, api::Fleet* fleet);

// "[█████▌    ]": `pct` (0..100) of `width` cells, eighths for the rest.
std::string Bar(double pct, int width);

}  // namespace gpuherd::cli
