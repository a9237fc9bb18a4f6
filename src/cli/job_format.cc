#include "cli/job_format.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "cli/table.h"

namespace gpuherd::cli {

std::string StateCell(const std::string& state, bool color) {
  if (state == "failed") return Colored(state, kRed, color);
  if (state == "running") return Colored(state, kGreen, color);
  if (state == "stopping" || state == "held") return Colored(state, kYellow, color);
  return Printable(state);  // the daemon's word, but printed as any other text
}

// The daemon names a spec's fields as a spec file writes them (gpu_mem);
// a job given by flags hears of its flags instead (--gpu-mem).
std::string SpokenAsFlags(std::string message) {
  static constexpr std::pair<const char*, const char*> kPhrases[] = {
      {"job spec field 'gpu_mem': is required for a fraction of a GPU (gpus ",
       "--gpu-mem is required for a fraction of a GPU (--gpus "},
      {"give the memory the job needs, e.g. \"8GiB\"", "give the memory the job needs, e.g. --gpu-mem 8GiB"},
      {"job spec field 'gpu_mem': needs gpus", "--gpu-mem needs --gpus"},
      {"gpu_mem ", "--gpu-mem "},
      {"lower min_cc", "lower --min-cc"},
      {"min_cc ", "--min-cc "},
  };
  for (const auto& [from, to] : kPhrases) {
    for (size_t at = message.find(from); at != std::string::npos; at = message.find(from, at + std::strlen(to))) {
      message.replace(at, std::strlen(from), to);
    }
  }
  // "job spec field 'time_limit': ..." -> "--time-limit: ...", for the
  // fields that have a flag of their own.
  static constexpr std::pair<const char*, const char*> kFlags[] = {
      {"gpus", "--gpus"},         {"gpu_mem", "--gpu-mem"},
      {"model", "--model"},       {"min_cc", "--min-cc"},
      {"cpus", "--cpus"},         {"mem", "--mem"},
      {"priority", "--priority"}, {"time_limit", "--time-limit"},
      {"checkpoint.grace", "--checkpoint-grace"}, {"max_restarts", "--max-restarts"},
      {"name", "--name"},         {"after", "--after"},
      {"after_any", "--afterany"}, {"after_not_ok", "--afternotok"},
      {"mixed_models", "--mixed-models"}, {"preemptible", "--preemptible"}};
  for (const auto& [field, flag] : kFlags) {
    const std::string from = std::string("job spec field '") + field + "'";
    for (size_t at = message.find(from); at != std::string::npos; at = message.find(from, at)) {
      message.replace(at, from.size(), flag);
    }
  }
  return message;
}

}  // namespace gpuherd::cli
