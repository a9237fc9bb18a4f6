// Parsing JSON that came from someone else (a request body, a response, a
// job's file) with bounds: a nesting depth and a size. nlohmann's parser
// itself is iterative, but dump(), comparisons and copies of its values
// recurse, so a value 200,000 arrays deep overflows the stack later, far from
// where it was read. Every untrusted text goes through ParseJson first.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "core/status.h"

namespace gpuherd::http {

struct JsonLimits {
  size_t max_bytes = size_t{1} << 20;
  int max_depth = 64;  // arrays and objects inside one another
};

// The parsed value, or kInvalidArgument saying what is wrong (too large, too
// deep, or where the syntax breaks) in a message of bounded size that quotes
// none of the input beyond a short, escaped excerpt.
Result<nlohmann::json> ParseJson(std::string_view text, const JsonLimits& limits = {});

// The deepest nesting of arrays and objects in `text`, counting brackets
// outside strings; stops counting once above `stop_above`.
int JsonDepth(std::string_view text, int stop_above);

// At most `max_bytes` of `text` for a message: control characters and
// non-ASCII bytes as \xNN, "..." when cut.
std::string Excerpt(std::string_view text, size_t max_bytes = 80);

// value.dump() of at most `max_bytes` (cut with "..."), safe on invalid
// UTF-8; for values that passed ParseJson's depth bound.
std::string DumpCapped(const nlohmann::json& value, size_t max_bytes = 200);

}  // namespace gpuherd::http
