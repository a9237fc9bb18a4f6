#include "cli/table.h"

#include <algorithm>
#include <cctype>

namespace gpuherd::cli {
namespace {

// Appends the escape for the control character `c`, or returns false when
// `c` is not one.
bool AppendEscaped(unsigned char c, std::string* out) {
  if (c >= 0x20 && c != 0x7f) return false;
  switch (c) {
    case '\0': *out += "\\0"; break;
    case '\n': *out += "\\n"; break;
    case '\r': *out += "\\r"; break;
    case '\t': *out += "\\t"; break;
    case 0x1b: *out += "\\e"; break;
    default: {
      static const char kHex[] = "0123456789abcdef";
      *out += "\\x";
      *out += kHex[c >> 4];
      *out += kHex[c & 0xf];
    }
  }
  return true;
}

// Length of a colour sequence "ESC [ digits/; m" at text[i], or 0.
size_t ColourSequence(std::string_view text, size_t i) {
  if (text[i] != 0x1b || i + 1 >= text.size() || text[i + 1] != '[') return 0;
  for (size_t j = i + 2; j < text.size(); ++j) {
    if (text[j] == 'm') return j - i + 1;
    if (!(std::isdigit(static_cast<unsigned char>(text[j])) || text[j] == ';')) return 0;
  }
  return 0;
}

std::string Escape(std::string_view text, bool keep_colour, bool keep_newline = false) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (keep_colour) {
      if (size_t n = ColourSequence(text, i); n > 0) {
        out.append(text.substr(i, n));
        i += n - 1;
        continue;
      }
    }
    if (keep_newline && c == '\n') {
      out += '\n';
      continue;
    }
    if (AppendEscaped(c, &out)) continue;
    // C1 controls, U+0080..U+009F, are 0xC2 0x80..0x9F in UTF-8 (0x9B is a CSI).
    if (c == 0xc2 && i + 1 < text.size() && static_cast<unsigned char>(text[i + 1]) >= 0x80 &&
        static_cast<unsigned char>(text[i + 1]) <= 0x9f) {
      static const char kHex[] = "0123456789abcdef";
      const auto d = static_cast<unsigned char>(text[i + 1]);
      out += "\\u00";
      out += kHex[d >> 4];
      out += kHex[d & 0xf];
      ++i;
      continue;
    }
    out += static_cast<char>(c);
  }
  return out;
}

}  // namespace

std::string Printable(std::string_view text) { return Escape(text, false); }
std::string PrintableLines(std::string_view text) { return Escape(text, false, true); }
std::string PrintableCell(std::string_view text) { return Escape(text, true); }

size_t DisplayWidth(const std::string& text) {
  size_t width = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    unsigned char c = static_cast<unsigned char>(text[i]);
    if (c == 0x1b) {  // skip "ESC [ ... m"
      while (i < text.size() && text[i] != 'm') ++i;
      continue;
    }
    if ((c & 0xC0) != 0x80) ++width;  // count code points, not continuation bytes
  }
  return width;
}

std::string Colored(const std::string& text, const char* ansi_code, bool enabled) {
  if (!enabled) return text;
  return std::string("\x1b[") + ansi_code + "m" + text + "\x1b[0m";
}

std::string Table::Render(const std::vector<size_t>& right_aligned) const {
  std::vector<std::vector<std::string>> rows;
  rows.reserve(rows_.size());
  for (const auto& row : rows_) {
    std::vector<std::string> cells;
    for (const std::string& cell : row) cells.push_back(PrintableCell(cell));
    rows.push_back(std::move(cells));
  }
  std::vector<size_t> widths(headers_.size(), 0);
  for (size_t c = 0; c < headers_.size(); ++c) widths[c] = DisplayWidth(headers_[c]);
  for (const auto& row : rows) {
    for (size_t c = 0; c < row.size() && c < widths.size(); ++c) widths[c] = std::max(widths[c], DisplayWidth(row[c]));
  }
  auto line = [&](const std::vector<std::string>& cells) {
    std::string out;
    for (size_t c = 0; c < widths.size(); ++c) {
      std::string cell = c < cells.size() ? cells[c] : "";
      std::string pad(widths[c] - std::min(widths[c], DisplayWidth(cell)), ' ');
      bool right = std::find(right_aligned.begin(), right_aligned.end(), c) != right_aligned.end();
      out += right ? pad + cell : cell + (c + 1 < widths.size() ? pad : "");
      if (c + 1 < widths.size()) out += "  ";
    }
    while (!out.empty() && out.back() == ' ') out.pop_back();
    return out + "\n";
  };
  std::string out = line(headers_);
  for (const auto& row : rows) out += line(row);
  return out;
}

}  // namespace gpuherd::cli
