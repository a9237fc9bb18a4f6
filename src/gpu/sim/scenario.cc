#include "gpu/sim/scenario.h"

#include <charconv>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

#include <yaml-cpp/yaml.h>

#include "core/yaml.h"
#include "gpu/types.h"

namespace gpuherd::gpu::sim {
namespace {

constexpr int kMaxFleetSize = 65536;

struct KindInfo {
  FaultKind kind;
  const char* name;
  // Keys a fault of this kind takes besides at, gpu and kind.
  std::vector<std::string> keys;
};

const std::vector<KindInfo>& Kinds() {
  static const std::vector<KindInfo> kKinds = {
      {FaultKind::kOverheat, "overheat", {"temp", "duration"}},
      {FaultKind::kTempSlope, "temp_slope", {"rate", "duration"}},
      {FaultKind::kEccSbe, "ecc_sbe", {"count", "rate", "duration"}},
      {FaultKind::kEccDbe, "ecc_dbe", {}},
      {FaultKind::kPcieDownTrain, "pcie_downtrain", {"width", "gen", "duration"}},
      {FaultKind::kPcieReplay, "pcie_replay", {"count", "rate", "duration"}},
      {FaultKind::kXid, "xid", {"xid"}},
      {FaultKind::kFanFailure, "fan_failure", {"duration"}},
      {FaultKind::kThrottle, "throttle", {"reason", "duration"}},
      {FaultKind::kUnresponsive, "unresponsive", {"duration"}},
      {FaultKind::kStuckBits, "stuck_bits", {"address", "mask", "value"}},
      {FaultKind::kComputeErrors, "compute_errors", {"count", "rate", "duration"}},
      {FaultKind::kNan, "nan", {"count", "rate", "duration"}},
      {FaultKind::kSlow, "slow", {"factor", "duration"}},
      {FaultKind::kFanWear, "fan_wear", {"peak", "duration", "fades"}},
      {FaultKind::kSbeAccelerating, "sbe_accelerating", {"rate", "doubling", "duration", "fades"}},
      {FaultKind::kReplayAccelerating, "replay_accelerating",
       {"rate", "doubling", "duration", "fades"}},
      {FaultKind::kClockUnstable, "clock_unstable", {"amount", "duration", "fades"}},
      {FaultKind::kTransientDrop, "transient_drop", {"count"}},
      {FaultKind::kUnderclock, "underclock", {"factor", "duration"}},
  };
  return kKinds;
}

const std::vector<std::pair<std::string, uint64_t>>& ThrottleReasons() {
  static const std::vector<std::pair<std::string, uint64_t>> kReasons = {
      {"sw_power_cap", throttle::kSwPowerCap},
      {"hw_slowdown", throttle::kHwSlowdown},
      {"sw_thermal", throttle::kSwThermalSlowdown},
      {"hw_thermal", throttle::kHwThermalSlowdown},
      {"hw_power_brake", throttle::kHwPowerBrakeSlowdown},
  };
  return kReasons;
}

std::string Join(const std::vector<std::string>& items) {
  std::string out;
  for (const auto& item : items) {
    if (!out.empty()) out += ", ";
    out += item;
  }
  return out;
}

// Parses one scenario; every error carries "<source>:<line>: ".
class Parser {
 public:
  explicit Parser(std::string source) : reader_(source) { scenario_.source = std::move(source); }

  Result<Scenario> Parse(std::string_view text) {
    auto loaded = LoadYaml(text, scenario_.source);
    if (!loaded.ok()) return loaded.status();
    const YAML::Node root = *loaded;
    try {
      GPUHERD_RETURN_IF_ERROR(ParseRoot(root));
    } catch (const YAML::Exception& e) {
      // Only reached on yaml-cpp surprises; the checks above turn every known
      // problem into a Status first.
      return InvalidArgument(scenario_.source + ":" + std::to_string(e.mark.line + 1) + ": " +
                             e.msg);
    }
    return std::move(scenario_);
  }

 private:
  Status Error(const YAML::Node& node, const std::string& what) const { return reader_.Error(node, what); }

