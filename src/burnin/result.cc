#include "burnin/result.h"

#include <cinttypes>
#include <cstdio>
#include <cstdlib>

namespace gpuherd::burnin {
namespace {

using nlohmann::json;

// Names of an enum, in its order; Parse looks them up.
template <typename Enum, size_t N>
Result<Enum> ParseName(std::string_view name, const char* const (&names)[N], const char* what) {
  std::string known;
  for (size_t i = 0; i < N; ++i) {
    if (name == names[i]) return static_cast<Enum>(i);
    known += (i ? ", " : "") + std::string(names[i]);
  }
  return InvalidArgument("unknown " + std::string(what) + " \"" + std::string(name) +
                         "\"; known: " + known);
}

constexpr const char* kRunOutcomeNames[] = {"passed", "faults_found", "could_not_run", "aborted"};
constexpr const char* kCheckOutcomeNames[] = {"pass", "warn", "fail", "skipped", "error"};
constexpr const char* kVerdictNames[] = {"healthy", "degraded", "unhealthy", "unknown"};

std::string Hex(uint64_t value, int digits) {
  char buf[24];
  std::snprintf(buf, sizeof(buf), "0x%0*" PRIx64, digits, value);
  return buf;
}

void PutOptional(json& j, const char* key, const std::optional<double>& value) {
  if (value) j[key] = *value;
}
void PutOptional(json& j, const char* key, const std::optional<int>& value) {
  if (value) j[key] = *value;
}

json RatesJson(const Rates& r) {
  json j = json::object();
  PutOptional(j, "fp32_tflops", r.fp32_tflops);
  PutOptional(j, "fp16_tflops", r.fp16_tflops);
  PutOptional(j, "bf16_tflops", r.bf16_tflops);
  PutOptional(j, "fp64_tflops", r.fp64_tflops);
  PutOptional(j, "mem_bandwidth_gbs", r.mem_bandwidth_gbs);
  PutOptional(j, "memtest_gbs", r.memtest_gbs);
  PutOptional(j, "h2d_gbs", r.h2d_gbs);
  PutOptional(j, "d2h_gbs", r.d2h_gbs);
  PutOptional(j, "d2d_gbs", r.d2d_gbs);
  return j;
}

json ThermalJson(const ThermalSummary& t) {
  json j = json::object();
  PutOptional(j, "idle_temp_c", t.idle_temp_c);
  PutOptional(j, "max_temp_c", t.max_temp_c);
  PutOptional(j, "time_to_steady_s", t.time_to_steady_s);
  PutOptional(j, "max_slope_c_per_min", t.max_slope_c_per_min);
  j["throttled_fraction"] = t.throttled_fraction;
  PutOptional(j, "max_power_w", t.max_power_w);
  return j;
}

json HealthJson(const Health& h) {
  json j = {{"score", h.score},
            {"verdict", VerdictName(h.verdict)},
            {"disqualified", h.disqualified},
            {"fleet_reference_runs", h.fleet_reference_runs},
            {"factors", json::array()}};
  for (const HealthFactor& f : h.factors) {
    j["factors"].push_back({{"name", f.name}, {"penalty", f.penalty}, {"detail", f.detail}});
  }
  PutOptional(j, "ratio_to_fleet", h.ratio_to_fleet);
  PutOptional(j, "ratio_to_nominal", h.ratio_to_nominal);
  return j;
}

// Reads fields of one JSON object; the first problem is kept, naming the
// field by its path ("checks[3].outcome").
class Reader {
 public:
  Reader(const json& j, std::string path, Status* status)
      : j_(j), path_(std::move(path)), status_(status) {
    if (!j_.is_object()) Fail(path_.empty() ? "the record" : path_, "must be an object");
  }

  bool Has(const char* key) const { return j_.is_object() && j_.contains(key) && !j_[key].is_null(); }
  std::string Path(const char* key) const { return path_.empty() ? key : path_ + "." + key; }
  const json& At(const char* key) const { return j_[key]; }

  template <typename T>
  void Get(const char* key, T* out, bool required = false) {
    if (!status_->ok()) return;
    if (!Has(key)) {
      if (required) Fail(Path(key), "is missing");
      return;
    }
    const json& v = j_[key];
    bool fits;
    if constexpr (std::is_same_v<T, bool>) {
      fits = v.is_boolean();
    } else if constexpr (std::is_same_v<T, std::string>) {
      fits = v.is_string();
    } else if constexpr (std::is_integral_v<T>) {
      fits = v.is_number_integer() && (std::is_signed_v<T> || v.is_number_unsigned() ||
                                        v.template get<int64_t>() >= 0);
    } else {
      fits = v.is_number();
    }
    if (!fits) {
      Fail(Path(key), "has the wrong type (" + std::string(v.type_name()) + ")");
      return;
    }
    *out = v.template get<T>();
  }

  template <typename T>
  void Get(const char* key, std::optional<T>* out) {
    if (!Has(key)) return;
    T value{};
    Get(key, &value);
    if (status_->ok()) *out = value;
  }

