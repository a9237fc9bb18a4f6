// Kubernetes node labels from the detected GPUs and their latest burn-in
// verdicts, printed as kubectl commands for the admin to run.
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/status.h"
#include "gpu/types.h"

namespace gpuherd::doctor {

// Labels in a fixed order (key, value); values are valid label values
// (at most 63 characters of [A-Za-z0-9._-], alphanumeric at both ends).
//   accelerator, nvidia.com/gpu.product, nvidia.com/gpu.count,
//   nvidia.com/gpu.memory (MiB), gpuherd.io/gpu.model: all of the model with
//   the most GPUs (ties: the first enumerated), so product, count and memory
//   always agree; on a mixed node also gpuherd.io/gpu.mixed=true,
//   gpuherd.io/gpu.total and, per model by its gres type name,
//   gpuherd.io/gpu.<type>.count and gpuherd.io/gpu.<type>.memory;
//   gpuherd.io/health (the
//   worst verdict: unhealthy > degraded > unknown > healthy) and
//   gpuherd.io/healthy-gpus.
// `verdicts` maps GPU UUID -> "healthy", "degraded", "unhealthy"; a GPU
// without one counts as "unknown". Fails when there are no GPUs.
Result<std::vector<std::pair<std::string, std::string>>> NodeLabels(
    const std::vector<gpu::GpuInfo>& gpus, const std::map<std::string, std::string>& verdicts);

// "kubectl label node <node> --overwrite k=v ..." with one label per line.
std::string KubectlLabelCommand(const std::string& node,
                                const std::vector<std::pair<std::string, std::string>>& labels);

// Turns any text into a valid label value ("NVIDIA H100 80GB HBM3" ->
// "NVIDIA-H100-80GB-HBM3").
std::string LabelValue(std::string_view text);

}  // namespace gpuherd::doctor