  Status CheckKeys(const YAML::Node& map, std::vector<std::string> allowed, std::string where) const {
    return reader_.CheckKeys(map, {std::move(where), std::move(allowed)});
  }

  Result<std::string> ScalarOf(const YAML::Node& node, const std::string& what) const {
    return reader_.Scalar(node, what);
  }

  Result<int64_t> IntOf(const YAML::Node& node, const std::string& what) const { return reader_.Int(node, what); }

  // A whole number >= 0, decimal or 0x-hexadecimal (addresses, bit masks).
  Result<uint64_t> UintOf(const YAML::Node& node, const std::string& what) const {
    auto text = ScalarOf(node, what);
    if (!text.ok()) return text.status();
    const std::string& s = *text;
    const bool hex = s.size() > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X');
    const char* begin = s.data() + (hex ? 2 : 0);
    uint64_t value = 0;
    auto [end, ec] = std::from_chars(begin, s.data() + s.size(), value, hex ? 16 : 10);
    if (ec != std::errc() || end != s.data() + s.size() || begin == end) {
      return Error(node, what + " must be a whole number >= 0 (decimal or 0x hex), not \"" + s +
                             "\"");
    }
    return value;
  }

  Result<double> DoubleOf(const YAML::Node& node, const std::string& what) const {
    return reader_.Double(node, what);
  }

  Result<DurationMs> DurationOf(const YAML::Node& node, const std::string& what) const {
    return reader_.Duration(node, what);
  }

  // "3/min", "0.5/s", "10/h"; a bare number is per minute.
  Result<double> RatePerMinOf(const YAML::Node& node, const std::string& what) const {
    auto text = ScalarOf(node, what);
    if (!text.ok()) return text.status();
    std::string s = *text;
    double scale = 1.0;
    size_t slash = s.find('/');
    if (slash != std::string::npos) {
      std::string unit = s.substr(slash + 1);
      if (unit == "min" || unit == "m") scale = 1.0;
      else if (unit == "s") scale = 60.0;
      else if (unit == "h") scale = 1.0 / 60.0;
      else scale = -1;
      s = s.substr(0, slash);
    }
    char* end = nullptr;
    double value = std::strtod(s.c_str(), &end);
    if (scale < 0 || s.empty() || end != s.c_str() + s.size() || !std::isfinite(value) ||
        value <= 0) {
      return Error(node, what + " \"" + *text +
                             "\" is not a rate; write a positive N/min, N/s or N/h (e.g. 3/min)");
    }
    return value * scale;
  }

  Status ParseRoot(const YAML::Node& root) {
    if (root.IsNull()) return Status::Ok();  // an empty file: no faults
    if (!root.IsMap()) {
      return Error(root, "a scenario must be a mapping with keys such as gpus: and faults:");
    }
    GPUHERD_RETURN_IF_ERROR(
        CheckKeys(root, {"description", "seed", "ambient", "gpus", "faults"}, "the scenario"));
    if (root["description"]) {
      auto d = ScalarOf(root["description"], "description");
      if (!d.ok()) return d.status();
      scenario_.description = *d;
    }
    if (root["seed"]) {
      auto seed = IntOf(root["seed"], "seed");
      if (!seed.ok()) return seed.status();
      if (*seed < 0) return Error(root["seed"], "seed must be zero or positive");
      scenario_.seed = static_cast<uint64_t>(*seed);
    }
    if (root["ambient"]) {
      auto ambient = DoubleOf(root["ambient"], "ambient");
      if (!ambient.ok()) return ambient.status();
      if (*ambient < 0 || *ambient > 60) {
        return Error(root["ambient"], "ambient (the inlet air in °C) must be between 0 and 60");
      }
      scenario_.ambient_c = *ambient;
    }
    if (root["gpus"]) GPUHERD_RETURN_IF_ERROR(ParseGpus(root["gpus"]));
    if (root["faults"]) GPUHERD_RETURN_IF_ERROR(ParseFaults(root["faults"]));
    return Status::Ok();
  }

