// How `gpuherd burnin` and `gpuherd health` show burn-in runs: the ranked
// table, a GPU's history and its latest checks, the fleet's verdicts, the
// live progress, and the exit code a run set ends with.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "burnin/result.h"
#include "burnin/runner.h"
#include "core/time.h"

namespace gpuherd::cli {

inline constexpr int kBurnInExitPassed = 0;       // every GPU passed and is healthy
inline constexpr int kBurnInExitFaults = 1;       // a fault, or a GPU scored degraded/unhealthy
inline constexpr int kBurnInExitUsage = 2;        // bad flags; nothing ran
inline constexpr int kBurnInExitCouldNotRun = 3;  // a GPU (or all) could not be tested
inline constexpr int kBurnInExitAborted = 130;    // stopped by SIGINT/SIGTERM

// The exit code of a finished burn-in, the most serious first: any run
// aborted → 130; any run with faults found or a degraded/unhealthy verdict
// → 1; any GPU that could not be tested → 3; otherwise 0.
int BurnInExitCode(const std::vector<burnin::BurnInRun>& runs);

// What says most about a run, for one table cell: the first failed check,
// else why it could not run or was stopped, else the first warning, else the
// heaviest score factor; "" for a clean pass.
std::string MainReason(const burnin::BurnInRun& run);

// The verdict for people: "healthy", "degraded", ..., or "passed; thermal not
// checked" for a healthy run that left a check out (a level 3 too short for
// the thermal trend): a bare "healthy" would claim more than was measured.
std::string VerdictText(const burnin::BurnInRun& run);

// Best first: runs that finished, by score, then FP32 rate, then GPU index;
// runs that could not run or were aborted last.
std::vector<burnin::BurnInRun> RankRuns(std::vector<burnin::BurnInRun> runs);

// The ranked table: #, GPU, MODEL, OUTCOME, SCORE, VERDICT, TFLOPS, MEM GB/s,
// VS FLEET, VS SPEC, MAX TEMP, ERRORS, REASON. `runs` in the order to show.
std::string RenderBurnInTable(const std::vector<burnin::BurnInRun>& runs, bool color);

// One GPU's runs as given (newest first): FINISHED (UTC), ID, LEVEL, OUTCOME,
// SCORE, VERDICT, TFLOPS, MAX TEMP, ERRORS.
std::string RenderHistoryTable(const std::vector<burnin::BurnInRun>& runs, bool color);

// A run's checks (with their reason and message) and its score factors.
std::string RenderRunDetail(const burnin::BurnInRun& run, bool color);

// A GPU the store knows that has no finished burn-in.
struct UntestedGpu {
  int index = 0;
  std::string uuid, name;
  bool lost = false;  // off the bus or not answering: no burn-in can run on it
};
// One line per GPU: its latest finished run's verdict and score, then the
// GPUs never burned in.
std::string RenderFleetHealth(const std::vector<burnin::BurnInRun>& latest,
                              const std::vector<UntestedGpu>& untested, bool color);

// "memtest.walking_ones  [######------]  52%  410.2 GB/s  63°C  0 errors"
std::string ProgressLine(const burnin::Progress& progress, int bar_width = 24);

// The live progress of a burn-in, one line per GPU. Update returns the text
// to write (to stderr): on a terminal (`redraw`) it moves the cursor back up
// and rewrites every line in place; otherwise it writes a GPU's line when its
// phase changes or `plain_interval` after its previous one, so a log stays
// short.
class ProgressDisplay {
 public:
  // `labels`: by GPU index, e.g. "GPU 0 (NVIDIA GeForce RTX 3090)".
  ProgressDisplay(bool redraw, std::map<int, std::string> labels, DurationMs plain_interval);
  std::string Update(const std::vector<burnin::Progress>& progress, TimeMs now);

 private:
  struct Shown {
    std::string phase;
    TimeMs at = 0;
  };
  bool redraw_;
  std::map<int, std::string> labels_;
  DurationMs plain_interval_;
  size_t lines_drawn_ = 0;     // on a terminal: lines to move back over
  std::map<int, Shown> shown_;  // otherwise: what was last written per GPU
};

}  // namespace gpuherd::cli
