#include "http/url_client.h"

#include <openssl/ssl.h>

#include <boost/asio/ssl.hpp>

#include "http/exchange.h"

namespace gpuherd::http {

using namespace internal;  // NOLINT: this file's half of exchange.h

namespace {

namespace ssl = net::ssl;
constexpr uint64_t kMaxBodyBytes = uint64_t{1} << 20;

template <class Stream>
Result<ClientResponse> Send(Exchange<Stream>& exchange, bhttp::request<bhttp::string_body>& request) {
  GPUHERD_RETURN_IF_ERROR(exchange.Write(request));
  bhttp::response_parser<bhttp::string_body> parser;
  parser.body_limit(kMaxBodyBytes);
  GPUHERD_RETURN_IF_ERROR(exchange.ReadHeader(parser));
  if (!parser.is_done()) GPUHERD_RETURN_IF_ERROR(exchange.ReadBody(parser));
  ClientResponse response;
  response.status = static_cast<int>(parser.get().result_int());
  response.headers = CollectHeaders(parser.get());
  response.body = std::move(parser.get().body());
  return response;
}

}  // namespace

Result<Url> ParseUrl(const std::string& text) {
  auto bad = [&](const std::string& why) {
    return InvalidArgument("URL '" + text + "' " + why);
  };
  Url url;
  std::string rest;
  if (text.rfind("http://", 0) == 0) {
    rest = text.substr(7);
    url.port = 80;
  } else if (text.rfind("https://", 0) == 0) {
    rest = text.substr(8);
    url.tls = true;
    url.port = 443;
  } else {
    return bad("must start with http:// or https://");
  }
  if (text.find_first_of(" \r\n\t") != std::string::npos) return bad("holds white space");
  size_t slash = rest.find_first_of("/?");
  std::string authority = rest.substr(0, slash);
  url.target = slash == std::string::npos ? "/" : rest.substr(slash);
  if (url.target[0] == '?') url.target.insert(0, "/");
  if (authority.find('@') != std::string::npos) return bad("may not hold user information");
  size_t colon = authority.rfind(':');
  size_t bracket = authority.rfind(']');
  if (colon != std::string::npos && (bracket == std::string::npos || colon > bracket)) {
    std::string port = authority.substr(colon + 1);
    authority.resize(colon);
    if (port.empty() || port.size() > 5 || port.find_first_not_of("0123456789") != std::string::npos ||
        std::stoi(port) < 1 || std::stoi(port) > 65535) {
      return bad("has a port outside 1..65535");
    }
    url.port = std::stoi(port);
  }
  if (authority.empty()) return bad("has no host");
  url.host = authority;
  return url;
}

Result<ClientResponse> RequestUrl(const Url& url, const std::string& method, const std::string& body,
                                  const std::map<std::string, std::string>& headers,
                                  DurationMs timeout) {
  bool default_port = url.port == (url.tls ? 443 : 80);
  std::string host_header = default_port ? url.host : url.host + ":" + std::to_string(url.port);
  auto request = BuildRequest(method, url.target, body, headers, host_header, "gpuherd");
  if (!request.ok()) return request.status();
  auto endpoints = ResolveTcp(url.host, url.port);
  if (!endpoints.ok()) return endpoints.status();
  std::string what = (url.tls ? "https://" : "http://") + host_header;
  try {
    if (!url.tls) {
      Exchange<Tcp::socket> exchange(what, "", timeout);
      GPUHERD_RETURN_IF_ERROR(exchange.Connect(*endpoints));
      return Send(exchange, *request);
    }
    ssl::context context(ssl::context::tls_client);
    context.set_default_verify_paths();
    context.set_verify_mode(ssl::verify_peer);
    std::string name = url.host;
    if (name.size() > 2 && name.front() == '[') name = name.substr(1, name.size() - 2);
    context.set_verify_callback(ssl::host_name_verification(name));
    Exchange<ssl::stream<Tcp::socket>> exchange(what, "", timeout, context);
    GPUHERD_RETURN_IF_ERROR(exchange.Connect(*endpoints));
    // Server name indication, for hosts that serve several names.
    SSL_set_tlsext_host_name(exchange.stream().native_handle(), name.c_str());
    GPUHERD_RETURN_IF_ERROR(exchange.Step("the TLS handshake", [&](auto handler) {
      exchange.stream().async_handshake(ssl::stream_base::client, std::move(handler));
    }));
    return Send(exchange, *request);
  } catch (const std::exception& e) {  // Asio's SSL context reports failures by throwing
    return Unavailable(what + ": " + e.what());
  }
}

}  // namespace gpuherd::http
