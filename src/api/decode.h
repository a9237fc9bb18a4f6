// Reading a wire type from JSON that came over the network: nlohmann's
// get<T>() throws on a field of the wrong type; Decode turns that into a
// Status naming what was being read.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "core/status.h"

namespace gpuherd::api {

template <typename T>
Result<T> Decode(const nlohmann::json& j, const std::string& what) {
  try {
    return j.get<T>();
  } catch (const nlohmann::json::exception& e) {
    return InvalidArgument("cannot read " + what + ": " + e.what());
  }
}

}  // namespace gpuherd::api
