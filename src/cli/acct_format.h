// How attempts and accounting look in the terminal and in CSV: `show`'s
// attempts table and `gpuherd acct` (api/acct.h, api/job_detail.h).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "api/acct.h"
#include "api/job_detail.h"

namespace gpuherd::cli {

// "63%" or "-".
std::string PercentCell(std::optional<double> fraction_or_pct, bool is_fraction);
// "10.0 GiB", "512 MiB" or "-".
std::string GpuMemoryCell(std::optional<uint64_t> bytes);

// `acct --since`: a period back from `now` (24h, 7d) or a UTC date or time
// (2026-12-01, 2026-12-01T08:00, 2026-12-01T08:00:30, a trailing Z allowed);
// nullopt for anything else.
std::optional<TimeMs> ParseSince(const std::string& text, TimeMs now);

// One row per attempt: GPUs, start, end, run time, why it ended, exit code
// or signal, mean GPU utilization, peak GPU memory, reason.
std::string AttemptsTable(const std::vector<api::AttemptView>& attempts, TimeMs now);

// `gpuherd acct`: the jobs, then the users and the total.
std::string AcctJobsTable(const api::AcctReport& report);
std::string AcctUsersTable(const api::AcctReport& report);
// One header line, then one line per job (or user); fields with a comma, a
// quote or a line break are quoted, control characters escaped.
std::string AcctJobsCsv(const api::AcctReport& report);
std::string AcctUsersCsv(const api::AcctReport& report);

}  // namespace gpuherd::cli
