// How jobs look in the terminal, shared by ps and show; the job itself is
// the API's view (api/jobs.h).
#pragma once

#include <string>

namespace gpuherd::cli {

std::string StateCell(const std::string& state, bool color);   // coloured by outcome

}  // namespace gpuherd::cli
