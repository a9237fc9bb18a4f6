#include "alerts/passport.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <map>
#include <tuple>

#include "core/html.h"

namespace gpuherd::alerts {
namespace {

// Event kinds that are incidents of the card, by the passport's name for them.
const std::map<std::string, std::string>& IncidentKinds() {
  static const std::map<std::string, std::string> kKinds = {
      {"gpu.xid", "xid"},         {"gpu.ecc", "ecc"},           {"gpu.retired", "remapped_rows"},
      {"gpu.thermal", "throttling"}, {"gpu.pcie", "pcie"},      {"gpu.pcie_replay", "pcie_replay"},
      {"gpu.lost", "lost"},       {"gpu.fan", "fan"},           {"gpu.fault", "fault"},
  };
  return kKinds;
}

constexpr size_t kMaxText = 4096;
constexpr size_t kMaxItems = 100000;

template <typename T, typename Key>
void MergeSorted(std::vector<T>& into, const std::vector<T>& more, Key key) {
  for (const T& x : more) {
    if (std::find(into.begin(), into.end(), x) == into.end()) into.push_back(x);
  }
  std::stable_sort(into.begin(), into.end(), [&](const T& a, const T& b) { return key(a) < key(b); });
}

// Reads a bounded string; refuses control characters but newline and tab.
Status GetText(const nlohmann::json& j, const char* field, std::string* out, bool required = false) {
  if (!j.contains(field)) {
    return required ? InvalidArgument(std::string("passport: missing '") + field + "'") : Status::Ok();
  }
  if (!j[field].is_string()) return InvalidArgument(std::string("passport: '") + field + "' is not text");
  std::string s = j[field].get<std::string>();
  if (s.size() > kMaxText) return InvalidArgument(std::string("passport: '") + field + "' is too long");
  for (char c : s) {
    if (static_cast<unsigned char>(c) < 0x20 && c != '\n' && c != '\t') {
      return InvalidArgument(std::string("passport: '") + field + "' holds a control character");
    }
  }
  *out = std::move(s);
  return Status::Ok();
}

template <typename N>
Status GetNumber(const nlohmann::json& j, const char* field, N* out) {
  if (!j.contains(field)) return Status::Ok();
  if (!j[field].is_number()) return InvalidArgument(std::string("passport: '") + field + "' is not a number");
  *out = j[field].get<N>();
  return Status::Ok();
}

Status GetList(const nlohmann::json& j, const char* field, const nlohmann::json** out) {
  static const nlohmann::json kEmpty = nlohmann::json::array();
  *out = &kEmpty;
  if (!j.contains(field)) return Status::Ok();
  if (!j[field].is_array()) return InvalidArgument(std::string("passport: '") + field + "' is not a list");
  if (j[field].size() > kMaxItems) return InvalidArgument(std::string("passport: '") + field + "' is too long");
  *out = &j[field];
  return Status::Ok();
}

#define PASSPORT_TRY(expr)              \
  do {                                  \
    if (Status _s = (expr); !_s.ok()) { \
      return _s;                        \
    }                                   \
  } while (0)

}  // namespace

std::string PassportKey(const store::GpuRecord& gpu) {
  // NVML reports "N/A" or an empty serial on consumer cards.
  if (!gpu.serial.empty() && gpu.serial != "N/A" && gpu.serial != "[N/A]") return gpu.serial;
  return gpu.uuid;
}

Passport BuildPassport(const store::GpuRecord& gpu, const std::vector<store::EventRecord>& events,
                       const std::vector<store::BurnInRecord>& burnins,
                       const std::vector<store::HealthTransitionRecord>& transitions, int64_t sampled_minutes,
                       const std::string& host) {
  Passport p;
  p.key = PassportKey(gpu);
  p.serial = p.key == gpu.uuid ? "" : gpu.serial;
  p.uuid = gpu.uuid;
  p.model = gpu.name;
  p.first_seen = gpu.first_seen;
  p.last_seen = gpu.last_seen;
  p.hours_in_service = static_cast<double>(sampled_minutes) / 60.0;
  p.hosts = {host};
  for (const store::EventRecord& e : events) {
    if (e.gpu_uuid != gpu.uuid) continue;
    auto kind = IncidentKinds().find(e.kind);
    if (kind == IncidentKinds().end()) continue;
    PassportIncident i{e.time, kind->second, store::SeverityName(e.severity), e.message, 0, host};
    if (kind->second == "xid") {
      auto data = nlohmann::json::parse(e.data_json, nullptr, /*allow_exceptions=*/false);
      if (data.is_object() && data.contains("xid") && data["xid"].is_number_integer()) i.xid = data["xid"];
    }
    p.incidents.push_back(std::move(i));
  }
  for (const store::BurnInRecord& b : burnins) {
    if (b.gpu_uuid != gpu.uuid) continue;
    PassportBurnIn r{b.finished, b.level, b.outcome, b.verdict, b.score, nlohmann::json::object(), host};
    auto run = nlohmann::json::parse(b.json, nullptr, /*allow_exceptions=*/false);
    if (run.is_object() && run.contains("rates") && run["rates"].is_object()) r.rates = run["rates"];
    p.burnins.push_back(std::move(r));
  }
  for (const store::HealthTransitionRecord& t : transitions) {
    if (t.gpu_uuid != gpu.uuid) continue;
    auto evidence = nlohmann::json::parse(t.evidence_json, nullptr, /*allow_exceptions=*/false);
    if (!evidence.is_array()) evidence = nlohmann::json::array();
    p.states.push_back({t.time, t.from_state, t.to_state, t.reason, evidence, t.shadow, host});
    if (t.shadow) continue;
    p.state = t.to_state;
    if (t.from_state == "requalifying" && t.to_state == "in_service") ++p.requalifications_passed;
    if (t.from_state == "requalifying" && t.to_state == "retired") ++p.requalifications_failed;
  }
  auto by_time = [](const auto& a, const auto& b) { return a.time < b.time; };
  std::stable_sort(p.incidents.begin(), p.incidents.end(), by_time);
  std::stable_sort(p.states.begin(), p.states.end(), by_time);
  std::stable_sort(p.burnins.begin(), p.burnins.end(),
                   [](const PassportBurnIn& a, const PassportBurnIn& b) { return a.finished < b.finished; });
  return p;
}

Result<Passport> MergePassport(Passport local, const Passport& imported) {
  if (imported.key != local.key) {
    return InvalidArgument("passport of card " + imported.key + " does not belong to card " + local.key);
  }
  if (imported.first_seen > 0 && (local.first_seen == 0 || imported.first_seen < local.first_seen)) {
    local.first_seen = imported.first_seen;
  }
  local.last_seen = std::max(local.last_seen, imported.last_seen);
  local.hours_in_service += imported.hours_in_service;
  local.requalifications_passed += imported.requalifications_passed;
  local.requalifications_failed += imported.requalifications_failed;
  if (local.model.empty()) local.model = imported.model;
  if (local.states.empty()) local.state = imported.state;
  for (const std::string& h : imported.hosts) {
    if (std::find(local.hosts.begin(), local.hosts.end(), h) == local.hosts.end()) {
      local.hosts.insert(local.hosts.end() - (local.hosts.empty() ? 0 : 1), h);  // this machine stays last
    }
  }
  MergeSorted(local.incidents, imported.incidents, [](const PassportIncident& i) { return i.time; });
  MergeSorted(local.burnins, imported.burnins, [](const PassportBurnIn& b) { return b.finished; });
  MergeSorted(local.states, imported.states, [](const PassportStateChange& s) { return s.time; });
  return local;
}

nlohmann::json PassportToJson(const Passport& p) {
  nlohmann::json j = {{"format", kPassportFormat},
                      {"key", p.key},
                      {"serial", p.serial},
                      {"uuid", p.uuid},
                      {"model", p.model},
                      {"first_seen", p.first_seen},
                      {"last_seen", p.last_seen},
                      {"hours_in_service", p.hours_in_service},
                      {"state", p.state},
                      {"requalifications_passed", p.requalifications_passed},
                      {"requalifications_failed", p.requalifications_failed},
                      {"hosts", p.hosts},
                      {"incidents", nlohmann::json::array()},
                      {"burnins", nlohmann::json::array()},
                      {"states", nlohmann::json::array()}};
  for (const auto& i : p.incidents) {
    nlohmann::json x = {{"time", i.time}, {"kind", i.kind}, {"severity", i.severity},
                        {"message", i.message}, {"host", i.host}};
    if (i.xid) x["xid"] = i.xid;
    j["incidents"].push_back(std::move(x));
  }
  for (const auto& b : p.burnins) {
    j["burnins"].push_back({{"finished", b.finished}, {"level", b.level}, {"outcome", b.outcome},
                            {"verdict", b.verdict}, {"score", b.score}, {"rates", b.rates}, {"host", b.host}});
  }
  for (const auto& s : p.states) {
    j["states"].push_back({{"time", s.time}, {"from", s.from}, {"to", s.to}, {"reason", s.reason},
                           {"evidence", s.evidence}, {"shadow", s.shadow}, {"host", s.host}});
  }
  return j;
}

Result<Passport> PassportFromJson(const nlohmann::json& j) {
  if (!j.is_object()) return InvalidArgument("passport: not a JSON object");
  if (!j.contains("format") || j["format"] != kPassportFormat) {
    return InvalidArgument("passport: unknown format (expected " + std::to_string(kPassportFormat) + ")");
  }
  Passport p;
  PASSPORT_TRY(GetText(j, "key", &p.key, /*required=*/true));
  if (p.key.empty()) return InvalidArgument("passport: empty key");
  PASSPORT_TRY(GetText(j, "serial", &p.serial));
  PASSPORT_TRY(GetText(j, "uuid", &p.uuid));
  PASSPORT_TRY(GetText(j, "model", &p.model));
  PASSPORT_TRY(GetText(j, "state", &p.state));
  PASSPORT_TRY(GetNumber(j, "first_seen", &p.first_seen));
  PASSPORT_TRY(GetNumber(j, "last_seen", &p.last_seen));
  PASSPORT_TRY(GetNumber(j, "hours_in_service", &p.hours_in_service));
  if (p.hours_in_service < 0 || p.hours_in_service > 1e6) return InvalidArgument("passport: bad hours_in_service");
  PASSPORT_TRY(GetNumber(j, "requalifications_passed", &p.requalifications_passed));
  PASSPORT_TRY(GetNumber(j, "requalifications_failed", &p.requalifications_failed));
  const nlohmann::json* list = nullptr;
  PASSPORT_TRY(GetList(j, "hosts", &list));
  for (const auto& h : *list) {
    nlohmann::json wrap = {{"host", h}};
    std::string host;
    PASSPORT_TRY(GetText(wrap, "host", &host, true));
    p.hosts.push_back(host);
  }
  PASSPORT_TRY(GetList(j, "incidents", &list));
  for (const auto& x : *list) {
    if (!x.is_object()) return InvalidArgument("passport: an incident is not an object");
    PassportIncident i;
    PASSPORT_TRY(GetNumber(x, "time", &i.time));
    PASSPORT_TRY(GetText(x, "kind", &i.kind, true));
    PASSPORT_TRY(GetText(x, "severity", &i.severity));
    PASSPORT_TRY(GetText(x, "message", &i.message));
    PASSPORT_TRY(GetText(x, "host", &i.host));
    PASSPORT_TRY(GetNumber(x, "xid", &i.xid));
    p.incidents.push_back(std::move(i));
  }
  PASSPORT_TRY(GetList(j, "burnins", &list));
  for (const auto& x : *list) {
    if (!x.is_object()) return InvalidArgument("passport: a burn-in is not an object");
    PassportBurnIn b;
    PASSPORT_TRY(GetNumber(x, "finished", &b.finished));
    PASSPORT_TRY(GetNumber(x, "level", &b.level));
    PASSPORT_TRY(GetNumber(x, "score", &b.score));
    PASSPORT_TRY(GetText(x, "outcome", &b.outcome));
    PASSPORT_TRY(GetText(x, "verdict", &b.verdict));
    PASSPORT_TRY(GetText(x, "host", &b.host));
    if (x.contains("rates")) {
      if (!x["rates"].is_object()) return InvalidArgument("passport: a burn-in's rates are not an object");
      for (const auto& [name, v] : x["rates"].items()) {
        if (v.is_number() && name.size() < 64) b.rates[name] = v;
      }
    }
    p.burnins.push_back(std::move(b));
  }
  PASSPORT_TRY(GetList(j, "states", &list));
  for (const auto& x : *list) {
    if (!x.is_object()) return InvalidArgument("passport: a state change is not an object");
    PassportStateChange s;
    PASSPORT_TRY(GetNumber(x, "time", &s.time));
    PASSPORT_TRY(GetText(x, "from", &s.from, true));
    PASSPORT_TRY(GetText(x, "to", &s.to, true));
    PASSPORT_TRY(GetText(x, "reason", &s.reason));
    PASSPORT_TRY(GetText(x, "host", &s.host));
    if (x.contains("shadow") && x["shadow"].is_boolean()) s.shadow = x["shadow"];
    if (x.contains("evidence") && x["evidence"].is_array() && x["evidence"].dump().size() < 65536) {
      s.evidence = x["evidence"];
    }
    p.states.push_back(std::move(s));
  }
  return p;
}

std::string RenderPassportHtml(const Passport& p) {
  std::string out = fmt::format(
      "<!doctype html>\n<html><head><meta charset=\"utf-8\"><title>GPU passport {0}</title>\n"
      "<style>body{{font-family:sans-serif;margin:2em}}table{{border-collapse:collapse}}"
      "td,th{{border:1px solid #ccc;padding:3px 8px;text-align:left}}</style></head><body>\n"
      "<h1>GPU passport: {0}</h1>\n<table>\n"
      "<tr><th>Model</th><td>{1}</td></tr><tr><th>Serial</th><td>{2}</td></tr>"
      "<tr><th>UUID</th><td>{3}</td></tr><tr><th>First seen (UTC)</th><td>{4}</td></tr>"
      "<tr><th>Hours in service</th><td>{5:.1f}</td></tr><tr><th>State</th><td>{6}</td></tr>"
      "<tr><th>Requalifications</th><td>{7} passed, {8} failed</td></tr>"
      "<tr><th>Machines</th><td>{9}</td></tr></table>\n",
      HtmlEscape(p.key), HtmlEscape(p.model), HtmlEscape(p.serial.empty() ? "none" : p.serial), HtmlEscape(p.uuid),
      p.first_seen ? FormatTimeUtc(p.first_seen) : "-", p.hours_in_service, HtmlEscape(p.state),
      p.requalifications_passed, p.requalifications_failed, HtmlEscape(fmt::format("{}", fmt::join(p.hosts, ", "))));
  out += fmt::format("<h2>Incidents ({})</h2>\n<table><tr><th>Time (UTC)</th><th>Kind</th><th>Severity</th>"
                     "<th>What</th><th>Machine</th></tr>\n", p.incidents.size());
  for (const auto& i : p.incidents) {
    out += fmt::format("<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>\n", FormatTimeUtc(i.time),
                       HtmlEscape(i.kind), HtmlEscape(i.severity), HtmlEscape(i.message), HtmlEscape(i.host));
  }
  out += fmt::format("</table>\n<h2>Burn-ins ({})</h2>\n<table><tr><th>Finished (UTC)</th><th>Level</th>"
                     "<th>Outcome</th><th>Verdict</th><th>Score</th><th>Rates</th><th>Machine</th></tr>\n",
                     p.burnins.size());
  for (const auto& b : p.burnins) {
    out += fmt::format("<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>\n",
                       FormatTimeUtc(b.finished), b.level, HtmlEscape(b.outcome), HtmlEscape(b.verdict), b.score,
                       HtmlEscape(b.rates.dump()), HtmlEscape(b.host));
  }
  out += fmt::format("</table>\n<h2>State history ({})</h2>\n<table><tr><th>Time (UTC)</th><th>From</th>"
                     "<th>To</th><th>Why</th><th>Machine</th></tr>\n", p.states.size());
  for (const auto& s : p.states) {
    out += fmt::format("<tr><td>{}</td><td>{}</td><td>{}</td><td>{}{}</td><td>{}</td></tr>\n", FormatTimeUtc(s.time),
                       HtmlEscape(s.from), HtmlEscape(s.to), HtmlEscape(s.reason), s.shadow ? " (shadow: not carried out)" : "",
                       HtmlEscape(s.host));
  }
  out += "</table>\n</body></html>\n";
  return out;
}

Result<Passport> LoadPassport(store::Store& db, const store::GpuRecord& gpu, const std::string& host) {
  store::EventFilter filter;
  filter.gpu_uuid = gpu.uuid;
  filter.kind_prefix = "gpu.";
  filter.limit = 100000;
  auto events = db.ListEvents(filter);
  if (!events.ok()) return events.status();
  store::BurnInFilter burnins_of;
  burnins_of.gpu_uuid = gpu.uuid;
  burnins_of.limit = 100000;
  auto burnins = db.ListBurnInRuns(burnins_of);
  if (!burnins.ok()) return burnins.status();
  auto transitions = db.ListHealthTransitions(gpu.uuid);
  if (!transitions.ok()) return transitions.status();
  auto minutes = db.CountSampledMinutes(gpu.uuid);
  if (!minutes.ok()) return minutes.status();
  Passport p = BuildPassport(gpu, *events, *burnins, *transitions, *minutes, host);
  auto imports = db.ListPassportImports(p.key);
  if (!imports.ok()) return imports.status();
  for (const store::PassportImportRecord& r : *imports) {
    auto parsed = PassportFromJson(nlohmann::json::parse(r.passport_json, nullptr, false));
    if (!parsed.ok()) continue;  // checked when imported; a damaged row is left out
    auto merged = MergePassport(std::move(p), *parsed);
    if (!merged.ok()) return merged.status();
    p = std::move(merged).value();
  }
  return p;
}

}  // namespace gpuherd::alerts
