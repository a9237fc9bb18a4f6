#include "cli/table.h"

#include <algorithm>

namespace gpuherd::cli {

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
  std::vector<size_t> widths(headers_.size(), 0);
  for (size_t c = 0; c < headers_.size(); ++c) widths[c] = DisplayWidth(headers_[c]);
  for (const auto& row : rows_) {
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
  for (const auto& row : rows_) out += line(row);
  return out;
}

}  // namespace gpuherd::cli
