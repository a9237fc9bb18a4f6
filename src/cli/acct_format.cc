#include "cli/acct_format.h"

#include <fmt/format.h>

#include "cli/table.h"
#include "sched/job_spec.h"

namespace gpuherd::cli {
namespace {

std::string Gpus(const api::AttemptView& a) {
  std::string out;
  for (int g : a.gpus) out += (out.empty() ? "" : ",") + (g >= 0 ? std::to_string(g) : std::string("?"));
  if (a.gpu_twentieths > 0 && a.gpu_twentieths < sched::kTwentiethsPerGpu) {
    out += " (" + sched::FormatGpuTwentieths(a.gpu_twentieths) + ")";
  }
  return out.empty() ? "-" : out;
}

std::string Hours(double h) { return fmt::format("{:.2f}", h); }

std::string Time(TimeMs t) { return t > 0 ? FormatTimeUtc(t) : "-"; }

std::string CsvNumber(std::optional<double> v, const char* format) {
  return v ? fmt::format(fmt::runtime(format), *v) : "";
}

}  // namespace

std::string PercentCell(std::optional<double> v, bool is_fraction) {
  if (!v) return "-";
  return fmt::format("{:.0f}%", is_fraction ? *v * 100 : *v);
}

std::string GpuMemoryCell(std::optional<uint64_t> bytes) {
  if (!bytes) return "-";
  if (*bytes >= (uint64_t{1} << 30)) return fmt::format("{:.1f} GiB", static_cast<double>(*bytes) / (1 << 30));
  return fmt::format("{} MiB", *bytes >> 20);
}

std::string AttemptsTable(const std::vector<api::AttemptView>& attempts, TimeMs now) {
  Table t({"#", "GPUS", "STARTED", "ENDED", "ELAPSED", "END", "EXIT", "GPU UTIL", "PEAK GPU MEM", "REASON"});
  for (const api::AttemptView& a : attempts) {
    std::string exit = "-";
    if (a.exit_signal) {
      exit = fmt::format("signal {}", *a.exit_signal);
    } else if (a.exit_code) {
      exit = std::to_string(*a.exit_code);
    }
    const TimeMs end = a.ended > 0 ? a.ended : now;
    t.AddRow({std::to_string(a.attempt), Gpus(a), Time(a.started), a.ended > 0 ? Time(a.ended) : "-",
              a.started > 0 && end >= a.started ? FormatDuration(end - a.started) : "-",
              api::EndCauseText(a.end_cause), exit, PercentCell(a.gpu_util_mean, false),
              GpuMemoryCell(a.peak_gpu_mem_bytes), Printable(a.reason)});
  }
  return t.Render({0, 4, 6, 7, 8});
}

std::string AcctJobsTable(const api::AcctReport& r) {
  Table t({"ID", "NAME", "USER", "STATE", "ATTEMPTS", "WAIT", "GPU-HOURS", "GPU UTIL", "PEAK GPU MEM", "EFFICIENCY"});
  for (const api::AcctJob& j : r.jobs) {
    // User text escaped whole: a cell keeps colour sequences, which a name must not carry.
    t.AddRow({std::to_string(j.id), Printable(j.name), Printable(j.user), Printable(j.state),
              std::to_string(j.usage.attempts),
              FormatDuration(j.wait_ms), Hours(j.usage.gpu_hours), PercentCell(j.usage.mean_gpu_util, false),
              GpuMemoryCell(j.usage.peak_gpu_mem_bytes), PercentCell(j.usage.efficiency(), true)});
  }
  return t.Render({0, 4, 5, 6, 7, 8, 9});
}

std::string AcctUsersTable(const api::AcctReport& r) {
  Table t({"USER", "JOBS", "ATTEMPTS", "MEAN WAIT", "GPU-HOURS", "USED GPU-HOURS", "GPU UTIL", "PEAK GPU MEM",
           "EFFICIENCY"});
  auto row = [&](const api::AcctUser& u, const std::string& name) {
    t.AddRow({name, std::to_string(u.jobs), std::to_string(u.usage.attempts), FormatDuration(u.wait_ms_mean),
              Hours(u.usage.gpu_hours), Hours(u.usage.used_gpu_hours), PercentCell(u.usage.mean_gpu_util, false),
              GpuMemoryCell(u.usage.peak_gpu_mem_bytes), PercentCell(u.usage.efficiency(), true)});
  };
  for (const api::AcctUser& u : r.users) row(u, Printable(u.user));
  if (r.users.size() > 1) row(r.total, "(all)");
  return t.Render({1, 2, 3, 4, 5, 6, 7, 8});
}

std::string AcctJobsCsv(const api::AcctReport& r) {
  std::string out =
      "id,name,user,state,submitted,first_started,ended,attempts,wait_s,gpu_hours,used_gpu_hours,mean_gpu_util_pct,"
      "peak_gpu_mem_bytes,efficiency\n";
  for (const api::AcctJob& j : r.jobs) {
    out += fmt::format("{},{},{},{},{},{},{},{},{:.3f},{:.6f},{:.6f},{},{},{}\n", j.id, CsvField(j.name), CsvField(j.user),
                       CsvField(j.state), Time(j.submitted), j.first_started > 0 ? Time(j.first_started) : "",
                       j.ended > 0 ? Time(j.ended) : "", j.usage.attempts, j.wait_ms / 1000.0, j.usage.gpu_hours,
                       j.usage.used_gpu_hours, CsvNumber(j.usage.mean_gpu_util, "{:.1f}"),
                       j.usage.peak_gpu_mem_bytes ? std::to_string(*j.usage.peak_gpu_mem_bytes) : "",
                       CsvNumber(j.usage.efficiency(), "{:.4f}"));
  }
  return out;
}

std::string AcctUsersCsv(const api::AcctReport& r) {
  std::string out =
      "user,jobs,attempts,mean_wait_s,gpu_hours,used_gpu_hours,mean_gpu_util_pct,peak_gpu_mem_bytes,efficiency\n";
  for (const api::AcctUser& u : r.users) {
    out += fmt::format("{},{},{},{:.3f},{:.6f},{:.6f},{},{},{}\n", CsvField(u.user), u.jobs, u.usage.attempts,
                       u.wait_ms_mean / 1000.0, u.usage.gpu_hours, u.usage.used_gpu_hours,
                       CsvNumber(u.usage.mean_gpu_util, "{:.1f}"),
                       u.usage.peak_gpu_mem_bytes ? std::to_string(*u.usage.peak_gpu_mem_bytes) : "",
                       CsvNumber(u.usage.efficiency(), "{:.4f}"));
  }
  return out;
}

}  // namespace gpuherd::cli
