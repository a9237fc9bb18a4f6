#include "daemon/burnin_jobs.h"

#include <algorithm>
#include <filesystem>
#include <set>

#include <fmt/format.h>

#include "core/time.h"
#include "http/json_body.h"

namespace gpuherd::daemon {

using nlohmann::json;

BurnInLauncher MakeBurnInLauncher(const gpu::DriverChoice& choice, const std::string& sim_reason, size_t gpus,
                                  const std::string& home) {
  BurnInLauncher launcher;
  launcher.home = home;
  launcher.self_exe = "/proc/self/exe";
  std::error_code ec;
  auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (!ec) launcher.self_exe = exe.string();
  if (!choice.scenario_path.empty()) {
    launcher.driver_args = {"--scenario", std::filesystem::absolute(choice.scenario_path).string()};
  } else if (choice.sim_count > 0 || !sim_reason.empty()) {
    // A fleet that fell back to simulation (no NVIDIA driver) is opened
    // explicitly: the burn-in refuses to fall back on its own.
    const size_t count = choice.sim_count > 0 ? static_cast<size_t>(choice.sim_count) : gpus;
    launcher.driver_args = {"--sim", std::to_string(count)};
  }
  if (!launcher.driver_args.empty()) {
    launcher.driver_args.insert(launcher.driver_args.end(), {"--seed", std::to_string(choice.seed)});
  }
  launcher.nvml_library = choice.nvml_library;
  return launcher;
}

namespace {

Status FieldError(const std::string& field, const std::string& what) {
  return InvalidArgument("burn-in request: \"" + field + "\" " + what);
}

// Fleet positions named by "all" or a list of indices and UUIDs.
Result<std::vector<int>> ChoosePositions(const json& gpus, const gpu::Fleet& fleet) {
  std::set<int> chosen;
  if (gpus.is_null() || (gpus.is_string() && gpus.get<std::string>() == "all")) {
    for (size_t i = 0; i < fleet.gpus.size(); ++i) chosen.insert(static_cast<int>(i));
  } else if (gpus.is_array() && !gpus.empty()) {
    for (const json& g : gpus) {
      std::string id = g.is_number_integer() ? std::to_string(g.get<int64_t>()) : g.is_string() ? g.get<std::string>() : "";
      int position = gpu::FindGpu(fleet.gpus, id);
      if (position < 0) {
        return FieldError("gpus", "names " + http::DumpCapped(g, 80) +
                                      ", which is not a GPU of this machine (`gpuherd gpus` lists them)");
      }
      chosen.insert(position);
    }
  } else {
    return FieldError("gpus", "must be \"all\" or a non-empty list of GPU indices or UUIDs, got " + gpus.dump());
  }
  if (chosen.empty()) return Unavailable("this machine has no GPUs to test");
  return std::vector<int>(chosen.begin(), chosen.end());
}

}  // namespace

Result<BurnInJob> PlanBurnInJob(const json& body, const gpu::Fleet& fleet, const BurnInLauncher& launcher) {
  if (!body.is_object()) return InvalidArgument("burn-in request: the body must be a JSON object like {\"level\": 1}");
  for (const auto& [key, value] : body.items()) {
    static const std::set<std::string> kKnown = {"gpus", "level", "duration", "memtest_fraction", "reset_first"};
    if (!kKnown.count(key)) {
      return FieldError(key, "is not a burn-in option (known: gpus, level, duration, memtest_fraction, reset_first)");
    }
  }
  const json level = body.value("level", json());
  if (!level.is_number_integer() || level.get<int>() < 1 || level.get<int>() > 3) {
    return FieldError("level", "must be 1, 2 or 3, got " + level.dump());
  }
  std::string duration = "15m";
  if (body.contains("duration")) {
    DurationMs ms = 0;
    if (!body["duration"].is_string() || !ParseDuration(body["duration"].get<std::string>(), &ms) || ms <= 0) {
      return FieldError("duration", "must be a positive duration like \"30s\", \"15m\" or \"72h\", got " +
                                        body["duration"].dump());
    }
    duration = body["duration"].get<std::string>();
  }
  double fraction = 0.90;
  if (body.contains("memtest_fraction")) {
    if (!body["memtest_fraction"].is_number() || body["memtest_fraction"].get<double>() <= 0 ||
        body["memtest_fraction"].get<double>() > 1) {
      return FieldError("memtest_fraction", "must be a number above 0 and at most 1, got " +
                                                body["memtest_fraction"].dump());
    }
    fraction = body["memtest_fraction"].get<double>();
  }
  if (body.contains("reset_first") && !body["reset_first"].is_boolean()) {
    return FieldError("reset_first", "must be true or false, got " + body["reset_first"].dump());
  }
  auto positions = ChoosePositions(body.value("gpus", json()), fleet);
  if (!positions.ok()) return positions.status();

  BurnInJob job;
  job.positions = *positions;
  std::string ids;
  for (int p : job.positions) {
    job.extras.pinned_gpus.push_back(fleet.gpus[p].uuid);
    ids += (ids.empty() ? "" : ",") + std::to_string(fleet.gpus[p].index);
  }
  std::vector<std::string> argv = {launcher.self_exe, "burnin", "--direct", "--json",
                                   "--level", std::to_string(level.get<int>()),
                                   "--gpu", ""};
  for (const std::string& uuid : job.extras.pinned_gpus) argv.back() += (argv.back().empty() ? "" : ",") + uuid;
  if (level.get<int>() == 3) argv.insert(argv.end(), {"--duration", duration});
  if (level.get<int>() >= 2) argv.insert(argv.end(), {"--memtest-fraction", fmt::format("{}", fraction)});
  if (body.value("reset_first", false)) argv.push_back("--reset-first");
  argv.insert(argv.end(), launcher.driver_args.begin(), launcher.driver_args.end());
  if (!launcher.home.empty()) argv.insert(argv.end(), {"--home", launcher.home});
  job.spec.argv = std::move(argv);
  job.spec.gpu_twentieths = static_cast<int>(job.positions.size()) * sched::kTwentiethsPerGpu;
  job.spec.name = fmt::format("burnin-L{}-gpu{}", level.get<int>(), ids);
  job.spec.labels = {{"gpuherd.kind", "burnin"}};
  if (!launcher.nvml_library.empty()) job.spec.env = {{"GPUHERD_NVML_LIBRARY", launcher.nvml_library}};
  return job;
}

std::vector<int> ReturnPassedGpus(const std::vector<burnin::BurnInRun>& runs, const gpu::Fleet& fleet,
                                  JobService* jobs) {
  std::vector<int> returned;
  for (const burnin::BurnInRun& run : runs) {
    if (run.job_id <= 0 || run.outcome != burnin::RunOutcome::kPassed ||
        run.health.verdict != burnin::Verdict::kHealthy) {
      continue;
    }
    auto it = std::find_if(fleet.gpus.begin(), fleet.gpus.end(),
                           [&](const gpu::GpuInfo& g) { return g.uuid == run.gpu_uuid; });
    if (it == fleet.gpus.end()) continue;
    // The drain's origin decides (queue/drain_origin.h): an operator's stays.
    const int pos = static_cast<int>(it - fleet.gpus.begin());
    const std::string by =
        fmt::format("gpuherd after burn-in job {} passed (score {})", run.job_id, run.health.score);
    if (jobs->LiftAfterBurnIn(pos, by).ok()) returned.push_back(pos);
  }
  return returned;
}

}  // namespace gpuherd::daemon
