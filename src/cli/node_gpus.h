// This node's GPUs for the commands that write its configuration (slurm
// gres-conf, k8s labels): doctor::DetectGpus with the command line's rules
// for a missing driver and a note of where the GPUs were read.
#pragma once

#include <optional>
#include <string>

#include "cli/command.h"
#include "doctor/node_gpus.h"
#include "host/host.h"

namespace gpuherd::cli {

// The flags both commands take: --node (the name the configuration uses),
// --json and the driver's.
struct NodeConfigFlags {
  std::string node;
  bool json = false;
  DriverFlags driver;
  void AddTo(CLI::App* command, const std::string& node_help);
};

// The GPUs `flags` asks for; on failure reports it on `ctx` (exit code 3
// when there is no driver and no simulated fleet was asked for) and returns
// nullopt.
std::optional<doctor::NodeGpus> DetectNodeGpus(CommandContext* ctx, const DriverFlags& flags,
                                               const host::Host& host);
// On stderr, where the GPUs came from unless it was NVML: a simulated fleet
// (these are not real GPUs) or the kernel driver's files.
void NoteGpuSource(const doctor::NodeGpus& node);

}  // namespace gpuherd::cli
