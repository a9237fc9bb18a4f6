#include "core/utf8.h"

namespace gpuherd {

size_t Utf8SequenceLength(std::string_view text, size_t i) {
  const auto* s = reinterpret_cast<const unsigned char*>(text.data());
  const size_t n = text.size();
  const unsigned char c = s[i];
  if (c < 0x80) return 1;
  // Length and the range of the second byte (Table 3-7 of the Unicode
  // standard): the narrower ranges exclude overlongs, surrogates and code
  // points above U+10FFFF.
  size_t len;
  unsigned char lo = 0x80, hi = 0xBF;
  if (c >= 0xC2 && c <= 0xDF) {
    len = 2;
  } else if (c >= 0xE0 && c <= 0xEF) {
    len = 3;
    if (c == 0xE0) lo = 0xA0;
    if (c == 0xED) hi = 0x9F;
  } else if (c >= 0xF0 && c <= 0xF4) {
    len = 4;
    if (c == 0xF0) lo = 0x90;
    if (c == 0xF4) hi = 0x8F;
  } else {
    return 0;
  }
  if (n - i < len) return 0;
  if (s[i + 1] < lo || s[i + 1] > hi) return 0;
  for (size_t k = 2; k < len; ++k) {
    if (s[i + k] < 0x80 || s[i + k] > 0xBF) return 0;
  }
  return len;
}

size_t FirstInvalidUtf8(std::string_view text) {
  size_t i = 0;
  while (i < text.size()) {
    const size_t len = Utf8SequenceLength(text, i);
    if (len == 0) return i;
    i += len;
  }
  return text.size();
}

bool IsUtf8(std::string_view text) { return FirstInvalidUtf8(text) == text.size(); }

}  // namespace gpuherd
