// How jobs look in the terminal, shared by ps and show; the job itself is
// the API's view (api/jobs.h).
#pragma once

#include <string>

namespace gpuherd::cli {

std::string StateCell(const std::string& state, bool color);   // coloured by outcome

// The daemon names a spec's fields as a spec file writes them (gpu_mem); a
// job given by flags hears of its flags instead (--gpu-mem).
std::string SpokenAsFlags(std::string message);

}  // namespace gpuherd::cli