  // A 0x-hexadecimal string.
  void GetHex(const char* key, uint64_t* out) {
    std::string text;
    Get(key, &text);
    if (!status_->ok() || !Has(key)) return;
    char* end = nullptr;
    *out = std::strtoull(text.c_str(), &end, 16);
    if (text.size() < 3 || text.compare(0, 2, "0x") != 0 || *end != '\0') {
      Fail(Path(key), "must be a 0x hexadecimal string, not \"" + text + "\"");
    }
  }
  void GetHex(const char* key, uint32_t* out) {
    uint64_t wide = 0;
    GetHex(key, &wide);
    if (wide > 0xFFFFFFFFull) Fail(Path(key), "does not fit 32 bits");
    *out = static_cast<uint32_t>(wide);
  }

  template <typename Enum>
  void GetEnum(const char* key, Enum* out, Result<Enum> (*parse)(std::string_view)) {
    std::string text;
    Get(key, &text, true);
    if (!status_->ok()) return;
    auto parsed = parse(text);
    if (!parsed.ok()) {
      Fail(Path(key), parsed.status().message());
      return;
    }
    *out = *parsed;
  }

  // Calls `each(reader_of_element)` for every element of the array at `key`.
  template <typename F>
  void ForEach(const char* key, F each) {
    if (!status_->ok() || !Has(key)) return;
    const json& array = j_[key];
    if (!array.is_array()) {
      Fail(Path(key), "must be an array");
      return;
    }
    for (size_t i = 0; i < array.size() && status_->ok(); ++i) {
      Reader element(array[i], Path(key) + "[" + std::to_string(i) + "]", status_);
      if (status_->ok()) each(element);
    }
  }

  Reader Object(const char* key) const {
    static const json kEmpty = json::object();
    return Reader(Has(key) ? j_[key] : kEmpty, Path(key), status_);
  }

  void Fail(const std::string& field, const std::string& what) {
    if (status_->ok()) *status_ = Status(Code::kDataLoss, "burn-in record: " + field + " " + what);
  }

