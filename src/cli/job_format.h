// How jobs look in the terminal, shared by ps and show.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "core/time.h"

namespace gpuherd::cli {

std::string StateCell(const std::string& state, bool color);   // coloured by outcome
std::string GpusRequested(const nlohmann::json& job);           // "2", "0.5", "-"
std::string GpusAssigned(const nlohmann::json& job);            // "0,1" or "-"
// Waiting time for pending jobs, run time for running ones, total for finished.
std::string JobTime(const nlohmann::json& job, TimeMs now);

}  // namespace gpuherd::cli
