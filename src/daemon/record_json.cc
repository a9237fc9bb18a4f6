#include "daemon/record_json.h"

namespace gpuherd::daemon {

using nlohmann::json;

json EventJson(const store::EventRecord& e) {
  json data = json::parse(e.data_json, nullptr, /*allow_exceptions=*/false);
  if (data.is_discarded()) data = json::object();
  return {{"id", e.id},
          {"time", e.time},
          {"kind", e.kind},
          {"severity", store::SeverityName(e.severity)},
          {"gpu_uuid", e.gpu_uuid},
          {"message", e.message},
          {"data", data}};
}

json RollupJson(const store::RollupRecord& r) {
  json stats = json::object();
  for (int m = 0; m < store::kRollupMetricCount; ++m) {
    const auto& stat = r.stats[m];
    if (!stat) continue;
    stats[store::RollupMetricName(static_cast<store::RollupMetric>(m))] = {
        {"min", stat->min}, {"mean", stat->mean}, {"max", stat->max}};
  }
  json j = {{"minute", r.minute},       {"samples", r.samples},
            {"failures", r.failures},   {"stats", stats},
            {"xid_count", r.xid_count}, {"throttle_reasons_seen", r.throttle_reasons_seen}};
  if (r.pcie_replay_count) j["pcie_replay_count"] = *r.pcie_replay_count;
  if (r.ecc_sbe) j["ecc_sbe"] = *r.ecc_sbe;
  if (r.ecc_dbe) j["ecc_dbe"] = *r.ecc_dbe;
  return j;
}

json AlertJson(const store::AlertRecord& r) {
  return {{"rule", r.rule},
          {"subject", r.subject},
          {"gpu", r.gpu_index >= 0 ? json(r.gpu_index) : json(nullptr)},
          {"state", r.state},
          {"pending_since", r.pending_since},
          {"fired_at", r.fired_at},
          {"resolved_at", r.resolved_at},
          {"value", r.value},
          {"severity", store::SeverityName(r.severity)},
          {"action", r.action},
          {"summary", r.summary}};
}

}  // namespace gpuherd::daemon
