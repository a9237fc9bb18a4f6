// How pipelines look in the terminal: the listing of `gpuherd pipelines`,
// the progress table of `gpuherd run --wait` and `gpuherd pipeline show`,
// and the one-line changes printed when the output is not a terminal.
// Every function reads the daemon's JSON as GET /v1/pipelines[/ID] returns it.
// Whatever a user or a job wrote (names, node ids with their parameters,
// metric names and values, reasons) comes out escaped (Printable).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/time.h"

namespace gpuherd::cli {

// "step 120 loss=0.41 acc=0.9": the training step first, then at most three
// other metrics in name order; "-" when nothing was logged.
std::string LatestMetricCell(const nlohmann::json& latest_metrics);

// A node's GPUs ("0,1" or "-") and its run time: now - started while it
// runs, ended - started once it ended, "-" before it started.
std::string NodeGpusCell(const nlohmann::json& node);
std::string NodeElapsedCell(const nlohmann::json& node, TimeMs now);

// "9/12 done, 1 failed, 2 running": from a listing's counts object.
std::string NodeCountsCell(const nlohmann::json& counts);

// The table of `gpuherd pipelines`: ID NAME USER STATE NODES CREATED.
std::string PipelinesTable(const nlohmann::json& pipelines, bool color);

// A headline ("pipeline 7 toy-sweep: running, 9/12 done") and one row per
// node: NODE STATE JOB GPU ELAPSED ATTEMPTS LATEST (JOB: its latest job's id).
std::string ProgressTable(const nlohmann::json& pipeline, TimeMs now, bool color);

// What `gpuherd run` says after the run's id: how many nodes it has, then
// the commands that follow it, a line each ("pipeline 7: 12 nodes",
// "  follow it:   gpuherd pipeline show 7", "  its report:  gpuherd report 7").
std::string RunStartedLines(int64_t id, int64_t nodes);

// True once the daemon reports the run over; SucceededOutcome: it ended
// with every node completed.
bool PipelineFinished(const nlohmann::json& pipeline);
bool PipelineSucceeded(const nlohmann::json& pipeline);

// One line per node whose state or attempt count differs from `before`
// (an empty or null `before` reports every node that left "waiting"):
// "train[lr=0.1] running on GPU 2 (attempt 2)", "train[lr=0.1] completed
// after 41s, step 300 loss=0.12".
std::vector<std::string> ProgressChanges(const nlohmann::json& before, const nlohmann::json& after, TimeMs now);

}  // namespace gpuherd::cli
