#include "daemon/burnin_jobs.h"

#include <algorithm>
#include <filesystem>
#include <set>

#include <fmt/format.h>

#include "http/json_body.h"

namespace gpuherd::daemon {

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

// Fleet positions named by the request (every GPU when it names none).
Result<std::vector<int>> ChoosePositions(const std::vector<std::string>& gpus, const gpu::Fleet& fleet) {
  std::set<int> chosen;
  if (gpus.empty()) {
    for (size_t i = 0; i < fleet.gpus.size(); ++i) chosen.insert(static_cast<int>(i));
  }
  for (const std::string& id : gpus) {
    int position = gpu::FindGpu(fleet.gpus, id);
    if (position < 0) {
      return InvalidArgument("burn-in request: \"gpus\" names '" + http::Excerpt(id) +
                             "', which is not a GPU of this machine (`gpuherd gpus` lists them)");
    }
    chosen.insert(position);
  }
  if (chosen.empty()) return Unavailable("this machine has no GPUs to test");
  return std::vector<int>(chosen.begin(), chosen.end());
}

}  // namespace

Result<BurnInJob> PlanBurnInJob(const api::BurnInRequest& request, const gpu::Fleet& fleet,
                                const BurnInLauncher& launcher) {
  if (request.level < 1 || request.level > 3) {
    return InvalidArgument(fmt::format("burn-in request: \"level\" must be 1, 2 or 3, got {}", request.level));
  }
  auto positions = ChoosePositions(request.gpus, fleet);
  if (!positions.ok()) return positions.status();

  BurnInJob job;
  job.positions = *positions;
  std::string ids;
  for (int p : job.positions) {
    job.extras.pinned_gpus.push_back(fleet.gpus[p].uuid);
    ids += (ids.empty() ? "" : ",") + std::to_string(fleet.gpus[p].index);
  }
  std::vector<std::string> argv = {launcher.self_exe, "burnin", "--direct", "--json",
                                   "--level", std::to_string(request.level),
                                   "--gpu", ""};
  for (const std::string& uuid : job.extras.pinned_gpus) argv.back() += (argv.back().empty() ? "" : ",") + uuid;
  if (request.level == 3) argv.insert(argv.end(), {"--duration", request.duration});
  if (request.level >= 2) argv.insert(argv.end(), {"--memtest-fraction", fmt::format("{}", request.memtest_fraction)});
  if (request.reset_first) argv.push_back("--reset-first");
  argv.insert(argv.end(), launcher.driver_args.begin(), launcher.driver_args.end());
  if (!launcher.home.empty()) argv.insert(argv.end(), {"--home", launcher.home});
  job.spec.argv = std::move(argv);
  job.spec.gpu_twentieths = static_cast<int>(job.positions.size()) * sched::kTwentiethsPerGpu;
  job.spec.name = fmt::format("burnin-L{}-gpu{}", request.level, ids);
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
