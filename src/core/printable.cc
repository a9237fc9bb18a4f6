#include "core/printable.h"

#include "core/utf8.h"

namespace gpuherd {
namespace {

constexpr char kHex[] = "0123456789abcdef";

void AppendHex(const char* prefix, unsigned char c, std::string* out) {
  *out += prefix;
  *out += kHex[c >> 4];
  *out += kHex[c & 0xf];
}

// Appends the escape of the ASCII control character `c`.
void AppendControl(unsigned char c, std::string* out) {
  switch (c) {
    case '\0': *out += "\\0"; break;
    case '\n': *out += "\\n"; break;
    case '\r': *out += "\\r"; break;
    case '\t': *out += "\\t"; break;
    case 0x1b: *out += "\\e"; break;
    default: AppendHex("\\x", c, out);
  }
}

std::string Escape(std::string_view text, bool keep_newline) {
  std::string out;
  out.reserve(text.size() + 8);
  for (size_t i = 0; i < text.size();) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c < 0x80) {
      if (c >= 0x20 && c != 0x7f) {
        out += static_cast<char>(c);
      } else if (keep_newline && c == '\n') {
        out += '\n';
      } else {
        AppendControl(c, &out);
      }
      ++i;
      continue;
    }
    const size_t len = Utf8SequenceLength(text, i);
    if (len == 0) {
      AppendHex("\\x", c, &out);
      ++i;
      continue;
    }
    // C1 controls, U+0080..U+009F, are 0xC2 0x80..0x9F (0x9B is a CSI).
    const auto next = static_cast<unsigned char>(text[i + 1]);
    if (c == 0xc2 && next <= 0x9f) {
      AppendHex("\\u00", next, &out);
    } else {
      out.append(text.substr(i, len));
    }
    i += len;
  }
  return out;
}

// Plain printable ASCII needs nothing: the quick answer for most text.
bool PlainAscii(std::string_view text) {
  for (char ch : text) {
    const auto c = static_cast<unsigned char>(ch);
    if (c < 0x20 || c >= 0x7f) return false;
  }
  return true;
}

}  // namespace

std::string Printable(std::string_view text) {
  if (PlainAscii(text)) return std::string(text);
  return Escape(text, false);
}

std::string PrintableLines(std::string_view text) {
  if (PlainAscii(text)) return std::string(text);
  return Escape(text, true);
}

bool NeedsEscape(std::string_view text) { return !PlainAscii(text) && Escape(text, false) != text; }

std::string MarkdownText(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    if (c == '\\' || c == '|') out += '\\';
    out += c;
  }
  return Printable(out);
}

std::string CsvField(std::string_view text) {
  std::string field = Printable(text);
  if (field.find_first_of(",\"") == std::string::npos) return field;
  std::string quoted = "\"";
  for (char c : field) {
    if (c == '"') quoted += '"';
    quoted += c;
  }
  return quoted + "\"";
}

}  // namespace gpuherd
