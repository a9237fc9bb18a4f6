#include "cli/node_gpus.h"

#include <cstdio>

#include "cli/no_driver.h"
#include "host/clock.h"

namespace gpuherd::cli {

void NodeConfigFlags::AddTo(CLI::App* command, const std::string& node_help) {
  command->add_option("--node", node, node_help);
  command->add_flag("--json", json, "Print JSON");
  driver.AddTo(command);
}

std::optional<doctor::NodeGpus> DetectNodeGpus(CommandContext* ctx, const DriverFlags& flags,
                                               const host::Host& host) {
  auto node = doctor::DetectGpus(flags.choice(), host, host::NewRealClock()->Now());
  if (!node.ok()) {
    FailMaybeNoDriver(ctx, flags.asked_for_sim() ? node.status() : NoDriver(node.status()));
    return std::nullopt;
  }
  return std::move(node).value();
}

void NoteGpuSource(const doctor::NodeGpus& node) {
  if (node.simulated) {
    std::fprintf(stderr, "note: SIMULATED fleet (%s): these are not real GPUs\n", node.source_note.c_str());
  } else if (!node.source_note.empty()) {
    std::fprintf(stderr, "note: %s\n", node.source_note.c_str());
  }
}

}  // namespace gpuherd::cli
