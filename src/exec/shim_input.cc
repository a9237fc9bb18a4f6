#include "exec/shim_input.h"

namespace gpuherd::exec {

using nlohmann::json;

json LaunchSpecToJson(const LaunchSpec& s) {
  json j = {{"job_id", s.job_id}, {"attempt", s.attempt}, {"argv", s.argv}, {"cwd", s.cwd},
            {"env", s.env},       {"record_dir", s.record_dir}, {"output_dir", s.output_dir},         {"cpus", s.cpus}, {"time_limit", s.time_limit},
            {"grace", s.grace}};
  if (s.uid) j["uid"] = *s.uid;
  if (s.gid) j["gid"] = *s.gid;
  if (!s.cgroup.empty()) {
    j["cgroup"] = {{"version", static_cast<int>(s.cgroup.version)}, {"unified", s.cgroup.unified}, {"v1", s.cgroup.v1}};
  }
  if (s.limits.memory_bytes > 0) j["memory_limit"] = s.limits.memory_bytes;
  if (s.limits.cpus > 0) j["cpu_limit"] = s.limits.cpus;
  if (s.open_files > 0) j["open_files"] = s.open_files;
  return j;
}

Result<LaunchSpec> LaunchSpecFromJson(const json& j) {
  LaunchSpec s;
  try {
    s.job_id = j.at("job_id").get<int64_t>();
    s.attempt = j.at("attempt").get<int>();
    s.argv = j.at("argv").get<std::vector<std::string>>();
    s.cwd = j.at("cwd").get<std::string>();
    s.env = j.at("env").get<std::map<std::string, std::string>>();
    s.record_dir = j.at("record_dir").get<std::string>();
    s.output_dir = j.at("output_dir").get<std::string>();
    s.cpus = j.at("cpus").get<std::vector<int>>();
    s.time_limit = j.at("time_limit").get<DurationMs>();
    s.grace = j.at("grace").get<DurationMs>();
    if (j.contains("uid")) s.uid = j.at("uid").get<uint32_t>();
    if (j.contains("gid")) s.gid = j.at("gid").get<uint32_t>();
    if (j.contains("cgroup")) {
      const json& c = j.at("cgroup");
      int version = c.at("version").get<int>();
      if (version != 1 && version != 2) return InvalidArgument("malformed launch spec: cgroup version " + std::to_string(version));
      s.cgroup.version = static_cast<host::CgroupVersion>(version);
      s.cgroup.unified = c.at("unified").get<std::string>();
      s.cgroup.v1 = c.at("v1").get<std::map<std::string, std::string>>();
    }
    s.limits.memory_bytes = j.value("memory_limit", uint64_t{0});
    s.limits.cpus = j.value("cpu_limit", 0);
    s.open_files = j.value("open_files", uint64_t{0});
  } catch (const json::exception& e) {
    return InvalidArgument(std::string("malformed launch spec: ") + e.what());
  }
  return s;
}

std::string EncodeShimInput(const LaunchSpec& spec, const UserSwitch& user) {
  json j = {{"spec", LaunchSpecToJson(spec)}};
  json u = {{"needed", user.needed}, {"gid", user.gid}, {"groups", user.groups}};
  if (user.uid) u["uid"] = *user.uid;
  if (!user.error.empty()) u["error"] = user.error;
  j["user"] = std::move(u);
  return j.dump();
}

Result<ShimInput> DecodeShimInput(std::string_view text) {
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object() || !j.contains("spec") || !j.contains("user")) {
    return InvalidArgument("malformed shim input: not a JSON object with a spec and a user");
  }
  auto spec = LaunchSpecFromJson(j["spec"]);
  if (!spec.ok()) return spec.status();
  ShimInput input{std::move(spec).value(), {}};
  try {
    const json& u = j["user"];
    input.user.needed = u.at("needed").get<bool>();
    input.user.gid = u.at("gid").get<gid_t>();
    input.user.groups = u.at("groups").get<std::vector<gid_t>>();
    if (u.contains("uid")) input.user.uid = u.at("uid").get<uid_t>();
    input.user.error = u.value("error", std::string());
  } catch (const json::exception& e) {
    return InvalidArgument(std::string("malformed shim input: ") + e.what());
  }
  return input;
}

}  // namespace gpuherd::exec
