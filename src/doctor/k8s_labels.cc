#include "doctor/k8s_labels.h"

#include <algorithm>
#include <cctype>

#include "doctor/gres.h"

namespace gpuherd::doctor {
namespace {

constexpr size_t kMaxLabelValue = 63;

// Worse verdicts rank higher; anything unrecognized is "unknown".
int Rank(const std::string& verdict) {
  if (verdict == "healthy") return 0;
  if (verdict == "degraded") return 2;
  if (verdict == "unhealthy") return 3;
  return 1;
}

}  // namespace

std::string LabelValue(std::string_view text) {
  std::string value;
  for (char c : text) {
    const bool keep = std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-';
    if (keep) {
      value += c;
    } else if (!value.empty() && value.back() != '-') {
      value += '-';
    }
  }
  if (value.size() > kMaxLabelValue) value.resize(kMaxLabelValue);
  auto edge = [](char c) { return !std::isalnum(static_cast<unsigned char>(c)); };
  while (!value.empty() && edge(value.back())) value.pop_back();
  while (!value.empty() && edge(value.front())) value.erase(value.begin());
  return value;
}

Result<std::vector<std::pair<std::string, std::string>>> NodeLabels(
    const std::vector<gpu::GpuInfo>& gpus, const std::map<std::string, std::string>& verdicts) {
  if (gpus.empty()) return FailedPrecondition("no GPUs found: nothing to label");
  // Per model, in enumeration order: how many GPUs and the least memory
  // among them (NVML reports a few MiB less on some boards of one model).
  struct Model {
    std::string name;
    int count = 0;
    uint64_t memory = UINT64_MAX;
  };
  std::vector<Model> models;
  for (const gpu::GpuInfo& g : gpus) {
    auto it = std::find_if(models.begin(), models.end(), [&](const Model& m) { return m.name == g.name; });
    if (it == models.end()) it = models.insert(models.end(), Model{g.name});
    ++it->count;
    it->memory = std::min(it->memory, g.memory_total_bytes);
  }
  // The model with the most GPUs names the node (ties: the first
  // enumerated), and nvidia.com/gpu.{product,count,memory} all describe that
  // model, as gpu-feature-discovery's labels do: a selector on the product
  // must find that many GPUs of that memory. The others get labels of their own.
  const Model& main_model =
      *std::max_element(models.begin(), models.end(), [](const Model& a, const Model& b) { return a.count < b.count; });
  const std::string model = main_model.name;
  int worst = -1, healthy = 0;
  std::string worst_name = "unknown";
  for (const gpu::GpuInfo& g : gpus) {
    auto it = verdicts.find(g.uuid);
    const std::string verdict = it == verdicts.end() || Rank(it->second) == 1 ? "unknown" : it->second;
    if (verdict == "healthy") ++healthy;
    if (Rank(verdict) > worst) {
      worst = Rank(verdict);
      worst_name = verdict;
    }
  }
  std::string lower = LabelValue(model);
  std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
  // The GKE convention the device plugins' selectors use: "nvidia-tesla-v100".
  if (lower.rfind("nvidia", 0) != 0) lower = LabelValue("nvidia-" + lower);
  std::vector<std::pair<std::string, std::string>> labels = {
      {"accelerator", lower},
      {"nvidia.com/gpu.product", LabelValue(model)},
      {"nvidia.com/gpu.count", std::to_string(main_model.count)},
      {"nvidia.com/gpu.memory", std::to_string(main_model.memory / (1024 * 1024))},
      {"gpuherd.io/gpu.model", LabelValue(GresTypeName(model))},
  };
  if (models.size() > 1) {
    labels.emplace_back("gpuherd.io/gpu.mixed", "true");
    labels.emplace_back("gpuherd.io/gpu.total", std::to_string(gpus.size()));
    // Every model by its gres type name: gpuherd.io/gpu.h100_80gb_hbm3.count=4.
    for (const Model& m : models) {
      const std::string type = LabelValue(GresTypeName(m.name)).substr(0, 40);
      labels.emplace_back("gpuherd.io/gpu." + type + ".count", std::to_string(m.count));
      labels.emplace_back("gpuherd.io/gpu." + type + ".memory", std::to_string(m.memory / (1024 * 1024)));
    }
  }
  labels.emplace_back("gpuherd.io/health", worst_name);
  labels.emplace_back("gpuherd.io/healthy-gpus", std::to_string(healthy));
  return labels;
}

std::string KubectlLabelCommand(const std::string& node,
                                const std::vector<std::pair<std::string, std::string>>& labels) {
  std::string command = "kubectl label node " + node + " --overwrite";
  for (const auto& [key, value] : labels) command += " \\\n    " + key + "=" + value;
  return command + "\n";
}

}  // namespace gpuherd::doctor
