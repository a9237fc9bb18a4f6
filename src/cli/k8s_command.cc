// gpuherd k8s labels [--node NAME]: kubectl commands that label this node
// with its GPU model, count, memory and burn-in health.
#include <cstdio>

#include <nlohmann/json.hpp>

#include "cli/command.h"
#include "cli/latest_burnins.h"
#include "cli/node_gpus.h"
#include "cli/table.h"
#include "doctor/k8s_labels.h"

namespace gpuherd::cli {
namespace {

void Run(CommandContext* ctx, const NodeConfigFlags& flags) {
  auto host = host::NewHost();
  auto node = DetectNodeGpus(ctx, flags.driver, *host);
  if (!node) return;
  const LatestBurnIns burnins = ReadLatestBurnIns(*ctx);
  auto labels = doctor::NodeLabels(node->gpus, burnins.verdicts);
  if (!labels.ok()) return ctx->Fail(labels.status());
  const std::string name = flags.node.empty() ? host->Hostname() : flags.node;
  NoteGpuSource(*node);
  if (!burnins.unavailable.empty()) {
    std::fprintf(stderr, "note: %s: health is \"unknown\"; run gpuherd burnin to measure it\n",
                 Printable(burnins.unavailable).c_str());
  }
  if (flags.json) {
    nlohmann::json json = {{"node", name}, {"labels", nlohmann::json::object()}, {"simulated", node->simulated}};
    for (const auto& [key, value] : *labels) json["labels"][key] = value;
    std::printf("%s\n", json.dump(2).c_str());
    return;
  }
  std::fputs(doctor::KubectlLabelCommand(name, *labels).c_str(), stdout);
}

}  // namespace

void AddK8sCommands(CLI::App& app, CommandContext* ctx) {
  CLI::App* k8s = app.add_subcommand("k8s", "Kubernetes configuration for this node");
  k8s->require_subcommand(1);
  auto flags = std::make_shared<NodeConfigFlags>();
  CLI::App* labels = k8s->add_subcommand(
      "labels", "Print kubectl label commands: GPU model, count, memory and burn-in health verdict");
  flags->AddTo(labels, "Kubernetes node name (default: the host name)");
  labels->callback([ctx, flags] { Run(ctx, *flags); });
}

}  // namespace gpuherd::cli