  Status ParseGpus(const YAML::Node& gpus) {
    if (!gpus.IsSequence()) {
      return Error(gpus, "gpus must be a list such as [{model: h100-sxm, count: 4}]");
    }
    int total = 0;
    for (const YAML::Node& entry : gpus) {
      if (!entry.IsMap()) {
        return Error(entry, "each gpus entry must be a mapping such as {model: rtx3090, count: 2}");
      }
      GPUHERD_RETURN_IF_ERROR(
          CheckKeys(entry, {"model", "count", "thermal_scale"}, "a gpus entry"));
      GpuGroup group;
      group.line = YamlReader::Line(entry);
      if (!entry["model"]) return Error(entry, "a gpus entry needs model: (one of " +
                                                   KnownModelKeys() + ")");
      auto model = ScalarOf(entry["model"], "model");
      if (!model.ok()) return model.status();
      if (!FindModel(*model)) {
        return Error(entry["model"], "unknown GPU model \"" + *model + "\"; known models: " +
                                         KnownModelKeys());
      }
      group.model = *model;
      if (entry["count"]) {
        auto count = IntOf(entry["count"], "count");
        if (!count.ok()) return count.status();
        if (*count < 1 || *count > kMaxFleetSize) {
          return Error(entry["count"], "count must be between 1 and " +
                                           std::to_string(kMaxFleetSize));
        }
        group.count = static_cast<int>(*count);
      }
      if (entry["thermal_scale"]) {
        auto scale = DoubleOf(entry["thermal_scale"], "thermal_scale");
        if (!scale.ok()) return scale.status();
        if (*scale < 0.5 || *scale > 3) {
          return Error(entry["thermal_scale"],
                       "thermal_scale must be between 0.5 and 3 (1 = as new)");
        }
        group.thermal_scale = *scale;
      }
      total += group.count;
      if (total > kMaxFleetSize) {
        return Error(entry, "the fleet may have at most " + std::to_string(kMaxFleetSize) +
                                " GPUs");
      }
      scenario_.gpus.push_back(std::move(group));
    }
    return Status::Ok();
  }

  Status ParseFaults(const YAML::Node& faults) {
    if (!faults.IsSequence()) {
      return Error(faults, "faults must be a list such as [{at: 2m, gpu: 0, kind: xid, xid: 79}]");
    }
    const int fleet = ScenarioGpuCount(scenario_);
    for (const YAML::Node& entry : faults) {
      if (!entry.IsMap()) {
        return Error(entry, "each fault must be a mapping such as {at: 2m, gpu: 0, kind: xid, xid: 79}");
      }
      auto fault = ParseFault(entry, fleet);
      if (!fault.ok()) return fault.status();
      scenario_.faults.push_back(*fault);
    }
    return Status::Ok();
  }

