// UTF-8 validity, as nlohmann::json checks it when it writes a string: text
// that fails here makes json::dump() throw, so text from a source that does
// not validate it (YAML, argv, files) is checked before it becomes JSON.
#pragma once

#include <cstddef>
#include <string_view>

namespace gpuherd {

// Well-formed UTF-8 (RFC 3629): no overlong forms, no surrogates
// (U+D800..U+DFFF), nothing above U+10FFFF, no cut-off sequence.
bool IsUtf8(std::string_view text);

// The length in bytes (1 to 4) of the well-formed UTF-8 sequence that starts
// at text[i], or 0 when none does there. `i` must be below text.size().
size_t Utf8SequenceLength(std::string_view text, size_t i);

// The offset of the first byte that is not part of well-formed UTF-8, or
// text.size() when all of it is.
size_t FirstInvalidUtf8(std::string_view text);

}  // namespace gpuherd
