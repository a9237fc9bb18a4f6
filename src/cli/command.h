// What every subcommand shares: the global flags, how errors are reported and
// the registration functions, one per command file.
#pragma once

#include <optional>
#include <string>

#include <CLI/CLI.hpp>

#include "cli/daemon_locator.h"
#include "core/state_dir.h"
#include "core/status.h"
#include "gpu/open.h"

namespace gpuherd::cli {

struct CommandContext {
  std::string home;   // --home; empty = $GPUHERD_HOME or the default
  int exit_code = 0;  // set by the command that ran

  // The daemon this command talks to (daemon_locator.h): --home,
  // $GPUHERD_HOME, this user's own daemon when it answers, else the system
  // daemon when it answers. Looked up once per command.
  StateDir dir() const { return location().dir; }
  const DaemonLocation& location() const;
  // This user's own state directory, never the system daemon's: where
  // `gpuherd daemon` keeps its state.
  StateDir own_dir() const { return ResolveStateDir(home); }
  // Colours only on a terminal, and never when NO_COLOR is set.
  bool color() const;
  // Prints "gpuherd: <message>" to stderr and sets the exit code: 2 for
  // kInvalidArgument (a usage error: a flag, a value or a file given that
  // cannot be used, wherever it was found), 1 for any other failure.
  void Fail(const Status& status);
  // A usage error found by the command itself: exit 2.
  void Usage(const std::string& message) { Fail(InvalidArgument(message)); }

  mutable std::optional<DaemonLocation> located;  // location()'s answer
};

// Validators whose messages a person can read ("--cpus: must be a whole
// number from 0 to 4096, got -1"), in place of CLI11's NonNegativeNumber and
// PositiveNumber ("not in range 0.000000 to 1797693..."). CLI11 reports them
// as parse errors: exit 2.
CLI::Validator WholeNumber(int64_t lo, int64_t hi);
CLI::Validator NonNegativeWhole();  // 0 and up
CLI::Validator PositiveWhole();     // 1 and up
// A job as commands name it: "12" (a job, or the whole array whose id it is:
// an array's id is its first task's) or "12_3" (task 3 of array 12).
CLI::Validator JobRef();

// --sim N, --scenario FILE, --seed S: the flags that choose the GPU driver.
struct DriverFlags {
  int sim = 0;
  std::string scenario;
  uint64_t seed = 1;
  bool asked_for_sim() const { return sim > 0 || !scenario.empty(); }
  gpu::DriverChoice choice() const;
  void AddTo(CLI::App* command);
};

void AddGpusCommand(CLI::App& app, CommandContext* ctx);
void AddTopCommand(CLI::App& app, CommandContext* ctx);
void AddTopoCommand(CLI::App& app, CommandContext* ctx);
void AddEventsCommand(CLI::App& app, CommandContext* ctx);
void AddAlertsCommand(CLI::App& app, CommandContext* ctx);
void AddNoteCommand(CLI::App& app, CommandContext* ctx);
void AddStopCommand(CLI::App& app, CommandContext* ctx);
void AddStatusCommand(CLI::App& app, CommandContext* ctx);
void AddSubmitCommand(CLI::App& app, CommandContext* ctx);
void AddPsCommand(CLI::App& app, CommandContext* ctx);
void AddShowCommand(CLI::App& app, CommandContext* ctx);
void AddAcctCommand(CLI::App& app, CommandContext* ctx);
void AddLogsCommand(CLI::App& app, CommandContext* ctx);
void AddWaitCommand(CLI::App& app, CommandContext* ctx);  // wait [--any] ID...
void AddJobActionCommands(CLI::App& app, CommandContext* ctx);  // cancel, hold, release, requeue
void AddDrainCommands(CLI::App& app, CommandContext* ctx);      // drain, undrain
void AddBurnInCommand(CLI::App& app, CommandContext* ctx);
void AddHealthCommand(CLI::App& app, CommandContext* ctx);
void AddHealthcheckCommand(CLI::App& app, CommandContext* ctx);  // healthcheck [--slurm]
void AddPassportCommand(CLI::App& app, CommandContext* ctx);     // passport GPU, passport --import FILE
void AddDoctorCommand(CLI::App& app, CommandContext* ctx);
void AddSlurmCommands(CLI::App& app, CommandContext* ctx);  // slurm gres-conf
void AddK8sCommands(CLI::App& app, CommandContext* ctx);    // k8s labels
void AddRunCommand(CLI::App& app, CommandContext* ctx);
void AddPipelineCommands(CLI::App& app, CommandContext* ctx);  // pipelines, pipeline show|cancel|retry
void AddReportCommand(CLI::App& app, CommandContext* ctx);
void AddPredictCommands(CLI::App& app, CommandContext* ctx);  // predict train|eval
void AddDashboardCommand(CLI::App& app, CommandContext* ctx);

}  // namespace gpuherd::cli
