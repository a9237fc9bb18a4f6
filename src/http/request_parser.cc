#include "http/request_parser.h"

#include <cctype>
#include <utility>

#include <boost/asio/buffer.hpp>

namespace gpuherd::http {
namespace {

namespace bhttp = boost::beast::http;

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Decodes %XX escapes, and '+' as a space when `plus_is_space` (query
// strings). Fails on a malformed escape or an encoded NUL.
bool PercentDecode(std::string_view in, bool plus_is_space, std::string* out) {
  out->clear();
  out->reserve(in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    char c = in[i];
    if (c == '%') {
      if (i + 2 >= in.size()) return false;
      int hi = HexValue(in[i + 1]);
      int lo = HexValue(in[i + 2]);
      if (hi < 0 || lo < 0 || (hi == 0 && lo == 0)) return false;
      out->push_back(static_cast<char>(hi * 16 + lo));
      i += 2;
    } else if (c == '+' && plus_is_space) {
      out->push_back(' ');
    } else {
      out->push_back(c);
    }
  }
  return true;
}

// Fills path and query from the raw target. Returns what is wrong with it, or
// an empty string.
std::string ParseTarget(const std::string& target, Request* request) {
  if (target.empty() || target[0] != '/') {
    return "the request target must be a path starting with '/', got '" + target + "'";
  }
  std::string_view view(target);
  size_t question = view.find('?');
  std::string_view path = view.substr(0, question);
  if (!PercentDecode(path, /*plus_is_space=*/false, &request->path)) {
    return "malformed percent-encoding in the path '" + std::string(path) +
           "'; write '%' as %25";
  }
  if (question == std::string_view::npos) return "";
  std::string_view query = view.substr(question + 1);
  while (!query.empty()) {
    size_t amp = query.find('&');
    std::string_view pair = query.substr(0, amp);
    query = amp == std::string_view::npos ? std::string_view() : query.substr(amp + 1);
    if (pair.empty()) continue;
    size_t eq = pair.find('=');
    std::string key;
    std::string value;
    if (!PercentDecode(pair.substr(0, eq), true, &key) ||
        (eq != std::string_view::npos && !PercentDecode(pair.substr(eq + 1), true, &value))) {
      return "malformed percent-encoding in the query parameter '" + std::string(pair) +
             "'; write '%' as %25";
    }
    request->query[key] = std::move(value);
  }
  return "";
}

}  // namespace

void SetLimits(const RequestLimits& limits, RequestParser* parser) {
  parser->body_limit(limits.max_body_bytes);
  parser->header_limit(static_cast<std::uint32_t>(limits.max_header_bytes));
}

RequestFailure FailureOf(const boost::system::error_code& ec, const RequestLimits& limits) {
  static const auto& parse_category = bhttp::make_error_code(bhttp::error::bad_method).category();
  if (ec == bhttp::error::body_limit) {
    return {413, "the request body is larger than the limit of " + std::to_string(limits.max_body_bytes) +
                     " bytes; send less data per request"};
  }
  if (ec == bhttp::error::header_limit) {
    return {431, "the request headers are larger than " + std::to_string(limits.max_header_bytes) + " bytes"};
  }
  if (ec.category() == parse_category && ec != bhttp::error::end_of_stream && ec != bhttp::error::partial_message &&
      ec != bhttp::error::need_more) {
    return {400, "malformed HTTP request (" + ec.message() + "); send an HTTP/1.1 request"};
  }
  return {};
}

std::string FillRequest(RequestMessage&& message, Request* request) {
  request->method = std::string(message.method_string());
  request->target = std::string(message.target());
  std::string problem = ParseTarget(request->target, request);
  if (!problem.empty()) return problem;
  for (const auto& field : message) {
    std::string name(field.name_string());
    for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    auto [it, inserted] = request->headers.emplace(name, std::string(field.value()));
    if (!inserted) it->second.append(", ").append(field.value().data(), field.value().size());
  }
  request->body = std::move(message.body());
  return "";
}

ParsedRequest ParseRequest(std::string_view bytes, const RequestLimits& limits) {
  ParsedRequest parsed;
  RequestParser parser;
  SetLimits(limits, &parser);
  parser.eager(true);
  boost::system::error_code ec;
  while (!parser.is_done()) {
    size_t used = parser.put(boost::asio::buffer(bytes.data(), bytes.size()), ec);
    bytes.remove_prefix(used);
    if (ec == bhttp::error::need_more && !bytes.empty() && used > 0) {
      ec = {};
      continue;  // Beast takes a header in one piece; the rest follows
    }
    if (ec) {
      parsed.failure = FailureOf(ec, limits);
      return parsed;
    }
    if (used == 0) return parsed;  // incomplete: the server would wait
  }
  std::string problem = FillRequest(parser.release(), &parsed.request);
  if (!problem.empty()) {
    parsed.failure = {400, problem};
    return parsed;
  }
  parsed.ok = true;
  return parsed;
}

}  // namespace gpuherd::http
