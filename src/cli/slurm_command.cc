// gpuherd slurm gres-conf [--shards N] [--node NAME]: gres.conf lines and the
// slurm.conf fragment for this node's GPUs.
#include <cstdio>

#include <nlohmann/json.hpp>

#include "cli/command.h"
#include "cli/node_gpus.h"
#include "doctor/cpulist.h"
#include "doctor/gres.h"
#include "doctor/host_gpus.h"

namespace gpuherd::cli {
namespace {

struct GresFlags : NodeConfigFlags {
  int shards = 0;
};

void Run(CommandContext* ctx, const GresFlags& flags) {
  auto host = host::NewHost();
  auto node = DetectNodeGpus(ctx, flags.driver, *host);
  if (!node) return;
  doctor::GresOptions options;
  // Slurm's NodeName is the short host name (hostname -s).
  options.node_name = flags.node.empty() ? host->Hostname().substr(0, host->Hostname().find('.')) : flags.node;
  options.shards_per_gpu = flags.shards;
  // The device files and cores of this machine say nothing about a simulated fleet.
  if (!node->simulated) {
    for (const doctor::HostGpu& g : doctor::ReadHostGpus(*host)) {
      if (g.minor) options.minor_by_bus_id[g.pci_bus_id] = *g.minor;
    }
    options.first_thread_of_cpu = doctor::ReadFirstThreads(*host);
  }
  auto config = doctor::GenerateGres(node->gpus, options);
  if (!config.ok()) return ctx->Fail(config.status());
  NoteGpuSource(*node);
  if (flags.json) {
    nlohmann::json json = {{"node", options.node_name},
                           {"gres_conf", config->gres_conf},
                           {"slurm_conf", config->slurm_conf},
                           {"simulated", node->simulated}};
    std::printf("%s\n", json.dump(2).c_str());
    return;
  }
  std::printf("%s\n# --- slurm.conf\n%s", config->gres_conf.c_str(), config->slurm_conf.c_str());
}

}  // namespace

void AddSlurmCommands(CLI::App& app, CommandContext* ctx) {
  CLI::App* slurm = app.add_subcommand("slurm", "Slurm configuration for this node");
  slurm->require_subcommand(1);
  auto flags = std::make_shared<GresFlags>();
  CLI::App* gres = slurm->add_subcommand(
      "gres-conf", "Print gres.conf lines (with each GPU's closest cores) and the slurm.conf NodeName/Gres fragment");
  gres->add_option("--shards", flags->shards, "Also declare N shards per GPU (Name=shard) for GPU sharing")
      ->check(CLI::Range(0, 10000));
  flags->AddTo(gres, "NodeName to use (default: the short host name)");
  gres->callback([ctx, flags] { Run(ctx, *flags); });
}

}  // namespace gpuherd::cli
