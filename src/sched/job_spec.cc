#include "sched/job_spec.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <limits>
#include <set>

#include <fmt/format.h>

namespace gpuherd::sched {
namespace {

constexpr const char* kAllowedFields[] = {
    "command", "cwd",  "env",        "gpus",       "gpu_mem",     "model",
    "min_cc",  "cpus", "mem",        "priority",   "time_limit",  "checkpoint",
    "preemptible", "max_restarts", "depends_on", "after", "after_any", "after_not_ok", "name", "labels",
    "mixed_models"};
constexpr int kMaxGpus = 4096;
constexpr int kMaxRestarts = 1000;
constexpr size_t kMaxDependencies = 10000;
constexpr uint64_t kMiB = 1ull << 20;
// The longest time_limit or checkpoint grace: far beyond any real job, far
// below where adding it to a clock could overflow.
constexpr DurationMs kMaxDurationMs = 366 * 24 * kHourMs;
constexpr uint64_t kMaxMemoryBytes = 1ull << 50;  // 1 PiB

// Control characters (C0, DEL) in a name hide or forge what a terminal
// shows (a NUL ends a row, ESC starts a sequence); they are refused where a
// user names things and escaped wherever user text is printed.
bool HasControl(const std::string& s) {
  return std::any_of(s.begin(), s.end(), [](unsigned char c) { return c < 0x20 || c == 0x7f; });
}

// A value quoted in an error message: short, and printable.
std::string Shown(const nlohmann::json& v) {
  std::string text = v.dump(-1, ' ', true, nlohmann::json::error_handler_t::replace);
  if (text.size() > 60) text = text.substr(0, 57) + "...";
  return text;
}

std::string AllowedList() {
  std::string out;
  for (const char* f : kAllowedFields) {
    if (!out.empty()) out += ", ";
    out += f;
  }
  return out;
}

std::string Lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

Status FieldError(const std::string& field, const std::string& what) {
  return InvalidArgument(fmt::format("job spec field '{}': {}", field, what));
}

Result<std::string> GetString(const nlohmann::json& v, const std::string& field) {
  if (!v.is_string()) return FieldError(field, "must be a string, got " + Shown(v));
  return v.get<std::string>();
}

Result<int64_t> GetInteger(const nlohmann::json& v, const std::string& field, int64_t lo,
                           int64_t hi) {
  int64_t n = 0;
  if (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(hi)) {
    return FieldError(field, fmt::format("must be from {} to {}, got {}", lo, hi, v.get<uint64_t>()));
  } else if (v.is_number_integer()) {
    n = v.get<int64_t>();
  } else if (v.is_number_float() && std::isfinite(v.get<double>()) &&
             v.get<double>() == std::floor(v.get<double>()) && std::fabs(v.get<double>()) < 1e15) {
    n = static_cast<int64_t>(v.get<double>());
  } else {
    return FieldError(field, fmt::format("must be a whole number from {} to {}, got {}", lo, hi,
                                         Shown(v)));
  }
  if (n < lo || n > hi) {
    return FieldError(field, fmt::format("must be from {} to {}, got {}", lo, hi, n));
  }
  return n;
}

Result<std::map<std::string, std::string>> GetStringMap(const nlohmann::json& v,
                                                        const std::string& field) {
  if (!v.is_object()) {
    return FieldError(field, "must be an object of NAME: \"value\" pairs, got " + Shown(v));
  }
  std::map<std::string, std::string> out;
  for (const auto& [key, value] : v.items()) {
    if (key.empty()) return FieldError(field, "has an empty name");
    if (HasControl(key)) {
      return FieldError(field, fmt::format("name {} holds a control character (such as NUL, ESC, "
                                           "CR or LF); names are printable text",
                                           Shown(key)));
    }
    if (value.is_string()) {
      out[key] = value.get<std::string>();
    } else if (value.is_number() || value.is_boolean()) {
      out[key] = value.dump();  // 1 → "1", true → "true": what a shell would pass
    } else {
      return FieldError(field + "." + key, "must be a string, got " + Shown(value));
    }
  }
  return out;
}

Result<uint64_t> GetMemory(const nlohmann::json& v, const std::string& field) {
  if (v.is_number()) {
    double mib = v.get<double>();
    if (!std::isfinite(mib) || mib < 0 || mib * kMiB > static_cast<double>(kMaxMemoryBytes)) {
      return FieldError(field, fmt::format("must be a size like \"8GiB\" or a number of MiB from 0 "
                                           "to {} (1 PiB), got {}",
                                           kMaxMemoryBytes / kMiB, Shown(v)));
    }
    return static_cast<uint64_t>(std::llround(mib * kMiB));
  }
  if (!v.is_string()) {
    return FieldError(field, "must be a size like \"8GiB\" or a number of MiB, got " + Shown(v));
  }
  Result<uint64_t> bytes = ParseMemorySize(v.get<std::string>());
  if (!bytes.ok()) return FieldError(field, bytes.status().message());
  if (*bytes > kMaxMemoryBytes) {
    return FieldError(field, fmt::format("must be at most 1 PiB, got {}", Shown(v)));
  }
  return bytes;
}

Result<DurationMs> GetDuration(const nlohmann::json& v, const std::string& field) {
  DurationMs d = 0;
  if (v.is_number()) {
    double secs = v.get<double>();
    if (!std::isfinite(secs) || secs < 0 || secs * kSecondMs > static_cast<double>(kMaxDurationMs)) {
      return FieldError(field, fmt::format("must be a duration like \"2h\" or seconds from 0 to {} "
                                           "(366 days), got {}",
                                           kMaxDurationMs / kSecondMs, Shown(v)));
    }
    return static_cast<DurationMs>(std::llround(secs * kSecondMs));
  }
  const std::string kRange = "from 0 to 366d";
  if (!v.is_string()) {
    return FieldError(field, fmt::format("must be a duration like \"90s\", \"30m\", \"2h\" or \"1d\" "
                                         "{}, got {}", kRange, Shown(v)));
  }
  // The number is bounded before ParseDuration converts it to milliseconds.
  const std::string text = v.get<std::string>();
  const size_t digits = text.find_first_not_of("0123456789.");
  double number = 0;
  try {
    number = std::stod(text.substr(0, digits));
  } catch (const std::exception&) {
    number = -1;
  }
  if (number < 0 || number > 1e9 || !ParseDuration(text, &d) || d < 0 || d > kMaxDurationMs) {
    return FieldError(field, fmt::format("must be a duration like \"90s\", \"30m\", \"2h\" or \"1d\" "
                                         "{}, got {}", kRange, Shown(v)));
  }
  return d;
}

Status ParseCheckpoint(const nlohmann::json& v, JobSpec* spec) {
  if (!v.is_object()) {
    return FieldError("checkpoint", "must be an object like {\"grace\": \"60s\"}, got " + Shown(v));
  }
  for (const auto& [key, value] : v.items()) {
    if (key != "grace") {
      return FieldError("checkpoint." + key, "is not a known field; allowed: grace");
    }
    Result<DurationMs> grace = GetDuration(value, "checkpoint.grace");
    if (!grace.ok()) return grace.status();
    spec->checkpoint_grace = *grace;
  }
  return Status::Ok();
}

Status ParseField(const std::string& key, const nlohmann::json& v, JobSpec* spec) {
  if (key == "command") {
    // A string is a shell command line, run with /bin/sh -c: pipes,
    // redirections and variables work as they do in a terminal.
    if (v.is_string() && !v.get<std::string>().empty()) {
      spec->argv = {"/bin/sh", "-c", v.get<std::string>()};
      return Status::Ok();
    }
    if (!v.is_array() || v.empty()) {
      return FieldError(key, "must be a shell command line (a string) or a non-empty array of strings, e.g. "
                             "[\"python\", \"train.py\"], got " + Shown(v));
    }
    for (const auto& arg : v) {
      if (!arg.is_string()) return FieldError(key, "every argument must be a string, got " + Shown(arg));
      spec->argv.push_back(arg.get<std::string>());
    }
    if (spec->argv[0].empty()) return FieldError(key, "the program (first element) is empty");
  } else if (key == "cwd") {
    Result<std::string> s = GetString(v, key);
    if (!s.ok()) return s.status();
    spec->cwd = *s;
  } else if (key == "env") {
    auto m = GetStringMap(v, key);
    if (!m.ok()) return m.status();
    spec->env = std::move(*m);
  } else if (key == "gpus") {
    double gpus = 0;
    if (v.is_number()) {
      gpus = v.get<double>();
    } else if (v.is_string()) {
      std::string text = v.get<std::string>();
      size_t used = 0;
      try {
        gpus = std::stod(text, &used);
      } catch (const std::exception&) {
        used = 0;
      }
      if (used == 0 || used != text.size()) {
        return FieldError(key, "must be a number like 1, 0.25 or 4 (0, 0.05 to 0.95, or a whole number up to 4096), got " + Shown(v));
      }
    } else {
      return FieldError(key, "must be a number like 1, 0.25 or 4 (0, 0.05 to 0.95, or a whole number up to 4096), got " + Shown(v));
    }
    Result<int> twentieths = ParseGpuTwentieths(gpus);
    if (!twentieths.ok()) return FieldError(key, twentieths.status().message());
    spec->gpu_twentieths = *twentieths;
  } else if (key == "gpu_mem") {
    Result<uint64_t> bytes = GetMemory(v, key);
    if (!bytes.ok()) return bytes.status();
    spec->gpu_mem_bytes = *bytes;
  } else if (key == "model") {
    Result<std::string> s = GetString(v, key);
    if (!s.ok()) return s.status();
    spec->model = *s;
  } else if (key == "min_cc") {
    std::string text;
    if (v.is_number()) {
      text = fmt::format("{:.1f}", v.get<double>());
    } else if (v.is_string()) {
      text = v.get<std::string>();
    } else {
      return FieldError(key, "must be a compute capability like \"8.0\", got " + Shown(v));
    }
    Result<int> cc = ParseComputeCapability(text);
    if (!cc.ok()) return FieldError(key, cc.status().message());
    spec->min_cc = *cc;
  } else if (key == "cpus") {
    Result<int64_t> n = GetInteger(v, key, 0, 4096);
    if (!n.ok()) return n.status();
    spec->cpus = static_cast<int>(*n);
  } else if (key == "mem") {
    Result<uint64_t> bytes = GetMemory(v, key);
    if (!bytes.ok()) return bytes.status();
    spec->mem_bytes = *bytes;
  } else if (key == "priority") {
    Result<int64_t> n = GetInteger(v, key, -100, 100);
    if (!n.ok()) return n.status();
    spec->priority = static_cast<int>(*n);
  } else if (key == "time_limit") {
    Result<DurationMs> d = GetDuration(v, key);
    if (!d.ok()) return d.status();
    spec->time_limit = *d;
  } else if (key == "checkpoint") {
    return ParseCheckpoint(v, spec);
  } else if (key == "preemptible") {
    if (!v.is_boolean()) return FieldError(key, "must be true or false, got " + Shown(v));
    spec->preemptible = v.get<bool>();
  } else if (key == "mixed_models") {
    if (!v.is_boolean()) {
      return FieldError(key, "must be true (a multi-GPU job may span GPU models) or false (one "
                             "model, the default), got " + v.dump());
    }
    spec->mixed_models = v.get<bool>();
  } else if (key == "max_restarts") {
    Result<int64_t> n = GetInteger(v, key, 0, kMaxRestarts);
    if (!n.ok()) return n.status();
    spec->max_restarts = static_cast<int>(*n);
  } else if (key == "depends_on" || key == "after" || key == "after_any" || key == "after_not_ok") {
    // depends_on is after's older name; both mean "completed".
    std::vector<JobId>* ids = key == "after_any" ? &spec->after_any
                              : key == "after_not_ok" ? &spec->after_not_ok
                                                      : &spec->depends_on;
    if (!v.is_array()) return FieldError(key, "must be an array of job ids, got " + Shown(v));
    if (v.size() > kMaxDependencies) {
      return FieldError(key, fmt::format("names {} jobs; at most {} dependencies", v.size(), kMaxDependencies));
    }
    for (const auto& id : v) {
      Result<int64_t> n = GetInteger(id, key, 1, std::numeric_limits<int64_t>::max());
      if (!n.ok()) return n.status();
      ids->push_back(*n);
    }
  } else if (key == "name") {
    Result<std::string> s = GetString(v, key);
    if (!s.ok()) return s.status();
    spec->name = *s;
  } else if (key == "labels") {
    auto m = GetStringMap(v, key);
    if (!m.ok()) return m.status();
    spec->labels = std::move(*m);
  } else if (key == "user") {
    return FieldError(key, "cannot be set: a job belongs to whoever submits it");
  } else {
    return InvalidArgument(fmt::format("job spec: unknown field '{}'; allowed fields: {}", key,
                                       AllowedList()));
  }
  return Status::Ok();
}

}  // namespace

Status ParseJobSpecField(const std::string& key, const nlohmann::json& value, JobSpec* spec) {
  try {
    return ParseField(key, value, spec);
  } catch (const nlohmann::json::exception& e) {
    return InvalidArgument(std::string("job spec: ") + e.what());
  }
}

nlohmann::json JobSpecToJson(const JobSpec& spec) {
  const JobSpec d;
  nlohmann::json j = nlohmann::json::object();
  j["command"] = spec.argv;
  if (spec.cwd != d.cwd) j["cwd"] = spec.cwd;
  if (!spec.env.empty()) j["env"] = spec.env;
  // Twentieths, bytes and milliseconds written as the numbers the reader
  // scales back: a twentieth divided by 20, MiB as a power-of-two division
  // and seconds all round to the same integers on reading.
  if (spec.gpu_twentieths != d.gpu_twentieths) j["gpus"] = static_cast<double>(spec.gpu_twentieths) / kTwentiethsPerGpu;
  if (spec.gpu_mem_bytes != d.gpu_mem_bytes) j["gpu_mem"] = static_cast<double>(spec.gpu_mem_bytes) / kMiB;
  if (spec.model != d.model) j["model"] = spec.model;
  if (spec.min_cc) j["min_cc"] = FormatComputeCapability(*spec.min_cc);
  if (spec.cpus != d.cpus) j["cpus"] = spec.cpus;
  if (spec.mem_bytes != d.mem_bytes) j["mem"] = static_cast<double>(spec.mem_bytes) / kMiB;
  if (spec.priority != d.priority) j["priority"] = spec.priority;
  if (spec.time_limit != d.time_limit) j["time_limit"] = static_cast<double>(spec.time_limit) / kSecondMs;
  if (spec.checkpoint_grace != d.checkpoint_grace) {
    j["checkpoint"] = {{"grace", static_cast<double>(spec.checkpoint_grace) / kSecondMs}};
  }
  if (spec.preemptible != d.preemptible) j["preemptible"] = spec.preemptible;
  if (spec.mixed_models != d.mixed_models) j["mixed_models"] = spec.mixed_models;
  if (spec.max_restarts != d.max_restarts) j["max_restarts"] = spec.max_restarts;
  if (!spec.depends_on.empty()) j["after"] = spec.depends_on;
  if (!spec.after_any.empty()) j["after_any"] = spec.after_any;
  if (!spec.after_not_ok.empty()) j["after_not_ok"] = spec.after_not_ok;
  if (!spec.name.empty()) j["name"] = spec.name;
  if (!spec.labels.empty()) j["labels"] = spec.labels;
  return j;
}

Result<int> ParseGpuTwentieths(double gpus) {
  const std::string kRule = "gpus must be 0, a fraction from 0.05 to 0.95 in steps of 0.05 (0.25, "
                            "0.5, 0.75, 0.1, ...), or a whole number";
  if (!std::isfinite(gpus) || gpus < 0) return InvalidArgument(fmt::format("{}; got {:g}", kRule, gpus));
  if (gpus > kMaxGpus) {
    return InvalidArgument(fmt::format("{} up to {}; got {:g}", kRule, kMaxGpus, gpus));
  }
  double scaled = gpus * kTwentiethsPerGpu;
  double rounded = std::round(scaled);
  if (gpus > 0 && rounded == 0) {  // 1e-308 is not 0
    return InvalidArgument(fmt::format("{}; {:g} is not a multiple of 0.05", kRule, gpus));
  }
  // 0.15 * 20 is 2.9999999999999996 in binary; anything farther off is not a twentieth.
  if (std::fabs(scaled - rounded) > 1e-6) {
    return InvalidArgument(fmt::format("{}; {:g} is not a multiple of 0.05", kRule, gpus));
  }
  int twentieths = static_cast<int>(rounded);
  if (twentieths > kTwentiethsPerGpu && twentieths % kTwentiethsPerGpu != 0) {
    return InvalidArgument(fmt::format(
        "{}; {:g} mixes whole and fractional GPUs: ask for {} or {}", kRule, gpus,
        twentieths / kTwentiethsPerGpu, twentieths / kTwentiethsPerGpu + 1));
  }
  return twentieths;
}

Result<uint64_t> ParseMemorySize(const std::string& text) {
  const std::string kHint = "write a size like \"8GiB\", \"512MiB\", \"20G\" or a number of MiB";
  size_t pos = 0;
  while (pos < text.size() && (std::isdigit(static_cast<unsigned char>(text[pos])) || text[pos] == '.')) {
    ++pos;
  }
  if (pos == 0) return InvalidArgument(fmt::format("'{}' is not a size; {}", text, kHint));
  double number = 0;
  try {
    size_t used = 0;
    number = std::stod(text.substr(0, pos), &used);
    if (used != pos) throw std::invalid_argument(text);
  } catch (const std::exception&) {
    return InvalidArgument(fmt::format("'{}' is not a size; {}", text, kHint));
  }
  std::string unit = Lower(text.substr(pos));
  while (!unit.empty() && unit.front() == ' ') unit.erase(unit.begin());
  static const std::pair<const char*, double> kUnits[] = {
      {"", 1ull << 20},   {"b", 1},           {"k", 1ull << 10},   {"kib", 1ull << 10},
      {"kb", 1e3},        {"m", 1ull << 20},  {"mib", 1ull << 20}, {"mb", 1e6},
      {"g", 1ull << 30},  {"gib", 1ull << 30}, {"gb", 1e9},        {"t", 1ull << 40},
      {"tib", 1ull << 40}, {"tb", 1e12}};
  for (const auto& [name, factor] : kUnits) {
    if (unit == name) {
      double bytes = number * factor;
      if (!std::isfinite(bytes) || bytes > 1e18) {
        return InvalidArgument(fmt::format("'{}' is too large; {}", text, kHint));
      }
      return static_cast<uint64_t>(std::llround(bytes));
    }
  }
  return InvalidArgument(fmt::format("'{}' has an unknown unit '{}'; use B, KiB, MiB, GiB, TiB "
                                     "(or K, M, G, T, which mean the same) or KB, MB, GB, TB",
                                     text, text.substr(pos)));
}

Result<int> ParseComputeCapability(const std::string& text) {
  const std::string kHint = "write it as major.minor, like \"8.0\" or \"8.6\"";
  size_t dot = text.find('.');
  std::string major = text.substr(0, dot);
  std::string minor = dot == std::string::npos ? "0" : text.substr(dot + 1);
  auto digits = [](const std::string& s) {
    return !s.empty() && std::all_of(s.begin(), s.end(), [](unsigned char c) { return std::isdigit(c); });
  };
  if (!digits(major) || !digits(minor) || major.size() > 2 || minor.size() != 1) {
    return InvalidArgument(fmt::format("'{}' is not a compute capability; {}", text, kHint));
  }
  return std::stoi(major) * 10 + std::stoi(minor);
}

std::string FormatBytes(uint64_t bytes) {
  constexpr uint64_t kGiB = 1ull << 30;
  if (bytes >= kGiB) return fmt::format("{:g} GiB", std::round(bytes * 10.0 / kGiB) / 10);
  return fmt::format("{:g} MiB", std::round(bytes * 10.0 / kMiB) / 10);
}

std::string FormatComputeCapability(int cc) { return fmt::format("{}.{}", cc / 10, cc % 10); }

std::string FormatGpuTwentieths(int twentieths) {
  if (twentieths % kTwentiethsPerGpu == 0) return fmt::format("{}", twentieths / kTwentiethsPerGpu);
  return fmt::format("{:g}", static_cast<double>(twentieths) / kTwentiethsPerGpu);  // 0.05, 0.25, 0.5
}

namespace {

// What a job's text fields may hold, checked at submit rather than at launch.
Status ValidateJobText(const JobSpec& spec) {
  const std::string kControl = "holds a control character (such as NUL, ESC, CR or LF)";
  if (HasControl(spec.name)) return FieldError("name", kControl + "; a name is printable text");
  for (const auto& [key, value] : spec.labels) {
    if (HasControl(key) || HasControl(value)) {
      return FieldError("labels." + key, kControl + "; labels are printable text");
    }
  }
  for (const auto& [key, value] : spec.env) {
    if (key.empty() || HasControl(key) || key.find('=') != std::string::npos) {
      return FieldError("env", fmt::format("name {} must be non-empty, without '=' and without "
                                           "control characters",
                                           Shown(key)));
    }
    if (value.find('\0') != std::string::npos) {
      return FieldError("env." + key, "holds a NUL character, which no environment can carry");
    }
  }
  for (const std::string& arg : spec.argv) {
    if (arg.find('\0') != std::string::npos) {
      return FieldError("command", "an argument holds a NUL character, which no program can receive");
    }
  }
  if (spec.cwd.find('\0') != std::string::npos) return FieldError("cwd", "holds a NUL character");
  if (HasControl(spec.model)) return FieldError("model", kControl);
  return Status::Ok();
}

}  // namespace

Status ValidateJobSpec(const JobSpec& spec) {
  if (spec.argv.empty() || spec.argv[0].empty()) {
    return FieldError("command", "is required: the program and its arguments");
  }
  if (spec.gpu_twentieths < 0 ||
      (spec.gpu_twentieths > kTwentiethsPerGpu && spec.gpu_twentieths % kTwentiethsPerGpu != 0)) {
    return FieldError("gpus", "must be 0, a fraction from 0.05 to 0.95, or a whole number");
  }
  if (spec.fractional() && spec.gpu_mem_bytes == 0) {
    return FieldError("gpu_mem", fmt::format("is required for a fraction of a GPU (gpus {}): "
                                             "give the memory the job needs, e.g. \"8GiB\"",
                                             FormatGpuTwentieths(spec.gpu_twentieths)));
  }
  if (spec.gpu_mem_bytes > 0 && spec.gpu_twentieths == 0) {
    return FieldError("gpu_mem", "needs gpus: a job without GPUs has no GPU memory");
  }
  if (spec.priority < -100 || spec.priority > 100) {
    return FieldError("priority", fmt::format("must be from -100 to 100, got {}", spec.priority));
  }
  if (spec.time_limit < 0 || spec.time_limit > kMaxDurationMs) {
    return FieldError("time_limit", "must be from 0 to 366 days");
  }
  if (spec.checkpoint_grace < 0 || spec.checkpoint_grace > kMaxDurationMs) {
    return FieldError("checkpoint.grace", "must be from 0 to 366 days");
  }
  if (spec.max_restarts < 0 || spec.max_restarts > kMaxRestarts) {
    return FieldError("max_restarts", fmt::format("must be from 0 to {}", kMaxRestarts));
  }
  if (spec.cpus < 0 || spec.cpus > 4096) return FieldError("cpus", "must be from 0 to 4096");
  if (spec.mem_bytes > kMaxMemoryBytes || spec.gpu_mem_bytes > kMaxMemoryBytes) {
    return FieldError(spec.mem_bytes > kMaxMemoryBytes ? "mem" : "gpu_mem", "must be at most 1 PiB");
  }
  return ValidateJobText(spec);
}

Result<JobSpec> ParseJobSpec(const nlohmann::json& j) {
  if (!j.is_object()) {
    return InvalidArgument("a job spec must be a JSON object like {\"command\": [\"python\", "
                           "\"train.py\"], \"gpus\": 1}");
  }
  JobSpec spec;
  try {
    for (const auto& [key, value] : j.items()) {
      GPUHERD_RETURN_IF_ERROR(ParseField(key, value, &spec));
    }
  } catch (const nlohmann::json::exception& e) {
    return InvalidArgument(std::string("job spec: ") + e.what());
  }
  if (!j.contains("command")) {
    return FieldError("command", "is required: the program and its arguments as an array, e.g. "
                                 "[\"python\", \"train.py\"]");
  }
  GPUHERD_RETURN_IF_ERROR(ValidateJobSpec(spec));
  return spec;
}

Status CheckFits(const JobSpec& spec, const FleetState& fleet) {
  GPUHERD_RETURN_IF_ERROR(ValidateJobSpec(spec));
  if (spec.gpu_twentieths == 0) return Status::Ok();
  const int needed = spec.fractional() ? 1 : spec.whole_gpus();
  const int total = static_cast<int>(fleet.gpus.size());
  if (needed > total) {
    return InvalidArgument(fmt::format("the job asks for {} GPUs but this machine has {}; ask for "
                                       "at most {}",
                                       needed, total, total));
  }
  const std::string model = Lower(spec.model);
  uint64_t biggest = 0;
  std::string biggest_name;
  int best_cc = 0;
  std::set<std::string> names;
  int matching = 0;
  bool model_matches_any = false, cc_matches_any = false;
  for (const GpuState& g : fleet.gpus) {
    names.insert(g.name);
    bool model_ok = model.empty() || Lower(g.name).find(model) != std::string::npos;
    bool cc_ok = !spec.min_cc || g.cc >= *spec.min_cc;
    model_matches_any |= model_ok;
    cc_matches_any |= cc_ok;
    if (g.memory_total_bytes > biggest) {
      biggest = g.memory_total_bytes;
      biggest_name = g.name;
    }
    best_cc = std::max(best_cc, g.cc);
    if (model_ok && cc_ok && g.memory_total_bytes >= spec.gpu_mem_bytes) ++matching;
  }
  auto list_names = [&names] {
    std::string out;
    for (const std::string& n : names) out += (out.empty() ? "" : ", ") + n;
    return out;
  };
  if (!model_matches_any) {
    return InvalidArgument(fmt::format("no GPU here matches model '{}'; the GPUs are: {}",
                                       spec.model, list_names()));
  }
  if (!cc_matches_any) {
    return InvalidArgument(fmt::format("no GPU here has compute capability {} or higher (the "
                                       "highest is {}); lower min_cc",
                                       FormatComputeCapability(*spec.min_cc),
                                       FormatComputeCapability(best_cc)));
  }
  if (spec.gpu_mem_bytes > biggest) {
    return InvalidArgument(fmt::format("gpu_mem {} is more than the largest GPU here has ({}, "
                                       "{}); ask for at most {}",
                                       FormatBytes(spec.gpu_mem_bytes), FormatBytes(biggest),
                                       biggest_name, FormatBytes(biggest)));
  }
  if (matching < needed) {
    return InvalidArgument(fmt::format(
        "only {} GPU(s) here match model '{}', min_cc {} and gpu_mem {} together, but the job "
        "asks for {}",
        matching, spec.model.empty() ? "any" : spec.model,
        spec.min_cc ? FormatComputeCapability(*spec.min_cc) : "any",
        spec.gpu_mem_bytes ? FormatBytes(spec.gpu_mem_bytes) : "any", needed));
  }
  return Status::Ok();
}

}  // namespace gpuherd::sched
