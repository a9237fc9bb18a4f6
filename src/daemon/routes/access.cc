#include "daemon/routes/access.h"

#include <algorithm>
#include <cctype>

#include <boost/asio/ip/address.hpp>

#include "api/jobs.h"
#include "http/json_body.h"

namespace gpuherd::daemon::routes {
namespace {

std::string Lower(std::string text) {
  for (char& c : text) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return text;
}

// "Name:7480" → "name"; "[::1]:7480" → "[::1]"; a trailing dot goes.
std::string HostName(const std::string& host) {
  std::string name = host;
  if (!name.empty() && name.front() == '[') {
    size_t close = name.find(']');
    name = close == std::string::npos ? name : name.substr(0, close + 1);
  } else if (size_t colon = name.rfind(':'); colon != std::string::npos) {
    name.resize(colon);
  }
  if (!name.empty() && name.back() == '.') name.pop_back();
  return Lower(name);
}

bool IsIpLiteral(const std::string& name) {
  std::string bare = name.size() > 2 && name.front() == '[' && name.back() == ']' ? name.substr(1, name.size() - 2)
                                                                                   : name;
  boost::system::error_code ec;
  boost::asio::ip::make_address(bare, ec);
  // "[1.2.3.4]" and a bracket-less IPv6 are not how a browser writes them.
  return !ec && (name.front() == '[') == (bare.find(':') != std::string::npos);
}

}  // namespace

std::vector<std::string> AllowedHosts(const std::string& hostname, const std::vector<std::string>& extra) {
  std::vector<std::string> allowed = {"localhost"};
  if (!hostname.empty()) allowed.push_back(HostName(hostname));
  for (const std::string& name : extra) allowed.push_back(HostName(name));
  return allowed;
}

std::optional<http::Response> CheckHost(const http::Request& request, const std::vector<std::string>& allowed) {
  if (request.via_unix_socket) return std::nullopt;
  auto it = request.headers.find("host");
  if (it == request.headers.end() || it->second.empty()) {
    return http::ErrorResponse(400, "the request has no Host header; HTTP/1.1 requires one");
  }
  std::string name = HostName(it->second);
  if (IsIpLiteral(name) || std::find(allowed.begin(), allowed.end(), name) != allowed.end()) return std::nullopt;
  std::string names;
  for (const std::string& a : allowed) names += (names.empty() ? "" : ", ") + a;
  return http::ErrorResponse(
      421, "this gpuherd daemon does not answer to the name '" + http::Excerpt(name) +
               "' (a page that renamed itself to this machine, or a name it was not told about): use " + names +
               " or an IP address, or start the daemon with --allow-host " + http::Excerpt(name));
}

bool MaySeeJobInternals(const Caller& caller, const std::string& job_user) {
  if (caller.admin) return true;
  return caller.authenticated && !caller.user.empty() && caller.user == job_user;
}

void HideJobInternals(nlohmann::json& job) {
  if (!job.is_object()) return;
  for (const char* field : api::kJobPrivateFields) job.erase(field);
}

Status JobInternalsRefused(const Caller& caller, const std::string& what) {
  if (!caller.authenticated) {
    return Unauthenticated(what + " is its owner's: over TCP send the API token as \"Authorization: Bearer "
                           "<token>\", or read it as its owner over the unix socket");
  }
  return PermissionDenied(what + " is readable only by the job's owner and admins");
}

}  // namespace gpuherd::daemon::routes
