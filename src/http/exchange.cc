#include "http/exchange.h"

#include <cctype>
#include <exception>

namespace gpuherd::http::internal {

std::string Lower(std::string text) {
  for (char& c : text) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return text;
}

bool HasLineBreak(std::string_view text) {
  return text.find_first_of("\r\n") != std::string_view::npos;
}

Result<bhttp::request<bhttp::string_body>> BuildRequest(
    const std::string& method, const std::string& target, const std::string& body,
    const std::map<std::string, std::string>& headers, const std::string& host,
    const std::string& user_agent) {
  if (method.empty() || HasLineBreak(method) || method.find(' ') != std::string::npos) {
    return InvalidArgument("invalid HTTP method '" + method + "'");
  }
  if (target.empty() || target[0] != '/' || HasLineBreak(target) ||
      target.find(' ') != std::string::npos) {
    return InvalidArgument("invalid request target '" + target +
                           "'; it must start with '/' and be percent-encoded");
  }
  bhttp::request<bhttp::string_body> request;
  try {
    request.version(11);
    bhttp::verb verb = bhttp::string_to_verb(method);
    if (verb == bhttp::verb::unknown) {
      request.method_string(method);
    } else {
      request.method(verb);
    }
    request.target(target);
    request.set(bhttp::field::host, host);
    request.set(bhttp::field::user_agent, user_agent);
    bool has_content_type = false;
    for (const auto& [name, value] : headers) {
      if (name.empty() || HasLineBreak(name) || HasLineBreak(value)) {
        return InvalidArgument("invalid HTTP header '" + name + "'");
      }
      if (Lower(name) == "content-type") has_content_type = true;
      request.set(name, value);
    }
    if (!body.empty() && !has_content_type) {
      request.set(bhttp::field::content_type, "application/json");
    }
    request.keep_alive(false);
    request.body() = body;
    request.prepare_payload();
  } catch (const std::exception& e) {  // Beast rejects malformed fields by throwing
    return InvalidArgument(std::string("cannot build the HTTP request: ") + e.what());
  }
  return request;
}

Result<std::vector<Tcp::endpoint>> ResolveTcp(const std::string& host, int port) {
  if (port <= 0 || port > 65535) {
    return InvalidArgument("the port must be 1..65535, got " + std::to_string(port));
  }
  std::vector<Tcp::endpoint> endpoints;
  ErrorCode ec;
  // "[::1]" as written in URLs and Host headers.
  std::string bare = host.size() > 2 && host.front() == '[' && host.back() == ']'
                         ? host.substr(1, host.size() - 2)
                         : host;
  net::ip::address address = net::ip::make_address(bare, ec);
  if (!ec) {
    endpoints.emplace_back(address, static_cast<uint16_t>(port));
    return endpoints;
  }
  net::io_context io;
  Tcp::resolver resolver(io);
  auto results = resolver.resolve(bare, std::to_string(port), ec);
  if (ec) return Unavailable("cannot resolve the host '" + host + "': " + Lower(ec.message()));
  for (const auto& entry : results) endpoints.push_back(entry.endpoint());
  return endpoints;
}

}  // namespace gpuherd::http::internal
