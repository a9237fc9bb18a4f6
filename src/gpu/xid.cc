#include "gpu/xid.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <set>

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

}  // namespace

Result<std::vector<XidInfo>> ParseXidCatalogue(std::string_view yaml) {
  std::vector<XidInfo> out;
  try {
    YAML::Node root = YAML::Load(std::string(yaml));
    YAML::Node list = root["xids"];
    if (!list || !list.IsSequence()) return InvalidArgument("XID catalogue: no `xids` list");
    std::set<int> seen;
    for (const YAML::Node& n : list) {
      XidInfo info;
      info.xid = n["xid"].as<int>();
      std::string where = "XID catalogue entry " + std::to_string(info.xid);
      if (info.xid < 1 || info.xid > 65535) return InvalidArgument(where + ": number out of range");
      if (!seen.insert(info.xid).second) return InvalidArgument(where + ": listed twice");
      info.mnemonic = n["mnemonic"].as<std::string>();
      info.in_use = n["in_use"].as<bool>();
      info.fatal = n["fatal"].as<bool>();
      info.description = n["description"].as<std::string>();
      if (!FromName(kCauses, n["cause"].as<std::string>(), &info.cause)) {
        return InvalidArgument(where + ": unknown cause '" + n["cause"].as<std::string>() + "'");
      }
      if (!FromName(kResolutions, n["resolution"].as<std::string>(), &info.resolution)) {
        return InvalidArgument(where + ": unknown resolution '" +
                               n["resolution"].as<std::string>() + "'");
      }
      if (info.description.empty()) return InvalidArgument(where + ": no description");
      out.push_back(std::move(info));
    }
  } catch (const YAML::Exception& e) {
    return InvalidArgument(std::string("XID catalogue: ") + e.what());
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
