#include "gpu/xid.h"

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <set>

#include "core/yaml.h"

// Generated from xid_catalogue.yaml by embed_file.cmake (NUL-terminated).
extern "C" const unsigned char gpuherd_xid_catalogue_yaml[];
extern "C" const unsigned long gpuherd_xid_catalogue_yaml_size;

namespace gpuherd::gpu {
namespace {

constexpr std::pair<XidCause, std::string_view> kCauses[] = {
    {XidCause::kApplication, "application"}, {XidCause::kDriver, "driver"},
    {XidCause::kHardware, "hardware"},       {XidCause::kNvlink, "nvlink"},
    {XidCause::kInformational, "informational"}};
constexpr std::pair<XidResolution, std::string_view> kResolutions[] = {
    {XidResolution::kNone, "none"},
    {XidResolution::kRestartApp, "restart_app"},
    {XidResolution::kResetGpu, "reset_gpu"},
    {XidResolution::kRebootNode, "reboot_node"},
    {XidResolution::kInspectHardware, "inspect_hardware"}};

template <typename E, size_t N>
bool FromName(const std::pair<E, std::string_view> (&table)[N], const std::string& s, E* out) {
  for (const auto& [e, name] : table) {
    if (name == s) {
      *out = e;
      return true;
    }
  }
  return false;
}

template <typename E, size_t N>
std::string_view ToName(const std::pair<E, std::string_view> (&table)[N], E e) {
  for (const auto& [v, name] : table) {
    if (v == e) return name;
  }
  return "?";
}

// One entry of the catalogue; every error names its line.
Status ReadEntry(const YamlReader& reader, const YAML::Node& n, XidInfo* info) {
  if (!n.IsMap()) return reader.Error(n, "an entry must be a mapping");
  GPUHERD_RETURN_IF_ERROR(reader.CheckKeys(
      n, {"an entry", {"xid", "mnemonic", "in_use", "cause", "resolution", "fatal", "description"}}));
  auto take = [](auto result, auto* out) -> Status {
    if (!result.ok()) return result.status();
    *out = *std::move(result);
    return Status::Ok();
  };
  int64_t xid = 0;
  GPUHERD_RETURN_IF_ERROR(take(reader.Int(n["xid"], "xid", 1, 65535), &xid));
  info->xid = static_cast<int>(xid);
  const std::string what = fmt::format("XID {}: ", xid);
  std::string cause, resolution;
  GPUHERD_RETURN_IF_ERROR(take(reader.Scalar(n["mnemonic"], what + "mnemonic"), &info->mnemonic));
  GPUHERD_RETURN_IF_ERROR(take(reader.Bool(n["in_use"], what + "in_use"), &info->in_use));
  GPUHERD_RETURN_IF_ERROR(take(reader.Bool(n["fatal"], what + "fatal"), &info->fatal));
  GPUHERD_RETURN_IF_ERROR(take(reader.Scalar(n["description"], what + "description"), &info->description));
  GPUHERD_RETURN_IF_ERROR(take(reader.Scalar(n["cause"], what + "cause"), &cause));
  GPUHERD_RETURN_IF_ERROR(take(reader.Scalar(n["resolution"], what + "resolution"), &resolution));
  if (info->description.empty()) return reader.Error(n["description"], what + "no description");
  if (!FromName(kCauses, cause, &info->cause)) {
    return reader.Error(n["cause"], fmt::format("{}unknown cause '{}'", what, cause));
  }
  if (!FromName(kResolutions, resolution, &info->resolution)) {
    return reader.Error(n["resolution"], fmt::format("{}unknown resolution '{}'", what, resolution));
  }
  return Status::Ok();
}

}  // namespace

Result<std::vector<XidInfo>> ParseXidCatalogue(std::string_view yaml) {
  constexpr const char* kSource = "XID catalogue";
  auto root = LoadYaml(yaml, kSource);
  if (!root.ok()) return root.status();
  const YamlReader reader(kSource);
  std::vector<XidInfo> out;
  try {
    if (!root->IsMap() || !(*root)["xids"] || !(*root)["xids"].IsSequence()) {
      return InvalidArgument("XID catalogue: no `xids` list");
    }
    GPUHERD_RETURN_IF_ERROR(reader.CheckKeys(*root, {"", {"xids"}, "top-level key"}));
    std::set<int> seen;
    for (const YAML::Node n : (*root)["xids"]) {
      XidInfo info;
      GPUHERD_RETURN_IF_ERROR(ReadEntry(reader, n, &info));
      if (!seen.insert(info.xid).second) return reader.Error(n, fmt::format("XID {} is listed twice", info.xid));
      out.push_back(std::move(info));
    }
  } catch (const YAML::Exception& e) {
    return reader.Error(e.mark.line + 1, e.msg);
  }
  std::sort(out.begin(), out.end(), [](const XidInfo& a, const XidInfo& b) { return a.xid < b.xid; });
  return out;
}

const std::vector<XidInfo>& XidCatalogue() {
  static const std::vector<XidInfo> kCatalogue = [] {
    auto parsed = ParseXidCatalogue(std::string_view(
        reinterpret_cast<const char*>(gpuherd_xid_catalogue_yaml), gpuherd_xid_catalogue_yaml_size));
    if (!parsed.ok()) {
      std::fprintf(stderr, "embedded %s\n", parsed.status().ToString().c_str());
      std::abort();
    }
    return std::move(parsed).value();
  }();
  return kCatalogue;
}

XidInfo LookupXid(int xid) {
  const auto& cat = XidCatalogue();
  auto it = std::lower_bound(cat.begin(), cat.end(), xid,
                             [](const XidInfo& e, int x) { return e.xid < x; });
  if (it != cat.end() && it->xid == xid) return *it;
  XidInfo unknown;
  unknown.xid = xid;
  unknown.known = false;
  unknown.in_use = false;
  unknown.mnemonic = "UNKNOWN";
  unknown.description = "XID " + std::to_string(xid) + " is not in NVIDIA's catalogue";
  return unknown;
}

XidVerdict VerdictOf(const XidInfo& info) {
  // A number the catalogue lacks, or one NVIDIA calls unused, is never ignored.
  if (!info.known || !info.in_use) return XidVerdict::kSuspect;
  if (info.fatal) return XidVerdict::kFatal;
  switch (info.cause) {
    case XidCause::kApplication: return XidVerdict::kApplication;
    case XidCause::kInformational: return XidVerdict::kInformational;
    default: break;
  }
  return info.resolution == XidResolution::kNone ? XidVerdict::kInformational
                                                 : XidVerdict::kSuspect;
}

std::string_view XidCauseName(XidCause c) { return ToName(kCauses, c); }
std::string_view XidResolutionName(XidResolution r) { return ToName(kResolutions, r); }
std::string_view XidVerdictName(XidVerdict v) {
  switch (v) {
    case XidVerdict::kInformational: return "informational";
    case XidVerdict::kApplication: return "application";
    case XidVerdict::kSuspect: return "suspect";
    case XidVerdict::kFatal: return "fatal";
  }
  return "?";
}

std::string XidDescription(int xid) { return LookupXid(xid).description; }
bool XidIsFatal(int xid) { return LookupXid(xid).fatal; }

}  // namespace gpuherd::gpu
