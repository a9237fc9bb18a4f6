#include "cli/job_format.h"

#include "cli/table.h"

namespace gpuherd::cli {

std::string StateCell(const std::string& state, bool color) {
  if (state == "failed") return Colored(state, kRed, color);
  if (state == "running") return Colored(state, kGreen, color);
  if (state == "stopping" || state == "held") return Colored(state, kYellow, color);
  return Printable(state);  // the daemon's word, but printed as any other text
}

}  // namespace gpuherd::cli