 private:
  const json& j_;
  std::string path_;
  Status* status_;
};

}  // namespace

const char* RunOutcomeName(RunOutcome outcome) {
  return kRunOutcomeNames[static_cast<int>(outcome)];
}
Result<RunOutcome> ParseRunOutcome(std::string_view name) {
  return ParseName<RunOutcome>(name, kRunOutcomeNames, "run outcome");
}
const char* CheckOutcomeName(CheckOutcome outcome) {
  return kCheckOutcomeNames[static_cast<int>(outcome)];
}
Result<CheckOutcome> ParseCheckOutcome(std::string_view name) {
  return ParseName<CheckOutcome>(name, kCheckOutcomeNames, "check outcome");
}
const char* VerdictName(Verdict verdict) { return kVerdictNames[static_cast<int>(verdict)]; }
Result<Verdict> ParseVerdict(std::string_view name) {
  return ParseName<Verdict>(name, kVerdictNames, "verdict");
}

json ToJson(const BurnInRun& run) {
  json j = {{"version", kBurnInRecordVersion},
            {"gpu_uuid", run.gpu_uuid},
            {"gpu_name", run.gpu_name},
            {"pci_bus_id", run.pci_bus_id},
            {"serial", run.serial},
            {"gpu_index", run.gpu_index},
            {"level", run.level},
            {"simulated", run.simulated},
            {"started", run.started},
            {"finished", run.finished},
            {"stress_duration_ms", run.stress_duration},
            {"outcome", RunOutcomeName(run.outcome)},
            {"outcome_reason", run.outcome_reason},
            {"memory_errors", run.memory_errors},
            {"compute_errors", run.compute_errors},
            {"nan_count", run.nan_count},
            {"job_id", run.job_id},
            {"checks", json::array()},
            {"memory_error_samples", json::array()},
            {"curve", json::array()}};
  if (run.id != 0) j["id"] = run.id;
  for (const Check& c : run.checks) {
    json check = {{"name", c.name}, {"level", c.level}, {"outcome", CheckOutcomeName(c.outcome)}};
    if (!c.reason.empty()) check["reason"] = c.reason;
    if (!c.message.empty()) check["message"] = c.message;
    if (!c.values.empty()) check["values"] = c.values;
    j["checks"].push_back(std::move(check));
  }
  for (const MemErrorRecord& e : run.memory_error_samples) {
    j["memory_error_samples"].push_back({{"pattern", e.pattern},
                                         {"address", Hex(e.address, 12)},
                                         {"offset", e.offset},
                                         {"expected", Hex(e.expected, 8)},
                                         {"read", Hex(e.read, 8)},
                                         {"xor", Hex(e.xor_bits, 8)}});
  }
  j["rates"] = RatesJson(run.rates);
  j["thermal"] = ThermalJson(run.thermal);
  for (const TempPoint& p : run.curve) {
    json point = {{"t", p.t}};
    PutOptional(point, "temp_c", p.temp_c);
    PutOptional(point, "power_w", p.power_w);
    PutOptional(point, "sm_clock_mhz", p.sm_clock_mhz);
    if (p.throttle_reasons != 0) point["throttle"] = p.throttle_reasons;
    j["curve"].push_back(std::move(point));
  }
  j["health"] = HealthJson(run.health);
  return j;
}

Result<BurnInRun> BurnInRunFromJson(const json& j) {
  Status status;
  BurnInRun run;
  Reader r(j, "", &status);
  int version = 0;
  r.Get("version", &version, true);
  if (status.ok() && (version < 1 || version > kBurnInRecordVersion)) {
    return Status(Code::kDataLoss, "burn-in record: version " + std::to_string(version) +
                                       " is not one this gpuherd reads (1-" +
                                       std::to_string(kBurnInRecordVersion) + "); upgrade gpuherd");
  }
  r.Get("id", &run.id);
  r.Get("gpu_uuid", &run.gpu_uuid, true);
  r.Get("gpu_name", &run.gpu_name);
  r.Get("pci_bus_id", &run.pci_bus_id);
  r.Get("serial", &run.serial);
  r.Get("gpu_index", &run.gpu_index);
  r.Get("level", &run.level, true);
  r.Get("simulated", &run.simulated);
  r.Get("started", &run.started);
  r.Get("finished", &run.finished);
  r.Get("stress_duration_ms", &run.stress_duration);
  r.GetEnum("outcome", &run.outcome, &ParseRunOutcome);
  r.Get("outcome_reason", &run.outcome_reason);
  r.Get("memory_errors", &run.memory_errors);
  r.Get("compute_errors", &run.compute_errors);
  r.Get("nan_count", &run.nan_count);
  r.Get("job_id", &run.job_id);
  r.ForEach("checks", [&](Reader& c) {
    Check check;
    c.Get("name", &check.name, true);
    c.Get("level", &check.level);
    c.GetEnum("outcome", &check.outcome, &ParseCheckOutcome);
    c.Get("reason", &check.reason);
    c.Get("message", &check.message);
    if (c.Has("values")) {
      const json& values = c.At("values");
      if (!values.is_object()) return c.Fail(c.Path("values"), "must be an object");
      for (auto it = values.begin(); it != values.end(); ++it) {
        if (!it->is_number()) return c.Fail(c.Path("values") + "." + it.key(), "must be a number");
        check.values[it.key()] = it->get<double>();
      }
    }
    run.checks.push_back(std::move(check));
  });
  r.ForEach("memory_error_samples", [&](Reader& e) {
    MemErrorRecord record;
    e.Get("pattern", &record.pattern);
    e.GetHex("address", &record.address);
    e.Get("offset", &record.offset);
    e.GetHex("expected", &record.expected);
    e.GetHex("read", &record.read);
    e.GetHex("xor", &record.xor_bits);
    run.memory_error_samples.push_back(record);
  });
  Reader rates = r.Object("rates");
  rates.Get("fp32_tflops", &run.rates.fp32_tflops);
  rates.Get("fp16_tflops", &run.rates.fp16_tflops);
  rates.Get("bf16_tflops", &run.rates.bf16_tflops);
  rates.Get("fp64_tflops", &run.rates.fp64_tflops);
  rates.Get("mem_bandwidth_gbs", &run.rates.mem_bandwidth_gbs);
  rates.Get("memtest_gbs", &run.rates.memtest_gbs);
  rates.Get("h2d_gbs", &run.rates.h2d_gbs);
  rates.Get("d2h_gbs", &run.rates.d2h_gbs);
  rates.Get("d2d_gbs", &run.rates.d2d_gbs);
  Reader thermal = r.Object("thermal");
  thermal.Get("idle_temp_c", &run.thermal.idle_temp_c);
  thermal.Get("max_temp_c", &run.thermal.max_temp_c);
  thermal.Get("time_to_steady_s", &run.thermal.time_to_steady_s);
  thermal.Get("max_slope_c_per_min", &run.thermal.max_slope_c_per_min);
  thermal.Get("throttled_fraction", &run.thermal.throttled_fraction);
  thermal.Get("max_power_w", &run.thermal.max_power_w);
  r.ForEach("curve", [&](Reader& p) {
    TempPoint point;
    p.Get("t", &point.t, true);
    p.Get("temp_c", &point.temp_c);
    p.Get("power_w", &point.power_w);
    p.Get("sm_clock_mhz", &point.sm_clock_mhz);
    p.Get("throttle", &point.throttle_reasons);
    run.curve.push_back(point);
  });
  Reader health = r.Object("health");
  health.Get("score", &run.health.score);
  if (health.Has("verdict")) health.GetEnum("verdict", &run.health.verdict, &ParseVerdict);
  health.Get("disqualified", &run.health.disqualified);
  health.Get("fleet_reference_runs", &run.health.fleet_reference_runs);
  health.Get("ratio_to_fleet", &run.health.ratio_to_fleet);
  health.Get("ratio_to_nominal", &run.health.ratio_to_nominal);
  health.ForEach("factors", [&](Reader& f) {
    HealthFactor factor;
    f.Get("name", &factor.name, true);
    f.Get("penalty", &factor.penalty);
    f.Get("detail", &factor.detail);
    run.health.factors.push_back(std::move(factor));
  });
  if (!status.ok()) return status;
  return run;
}

}  // namespace gpuherd::burnin