  Result<Fault> ParseFault(const YAML::Node& entry, int fleet) const {
    Fault fault;
    fault.line = YamlReader::Line(entry);
    std::vector<std::string> kind_names;
    for (const auto& k : Kinds()) kind_names.push_back(k.name);
    if (!entry["kind"]) return Error(entry, "a fault needs kind: (one of " + Join(kind_names) + ")");
    auto kind_text = ScalarOf(entry["kind"], "kind");
    if (!kind_text.ok()) return kind_text.status();
    const KindInfo* info = nullptr;
    for (const auto& k : Kinds()) {
      if (*kind_text == k.name) info = &k;
    }
    if (!info) {
      return Error(entry["kind"], "unknown fault kind \"" + *kind_text + "\"; known kinds: " +
                                      Join(kind_names));
    }
    fault.kind = info->kind;
    const std::string where = std::string("a ") + info->name + " fault";

    std::vector<std::string> allowed = {"at", "gpu", "kind"};
    allowed.insert(allowed.end(), info->keys.begin(), info->keys.end());
    GPUHERD_RETURN_IF_ERROR(CheckKeys(entry, allowed, where));

    if (!entry["at"]) return Error(entry, where + " needs at: (when, after the start, e.g. 2m)");
    auto at = DurationOf(entry["at"], "at");
    if (!at.ok()) return at.status();
    fault.at = *at;

    if (!entry["gpu"]) return Error(entry, where + " needs gpu: (the GPU's index, from 0)");
    auto gpu = IntOf(entry["gpu"], "gpu");
    if (!gpu.ok()) return gpu.status();
    if (*gpu < 0 || *gpu >= kMaxFleetSize) return Error(entry["gpu"], "gpu must be an index from 0");
    if (fleet > 0 && *gpu >= fleet) {
      return Error(entry["gpu"], "gpu " + std::to_string(*gpu) + " is outside the fleet of " +
                                     std::to_string(fleet) + " GPUs (indices 0-" +
                                     std::to_string(fleet - 1) + ")");
    }
    fault.gpu = static_cast<int>(*gpu);

    if (entry["duration"]) {
      auto duration = DurationOf(entry["duration"], "duration");
      if (!duration.ok()) return duration.status();
      if (*duration <= 0) return Error(entry["duration"], "duration must be longer than 0");
      fault.duration = *duration;
    }

    switch (fault.kind) {
      case FaultKind::kOverheat:
        if (entry["temp"]) {
          auto temp = DoubleOf(entry["temp"], "temp");
          if (!temp.ok()) return temp.status();
          if (*temp < 40 || *temp > 130) {
            return Error(entry["temp"], "temp (°C) must be between 40 and 130");
          }
          fault.temp_c = *temp;
        }
        break;
      case FaultKind::kTempSlope: {
        if (!entry["rate"]) return Error(entry, where + " needs rate: (°C per minute, e.g. 3/min)");
        auto rate = RatePerMinOf(entry["rate"], "rate");
        if (!rate.ok()) return rate.status();
        fault.rate_per_min = *rate;
        break;
      }
      case FaultKind::kEccSbe:
      case FaultKind::kPcieReplay:
      case FaultKind::kComputeErrors:
      case FaultKind::kNan: {
        if (entry["count"].IsDefined() == entry["rate"].IsDefined()) {
          return Error(entry, where + " needs either count: (errors at once) or rate: "
                                      "(errors per minute, e.g. 2/min), not both");
        }
        if (entry["count"]) {
          auto count = IntOf(entry["count"], "count");
          if (!count.ok()) return count.status();
          if (*count < 1) return Error(entry["count"], "count must be at least 1");
          if (fault.duration) {
            return Error(entry["duration"], "duration applies to a rate:, not to a count:");
          }
          fault.count = static_cast<uint64_t>(*count);
        } else {
          auto rate = RatePerMinOf(entry["rate"], "rate");
          if (!rate.ok()) return rate.status();
          fault.rate_per_min = *rate;
        }
        break;
      }
      case FaultKind::kPcieDownTrain: {
        if (!entry["width"] && !entry["gen"]) {
          return Error(entry, where + " needs width: (1, 2, 4 or 8) and/or gen: (1-4)");
        }
        if (entry["width"]) {
          auto width = IntOf(entry["width"], "width");
          if (!width.ok()) return width.status();
          if (*width != 1 && *width != 2 && *width != 4 && *width != 8 && *width != 16) {
            return Error(entry["width"], "width must be a link width: 1, 2, 4, 8 or 16");
          }
          fault.pcie_width = static_cast<int>(*width);
        }
        if (entry["gen"]) {
          auto gen = IntOf(entry["gen"], "gen");
          if (!gen.ok()) return gen.status();
          if (*gen < 1 || *gen > 5) return Error(entry["gen"], "gen must be between 1 and 5");
          fault.pcie_gen = static_cast<int>(*gen);
        }
        break;
      }
      case FaultKind::kXid: {
        if (!entry["xid"]) return Error(entry, where + " needs xid: (the XID number, e.g. 79)");
        auto xid = IntOf(entry["xid"], "xid");
        if (!xid.ok()) return xid.status();
        if (*xid < 1 || *xid > 1000) return Error(entry["xid"], "xid must be between 1 and 1000");
        fault.xid = static_cast<int>(*xid);
        break;
      }
      case FaultKind::kThrottle: {
        std::vector<std::string> names;
        for (const auto& [name, bit] : ThrottleReasons()) names.push_back(name);
        if (!entry["reason"]) {
          return Error(entry, where + " needs reason: (one of " + Join(names) + ")");
        }
        auto reason = ScalarOf(entry["reason"], "reason");
        if (!reason.ok()) return reason.status();
        for (const auto& [name, bit] : ThrottleReasons()) {
          if (*reason == name) fault.throttle_reason = bit;
        }
        if (fault.throttle_reason == 0) {
          return Error(entry["reason"], "unknown throttle reason \"" + *reason +
                                            "\"; known reasons: " + Join(names));
        }
        break;
      }
      case FaultKind::kStuckBits: {
        if (!entry["address"] || !entry["mask"]) {
          return Error(entry, where + " needs address: (a byte offset into the card's memory, "
                                      "e.g. 0x1000) and mask: (the stuck bits, e.g. 0x10)");
        }
        auto address = UintOf(entry["address"], "address");
        if (!address.ok()) return address.status();
        if (*address % 4 != 0) {
          return Error(entry["address"], "address must be a multiple of 4 (a 32-bit word)");
        }
        fault.address = *address;
        auto mask = UintOf(entry["mask"], "mask");
        if (!mask.ok()) return mask.status();
        if (*mask == 0 || *mask > 0xFFFFFFFFull) {
          return Error(entry["mask"], "mask must name 1 to 32 bits of the word (0x1-0xffffffff)");
        }
        fault.mask = static_cast<uint32_t>(*mask);
        if (entry["value"]) {
          auto value = UintOf(entry["value"], "value");
          if (!value.ok()) return value.status();
          if ((*value & ~*mask) != 0) {
            return Error(entry["value"], "value sets bits outside mask; give the stuck bits' "
                                         "levels within mask (0 = stuck at 0)");
          }
          fault.value = static_cast<uint32_t>(*value);
        }
        break;
      }
      case FaultKind::kTransientDrop: {
        fault.count = 6;  // 3 Hz of full/idle swings within a second
        if (entry["count"]) {
          auto count = IntOf(entry["count"], "count");
          if (!count.ok()) return count.status();
          if (*count < 2 || *count > 1000) return Error(entry["count"], "count must be 2 to 1000 swings");
          fault.count = static_cast<uint64_t>(*count);
        }
        break;
      }
      case FaultKind::kUnderclock:
      case FaultKind::kSlow: {
        if (!entry["factor"]) {
          return Error(entry, where + " needs factor: (the share of its normal rates, e.g. 0.8)");
        }
        auto factor = DoubleOf(entry["factor"], "factor");
        if (!factor.ok()) return factor.status();
        if (*factor < 0.05 || *factor >= 1) {
          return Error(entry["factor"], "factor must be at least 0.05 and below 1");
        }
        fault.factor = *factor;
        break;
      }
      case FaultKind::kFanWear:
      case FaultKind::kClockUnstable: {
        const bool wear = fault.kind == FaultKind::kFanWear;
        const char* key = wear ? "peak" : "amount";
        if (!fault.duration) {
          return Error(entry, where + " needs duration: (how long the sign takes to build up, "
                                      "e.g. 2h)");
        }
        if (entry[key]) {
          auto value = DoubleOf(entry[key], key);
          if (!value.ok()) return value.status();
          const double high = wear ? 1.0 : 0.5;
          if (*value <= 0 || *value > high) {
            return Error(entry[key], std::string(key) + " must be above 0 and at most " +
                                         (wear ? "1 (a fan worn out)" : "0.5 (half the clock)"));
          }
          (wear ? fault.peak : fault.amount) = *value;
        }
        break;
      }
      case FaultKind::kSbeAccelerating:
      case FaultKind::kReplayAccelerating: {
        if (!entry["rate"]) {
          return Error(entry, where + " needs rate: (errors per minute at the start, e.g. 0.2/min)");
        }
        auto rate = RatePerMinOf(entry["rate"], "rate");
        if (!rate.ok()) return rate.status();
        fault.rate_per_min = *rate;
        if (entry["doubling"]) {
          auto doubling = DurationOf(entry["doubling"], "doubling");
          if (!doubling.ok()) return doubling.status();
          if (*doubling < kMinuteMs) {
            return Error(entry["doubling"], "doubling (the time the rate takes to double) must "
                                            "be at least 1m");
          }
          fault.doubling = *doubling;
        }
        break;
      }
      case FaultKind::kEccDbe:
      case FaultKind::kFanFailure:
      case FaultKind::kUnresponsive:
        break;
    }
    if (entry["fades"]) {
      auto fades = reader_.Bool(entry["fades"], "fades");
      if (!fades.ok()) return fades.status();
      fault.fades = *fades;
      if (fault.fades && !fault.duration) {
        return Error(entry["fades"], "fades: true needs duration: (how long the sign builds up "
                                     "before it recedes)");
      }
    }
    return fault;
  }

