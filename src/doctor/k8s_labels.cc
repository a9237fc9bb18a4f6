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
  // The model with the most GPUs names the node; ties go to the first enumerated.
  std::vector<std::pair<std::string, int>> models;
  for (const gpu::GpuInfo& g : gpus) {
    auto it = std::find_if(models.begin(), models.end(), [&](const auto& m) { return m.first == g.name; });
    if (it == models.end()) {
      models.emplace_back(g.name, 1);
    } else {
      ++it->second;
    }
  }
  const std::string model =
      std::max_element(models.begin(), models.end(), [](const auto& a, const auto& b) { return a.second < b.second; })
          ->first;
  uint64_t min_memory = UINT64_MAX;
  int worst = -1, healthy = 0;
  std::string worst_name = "unknown";
  for (const gpu::GpuInfo& g : gpus) {
    min_memory = std::min(min_memory, g.memory_total_bytes);
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
      {"nvidia.com/gpu.count", std::to_string(gpus.size())},
      {"nvidia.com/gpu.memory", std::to_string(min_memory / (1024 * 1024))},
      {"gpuherd.io/gpu.model", LabelValue(GresTypeName(model))},
  };
  if (models.size() > 1) labels.emplace_back("gpuherd.io/gpu.mixed", "true");
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
