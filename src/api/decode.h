// Reading a wire type from JSON that came over the network: nlohmann's
// get<T>() throws on a field of the wrong type; Decode turns that into a
// Status naming what was being read.
#pragma once

#include <cstdint>
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

// A field of an object read leniently, for views that show what is there: a
// string as it is, another value as its JSON, "" when absent or null.
inline std::string FieldText(const nlohmann::json& object, const char* key) {
  auto it = object.find(key);
  if (it == object.end() || it->is_null()) return "";
  return it->is_string() ? it->get<std::string>() : it->dump();
}
// A number field as an integer; 0 when absent or not a number.
inline int64_t FieldInt(const nlohmann::json& object, const char* key) {
  auto it = object.find(key);
  return it != object.end() && it->is_number() ? it->get<int64_t>() : 0;
}

}  // namespace gpuherd::api
