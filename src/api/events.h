// The event log and alerts as /v1/events and /v1/alerts serve them, and as
// the CLI reads them from the daemon or, without one, from the store.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "core/time.h"
#include "store/records.h"

namespace gpuherd::api {

struct Event {
  int64_t id = 0;
  TimeMs time = 0;
  std::string kind;
  std::string severity = "info";   // "info", "warning", "critical"
  std::string gpu_uuid;            // empty when not about one GPU
  std::string message;
  nlohmann::json data = nlohmann::json::object();
};

struct Alert {
  std::string rule;
  std::string subject;             // a GPU's UUID or "mlx5_0/1"
  std::optional<int> gpu;          // the GPU's index; none for a port
  std::string state;               // "pending", "firing", "resolved"
  TimeMs pending_since = 0, fired_at = 0, resolved_at = 0;
  double value = 0;
  std::string unit;                // of `value`: "°C/min", "%", "" (counts, ratios)
  std::string severity;
  std::string action;
  std::string summary;

  // When it entered its current state.
  TimeMs Since() const;
};

// {"id", "time", "kind", "severity", "gpu_uuid", "message", "data"}
void to_json(nlohmann::json& j, const Event& e);
void from_json(const nlohmann::json& j, Event& e);
// {"rule", "subject", "gpu" (index or null), "state", "pending_since", "fired_at",
//  "resolved_at", "value", "unit", "severity", "action", "summary"}
void to_json(nlohmann::json& j, const Alert& a);
void from_json(const nlohmann::json& j, Alert& a);

Event EventOf(const store::EventRecord& record);
Alert AlertOf(const store::AlertRecord& record);

// The one way an event is made: `data` becomes its machine-readable details.
store::EventRecord NewEvent(TimeMs time, std::string kind, store::Severity severity, std::string message,
                            std::string gpu_uuid = "", const nlohmann::json& data = nlohmann::json::object());

}  // namespace gpuherd::api
