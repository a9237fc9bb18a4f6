#include "api/events.h"

namespace gpuherd::api {

using nlohmann::json;

TimeMs Alert::Since() const {
  if (state == "firing") return fired_at;
  if (state == "resolved") return resolved_at;
  return pending_since;
}

void to_json(json& j, const Event& e) {
  j = {{"id", e.id},           {"time", e.time},         {"kind", e.kind}, {"severity", e.severity},
       {"gpu_uuid", e.gpu_uuid}, {"message", e.message}, {"data", e.data}};
}

void from_json(const json& j, Event& e) {
  e.id = j.value("id", int64_t{0});
  e.time = j.value("time", TimeMs{0});
  e.kind = j.value("kind", std::string());
  e.severity = j.value("severity", std::string("info"));
  e.gpu_uuid = j.value("gpu_uuid", std::string());
  e.message = j.value("message", std::string());
  e.data = j.value("data", json::object());
}

void to_json(json& j, const Alert& a) {
  j = {{"rule", a.rule},
       {"subject", a.subject},
       {"gpu", a.gpu ? json(*a.gpu) : json(nullptr)},
       {"state", a.state},
       {"pending_since", a.pending_since},
       {"fired_at", a.fired_at},
       {"resolved_at", a.resolved_at},
       {"value", a.value},
       {"unit", a.unit},
       {"severity", a.severity},
       {"action", a.action},
       {"summary", a.summary}};
}

void from_json(const json& j, Alert& a) {
  a.rule = j.value("rule", std::string());
  a.subject = j.value("subject", std::string());
  a.gpu.reset();
  if (auto it = j.find("gpu"); it != j.end() && it->is_number_integer()) a.gpu = it->get<int>();
  a.state = j.value("state", std::string());
  a.pending_since = j.value("pending_since", TimeMs{0});
  a.fired_at = j.value("fired_at", TimeMs{0});
  a.resolved_at = j.value("resolved_at", TimeMs{0});
  a.value = j.value("value", 0.0);
  a.unit = j.value("unit", std::string());
  a.severity = j.value("severity", std::string());
  a.action = j.value("action", std::string());
  a.summary = j.value("summary", std::string());
}

Event EventOf(const store::EventRecord& r) {
  json data = json::parse(r.data_json, nullptr, /*allow_exceptions=*/false);
  if (data.is_discarded()) data = json::object();
  return {r.id, r.time, r.kind, store::SeverityName(r.severity), r.gpu_uuid, r.message, std::move(data)};
}

Alert AlertOf(const store::AlertRecord& r) {
  Alert a;
  a.rule = r.rule;
  a.subject = r.subject;
  if (r.gpu_index >= 0) a.gpu = r.gpu_index;
  a.state = r.state;
  a.pending_since = r.pending_since;
  a.fired_at = r.fired_at;
  a.resolved_at = r.resolved_at;
  a.value = r.value;
  a.severity = store::SeverityName(r.severity);
  a.action = r.action;
  a.summary = r.summary;
  return a;
}

store::EventRecord NewEvent(TimeMs time, std::string kind, store::Severity severity, std::string message,
                            std::string gpu_uuid, const json& data) {
  store::EventRecord e;
  e.time = time;
  e.kind = std::move(kind);
  e.severity = severity;
  e.message = std::move(message);
  e.gpu_uuid = std::move(gpu_uuid);
  // Messages and details may carry a job's bytes: replaced, never fatal.
  e.data_json = data.dump(-1, ' ', false, json::error_handler_t::replace);
  return e;
}

}  // namespace gpuherd::api