  YamlReader reader_;
  Scenario scenario_;
};

}  // namespace

const char* FaultKindName(FaultKind kind) {
  for (const auto& k : Kinds()) {
    if (k.kind == kind) return k.name;
  }
  return "unknown";
}

Result<Scenario> ParseScenario(std::string_view text, const std::string& source) {
  return Parser(source).Parse(text);
}

Result<Scenario> LoadScenario(const std::string& path) {
  auto text = ReadTextFile(path, YamlLimits().max_bytes);
  if (!text.ok()) {
    return Status(text.status().code(), "scenario file: " + text.status().message() +
                                            "; check the path (examples live in examples/scenarios/)");
  }
  return ParseScenario(*text, path);
}

int ScenarioGpuCount(const Scenario& scenario) {
  int total = 0;
  for (const auto& group : scenario.gpus) total += group.count;
  return total;
}

Status CheckFaultsFitFleet(const Scenario& scenario, std::span<const GpuModel* const> fleet) {
  const int size = static_cast<int>(fleet.size());
  for (const Fault& fault : scenario.faults) {
    const std::string where = scenario.source + ":" + std::to_string(fault.line) + ": ";
    if (fault.gpu >= size) {
      return InvalidArgument(where + "gpu " + std::to_string(fault.gpu) +
                             " is outside the fleet of " + std::to_string(size) +
                             " GPUs; use an index from 0 to " + std::to_string(size - 1));
    }
    const GpuModel& model = *fleet[fault.gpu];
    const std::string card = "GPU " + std::to_string(fault.gpu) + " (" + std::string(model.key) + ")";
    if ((fault.kind == FaultKind::kEccSbe || fault.kind == FaultKind::kEccDbe ||
         fault.kind == FaultKind::kSbeAccelerating) &&
        !model.ecc) {
      return InvalidArgument(where + card + " has no ECC memory, so it cannot report " +
                             FaultKindName(fault.kind) +
                             " errors; use a datacenter model or an xid fault (e.g. 31 or 13)");
    }
    if (fault.kind == FaultKind::kStuckBits && fault.address >= model.memory_bytes) {
      return InvalidArgument(where + card + " has " + std::to_string(model.memory_bytes) +
                             " bytes of memory; a stuck_bits address must be below that");
    }
    if (fault.kind == FaultKind::kPcieDownTrain) {
      const bool narrower = fault.pcie_width && *fault.pcie_width < model.max_pcie_width;
      const bool slower = fault.pcie_gen && *fault.pcie_gen < model.max_pcie_gen;
      if ((fault.pcie_width && *fault.pcie_width > model.max_pcie_width) ||
          (fault.pcie_gen && *fault.pcie_gen > model.max_pcie_gen) || (!narrower && !slower)) {
        return InvalidArgument(where + card + " links at most at gen " +
                               std::to_string(model.max_pcie_gen) + " x" +
                               std::to_string(model.max_pcie_width) +
                               "; a down-train needs a width or gen below that");
      }
    }
  }
  return Status::Ok();
}

}  // namespace gpuherd::gpu::sim
