// /v1/gpus: the fleet, one GPU, its readings (ring and per-minute rollups),
// every GPU's recent history for the dashboard's charts, and drains.
#include <algorithm>
#include <cmath>
#include <map>

#include "alerts/passport.h"
#include "api/gpus.h"
#include "gpu/json.h"
#include "daemon/routes/routes.h"

namespace gpuherd::daemon::routes {
namespace {

using nlohmann::json;

constexpr int64_t kMaxHistorySeconds = 7 * 24 * 3600;
// Up to an hour the readings themselves; longer windows come from the stored
// per-minute rollups, in about kHistoryPoints buckets of whole minutes.
constexpr int64_t kReadingsHistorySeconds = 3600;
constexpr int64_t kHistoryPoints = 360;
// Year 9999 in milliseconds: far beyond any clock, far below overflow.
constexpr int64_t kMaxTimeMs = int64_t{253402300799000};

// What the views add to the readings: each GPU's jobs and latest burn-in.
struct Extras {
  std::vector<std::vector<api::GpuJob>> jobs;
  std::map<std::string, store::BurnInRecord> health;  // uuid → latest burn-in
};

Extras ExtrasOf(const RouteContext& ctx) {
  Extras extras;
  if (ctx.jobs) extras.jobs = ctx.jobs->JobsByGpu();
  // Unreadable burn-ins leave the GPUs unscored; the store logs its own errors.
  if (auto latest = ctx.state->store->LatestBurnInPerGpu(); latest.ok()) {
    for (store::BurnInRecord& r : *latest) extras.health[r.gpu_uuid] = std::move(r);
  }
  return extras;
}

api::Gpu ViewOf(const RouteContext& ctx, int position, const Extras& extras) {
  api::Gpu g = ctx.state->View(position);
  const std::string& uuid = g.info.uuid;
  if (auto drain = ctx.jobs ? ctx.jobs->DrainOf(uuid) : std::nullopt) {
    api::MarkDrained(g, drain->reason, queue::DrainOriginName(drain->origin));
  }
  if (auto it = ctx.state->failure_risk.find(uuid); it != ctx.state->failure_risk.end()) g.failure_risk = it->second;
  if (auto it = extras.health.find(uuid); it != extras.health.end()) api::SetHealth(g, it->second);
  if (static_cast<size_t>(position) < extras.jobs.size()) g.jobs = extras.jobs[position];
  if (ctx.self_heal) g.health_state = ctx.self_heal->HealthState(position);
  return g;
}

// GET /v1/gpus/{id}/passport: the card's passport (alerts/passport.h), as
// `gpuherd passport GPU --json` prints it, for the dashboard's GPU card.
http::Response Passport(const RouteContext& ctx, int position) {
  auto record = ctx.state->store->GetGpu(ctx.state->fleet.gpus[position].uuid);
  if (!record.ok()) return StatusResponse(record.status());
  if (!*record) return http::ErrorResponse(404, "GPU " + ctx.state->fleet.gpus[position].uuid + " is not stored yet");
  auto passport = alerts::LoadPassport(*ctx.state->store, **record, ctx.state->hostname);
  if (!passport.ok()) return StatusResponse(passport.status());
  return JsonResponse(alerts::PassportToJson(*passport));
}

http::Response Fleet(const RouteContext& ctx) {
  api::Fleet fleet = ctx.state->Fleet();
  const Extras extras = ExtrasOf(ctx);
  for (size_t i = 0; i < fleet.gpus.size(); ++i) fleet.gpus[i] = ViewOf(ctx, static_cast<int>(i), extras);
  return JsonResponse(fleet);
}

http::Response Samples(const RouteContext& ctx, int position, const http::Request& request) {
  auto n = QueryInt(request, "n", 60, 1, 1000000);
  if (!n.ok()) return StatusResponse(n.status());
  json samples = ctx.state->telemetry->Recent(position, static_cast<size_t>(*n));
  return JsonResponse({{"uuid", ctx.state->fleet.gpus[position].uuid}, {"samples", samples}});
}

http::Response Rollups(const RouteContext& ctx, int position, const http::Request& request) {
  auto from = QueryInt(request, "from", 0, 0, kMaxTimeMs);
  if (!from.ok()) return StatusResponse(from.status());
  auto to = QueryInt(request, "to", kMaxTimeMs, 0, kMaxTimeMs);
  if (!to.ok()) return StatusResponse(to.status());
  auto limit = QueryInt(request, "limit", 1440, 1, 100000);
  if (!limit.ok()) return StatusResponse(limit.status());
  const std::string& uuid = ctx.state->fleet.gpus[position].uuid;
  auto rows = ctx.state->store->QueryRollups(uuid, *from, *to, static_cast<int>(*limit));
  if (!rows.ok()) return StatusResponse(rows.status());
  json out = json::array();
  for (const auto& r : *rows) out.push_back(api::RollupJson(r));
  return JsonResponse({{"uuid", uuid}, {"rollups", out}});
}

http::Response Drain(const RouteContext& ctx, int position, bool drain, const http::Request& request,
                     const Caller& caller) {
  std::string reason;
  auto body = BodyJson(request, "a JSON object like {\"reason\": \"fan noise\"}", json::object());
  if (!body.ok()) return StatusResponse(body.status());
  if (!body->is_object()) return http::ErrorResponse(400, "body must be a JSON object like {\"reason\": \"fan noise\"}");
  if (body->contains("reason")) {
    if (!(*body)["reason"].is_string()) return http::ErrorResponse(400, "reason must be a string");
    reason = (*body)["reason"].get<std::string>();
  }
  Status s = drain ? ctx.jobs->Drain(position, reason, caller) : ctx.jobs->Undrain(position, caller);
  return s.ok() ? JsonResponse({{"gpu", position}, {"drained", drain}}) : StatusResponse(s);
}

// One decimal is all a chart shows; it keeps an hour of 8 GPUs near 200 KB.
json Rounded(double v) { return std::round(v * 10.0) / 10.0; }
json Value(const std::optional<double>& v) { return v ? Rounded(*v) : json(nullptr); }

// One GPU's series as columns; each reading appends one row.
struct Columns {
  json time = json::array(), util = json::array(), mem = json::array(), temp = json::array(),
       power = json::array();
  void Add(TimeMs t, json u, json m, json c, json p) {
    time.push_back(t);
    util.push_back(std::move(u));
    mem.push_back(std::move(m));
    temp.push_back(std::move(c));
    power.push_back(std::move(p));
  }
  // The series of `info`, as /v1/gpus/history lists each GPU.
  json ToJson(const gpu::GpuInfo& info) && {
    return {{"index", info.index},
            {"uuid", info.uuid},
            {"time", std::move(time)},
            {"gpu_util_pct", std::move(util)},
            {"mem_used_pct", std::move(mem)},
            {"temp_c", std::move(temp)},
            {"power_w", std::move(power)}};
  }
};

// A mean of stored MiB as % of the card's memory; null when the card's size is unknown.
json MemPct(double used_mib, const gpu::GpuInfo& info) {
  if (info.memory_total_bytes == 0) return nullptr;
  return Rounded(used_mib * 1048576.0 * 100.0 / static_cast<double>(info.memory_total_bytes));
}

}  // namespace

// A long window from the per-minute rollups: each bucket of `step` holds the
// mean of its minutes' means (memory as % of the card); a bucket without a
// stored minute (the daemon was down, the GPU lost) is absent, not zero.
http::Response AnswerLongHistory(const LongHistory& inputs, store::Store& reader) {
  const TimeMs now = inputs.now;
  const int64_t seconds = inputs.seconds;
  const DurationMs step = std::max<int64_t>(1, seconds / kHistoryPoints / 60) * 60 * 1000;
  const TimeMs from = (now - seconds * 1000) / step * step;
  json gpus = json::array();
  for (const gpu::GpuInfo& info : inputs.gpus) {
    Columns c;
    // Unreadable minutes leave the GPU's columns empty; the store logs its own errors.
    auto buckets = reader.QueryRollupBuckets(info.uuid, from, now, step);
    if (buckets.ok()) {
      for (const store::Store::RollupBucket& b : *buckets) {
        auto mean = [&](store::RollupMetric m) { return Value(b.means[static_cast<int>(m)]); };
        const auto& used = b.means[static_cast<int>(store::RollupMetric::kMemUsedMib)];
        json mem = used ? MemPct(*used, info) : json(nullptr);
        c.Add(b.start + step / 2, mean(store::RollupMetric::kGpuUtil), mem, mean(store::RollupMetric::kTempC),
              mean(store::RollupMetric::kPowerW));
      }
    }
    gpus.push_back(std::move(c).ToJson(info));
  }
  return JsonResponse({{"now", now}, {"from", from}, {"interval_ms", step}, {"source", "rollups"}, {"gpus", std::move(gpus)}});
}

std::optional<int64_t> LongHistorySeconds(const http::Request& request) {
  if (request.path != "/v1/gpus/history" || !IsRead(request)) return std::nullopt;
  auto seconds = QueryInt(request, "seconds", 3600, 1, kMaxHistorySeconds);
  if (!seconds.ok() || *seconds <= kReadingsHistorySeconds) return std::nullopt;  // the loop answers
  return *seconds;
}

LongHistory LongHistoryInputs(const DaemonState& state, int64_t seconds) {
  return LongHistory{state.clock->Now(), seconds, state.fleet.gpus};
}

namespace {

http::Response GpuHistory(const DaemonState& state, const http::Request& request) {
  auto seconds = QueryInt(request, "seconds", 3600, 1, kMaxHistorySeconds);
  if (!seconds.ok()) return StatusResponse(seconds.status());
  // The daemon answers these off the loop (LongHistorySeconds); this path
  // serves callers of Handle() alone.
  if (*seconds > kReadingsHistorySeconds) return AnswerLongHistory(LongHistoryInputs(state, *seconds), *state.store);
  // Bounded so that *since + 1 cannot overflow; a time after now selects nothing.
  auto since = QueryInt(request, "since", 0, 0, kMaxTimeMs);
  if (!since.ok()) return StatusResponse(since.status());
  const TimeMs now = state.clock->Now();
  const TimeMs window_start = now - *seconds * 1000;
  const TimeMs from = std::max(window_start, *since + 1);
  const DurationMs interval = std::max<DurationMs>(state.sample_interval, 1);
  // Readings lie on a fixed grid, so the window holds at most this many.
  const size_t wanted = static_cast<size_t>(std::max<int64_t>(0, now - from) / interval + 2);

  json gpus = json::array();
  for (size_t i = 0; i < state.fleet.gpus.size(); ++i) {
    const gpu::GpuInfo& info = state.fleet.gpus[i];
    std::vector<gpu::GpuSample> recent = state.telemetry->Recent(static_cast<int>(i), wanted);
    Columns c;
    // A ring that starts well after the window's start (the daemon restarted
    // within the hour) is preceded by the stored minutes' means.
    const TimeMs ring_start = recent.empty() ? now : recent.front().time;
    if (*since == 0 && ring_start - from > 2 * interval) {
      auto rollups = state.store->QueryRollups(info.uuid, from - 60 * 1000, ring_start, 1440);
      if (rollups.ok()) {
        for (const store::RollupRecord& r : *rollups) {
          const TimeMs t = r.minute + 30 * 1000;  // the minute's middle
          if (t < from || t >= ring_start) continue;
          auto mean = [&](store::RollupMetric m) {
            const auto& stat = r.stat(m);
            return stat ? Rounded(stat->mean) : json(nullptr);
          };
          const auto& used = r.stat(store::RollupMetric::kMemUsedMib);
          json mem = used ? MemPct(used->mean, info) : json(nullptr);
          c.Add(t, mean(store::RollupMetric::kGpuUtil), mem, mean(store::RollupMetric::kTempC),
                mean(store::RollupMetric::kPowerW));
        }
      }
    }
    for (const gpu::GpuSample& s : recent) {
      if (s.time < from) continue;
      json mem = nullptr;
      const uint64_t total = s.mem_total_bytes.value_or(info.memory_total_bytes);
      if (s.mem_used_bytes && total > 0) mem = Rounded(static_cast<double>(*s.mem_used_bytes) * 100.0 / total);
      c.Add(s.time, Value(s.gpu_util_pct), mem, Value(s.temp_c), Value(s.power_w));
    }
    gpus.push_back(std::move(c).ToJson(info));
  }
  return JsonResponse(
      {{"now", now}, {"from", from}, {"interval_ms", interval}, {"source", "readings"}, {"gpus", std::move(gpus)}});
}

}  // namespace

http::Response GpuRoutes(RouteContext& ctx, const Parts& parts, const http::Request& request, const Caller& caller) {
  if (parts.size() == 2) return IsRead(request) ? Fleet(ctx) : MethodNotAllowed("GET", "/v1/gpus");
  if (parts.size() == 3 && parts[2] == "history") {
    return IsRead(request) ? GpuHistory(*ctx.state, request) : MethodNotAllowed("GET", "/v1/gpus/history");
  }
  if (parts.size() > 4) return http::ErrorResponse(404, "no such endpoint " + http::Excerpt(request.path));
  auto position = FindGpu(*ctx.state, parts[2]);
  if (!position.ok()) return StatusResponse(position.status());
  if (parts.size() == 3) {
    return IsRead(request) ? JsonResponse(ViewOf(ctx, *position, ExtrasOf(ctx))) : MethodNotAllowed("GET", "/v1/gpus/{id}");
  }
  const std::string& what = parts[3];
  if (what == "samples" || what == "rollups") {
    if (!IsRead(request)) return MethodNotAllowed("GET", "/v1/gpus/{id}/" + what);
    return what == "samples" ? Samples(ctx, *position, request) : Rollups(ctx, *position, request);
  }
  if (what == "passport") {
    return IsRead(request) ? Passport(ctx, *position) : MethodNotAllowed("GET", "/v1/gpus/{id}/passport");
  }
  if (what == "drain" || what == "undrain") {
    if (request.method != "POST") return MethodNotAllowed("POST", "/v1/gpus/{id}/" + what);
    return Drain(ctx, *position, what == "drain", request, caller);
  }
  return http::ErrorResponse(404, "no such endpoint " + http::Excerpt(request.path) +
                                      "; a GPU has /samples, /rollups, /passport, /drain and /undrain");
}

}  // namespace gpuherd::daemon::routes
