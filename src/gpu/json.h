// JSON form of the GPU types, as the HTTP API serves them and `--json` prints
// them. Field names are part of the versioned API (/v1): add, never rename.
// Absent readings are omitted (never 0 or null).
#pragma once

#include <nlohmann/json.hpp>

#include "gpu/types.h"

namespace gpuherd::gpu {

void to_json(nlohmann::json& j, const GpuInfo& info);
void from_json(const nlohmann::json& j, GpuInfo& info);
void to_json(nlohmann::json& j, const GpuSample& s);
void from_json(const nlohmann::json& j, GpuSample& s);
void to_json(nlohmann::json& j, const XidEvent& x);
void from_json(const nlohmann::json& j, XidEvent& x);
void to_json(nlohmann::json& j, const GpuProcess& p);
void from_json(const nlohmann::json& j, GpuProcess& p);

// Link from its LinkName(); kUnknown for anything else.
Link ParseLink(const std::string& name);

}  // namespace gpuherd::gpu
