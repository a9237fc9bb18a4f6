#include "cli/table.h"

#include <algorithm>

namespace gpuherd::cli {
namespace {

// Length of a colour sequence that Colored writes at text[i] (ESC [ code m,
// code one of kRed, kYellow, kGreen, kBold or the reset 0), or 0.
size_t ColourSequence(std::string_view text, size_t i) {
  static constexpr const char* kCodes[] = {kRed, kYellow, kGreen, kBold, "0"};
  if (text[i] != 0x1b || text.substr(i + 1, 1) != "[") return 0;
  for (const char* code : kCodes) {
    const std::string_view c(code);
    if (text.substr(i + 2, c.size()) == c && text.substr(i + 2 + c.size(), 1) == "m") return c.size() + 3;
  }
  return 0;
}

// Whether `text` holds a byte Printable could change. Most cells hold none
// (20,000 rows of `ps` are 180,000 cells), and those are copied as they are.
bool MayNeedEscape(std::string_view text) {
  for (char ch : text) {
    const auto c = static_cast<unsigned char>(ch);
    if (c < 0x20 || c >= 0x7f) return true;
  }
  return false;
}

}  // namespace

std::string PrintableCell(std::string_view text) {
  if (!MayNeedEscape(text)) return std::string(text);
  std::string out;
  out.reserve(text.size());
  size_t plain = 0;  // where the text not yet escaped starts
  for (size_t i = 0; i < text.size(); ++i) {
    if (size_t n = ColourSequence(text, i); n > 0) {
      out += Printable(text.substr(plain, i - plain));
      out.append(text.substr(i, n));
      i += n - 1;
      plain = i + 1;
    }
  }
  out += Printable(text.substr(plain));
  return out;
}

size_t DisplayWidth(const std::string& text) {
  bool plain = true;  // ASCII without escapes: one column a byte
  for (char ch : text) {
    const auto c = static_cast<unsigned char>(ch);
    if (c == 0x1b || c >= 0x80) {
      plain = false;
      break;
    }
  }
  if (plain) return text.size();
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

namespace {

// RenderRows and WriteRows: each finished line (with its newline) goes to
// `emit`, so that neither holds more than a line besides the rows.
void EmitRows(const std::vector<std::string>& headers, size_t rows, const RowAt& row_at,
              const std::vector<size_t>& right_aligned, const std::function<void(const std::string&)>& emit) {
  // Two passes over the cells, widths then lines, with no copy of them: a
  // cell is escaped (into `scratch`) only when it may need it, which few do.
  const size_t columns = headers.size();
  std::string scratch;
  auto text_of = [&scratch](const std::vector<std::string>& row, size_t c, bool escape) -> const std::string& {
    static const std::string kEmpty;
    if (c >= row.size()) return kEmpty;
    if (!escape || !MayNeedEscape(row[c])) return row[c];
    scratch = PrintableCell(row[c]);
    return scratch;
  };
  std::vector<size_t> widths(columns, 0);
  auto measure = [&](const std::vector<std::string>& row, bool escape) {
    for (size_t c = 0; c < columns; ++c) widths[c] = std::max(widths[c], DisplayWidth(text_of(row, c, escape)));
  };
  measure(headers, false);
  for (size_t i = 0; i < rows; ++i) measure(row_at(i), true);
  std::vector<bool> right(columns, false);
  for (size_t c : right_aligned) {
    if (c < columns) right[c] = true;
  }
  std::string line;
  auto append = [&](const std::vector<std::string>& row, bool escape) {
    line.clear();
    for (size_t c = 0; c < columns; ++c) {
      const std::string& text = text_of(row, c, escape);
      const size_t pad = widths[c] - std::min(widths[c], DisplayWidth(text));
      if (right[c]) {
        line.append(pad, ' ');
        line += text;
      } else {
        line += text;
        if (c + 1 < columns) line.append(pad, ' ');
      }
      if (c + 1 < columns) line += "  ";
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    line += '\n';
    emit(line);
  };
  append(headers, false);
  for (size_t i = 0; i < rows; ++i) append(row_at(i), true);
}

}  // namespace

std::string RenderRows(const std::vector<std::string>& headers, size_t rows, const RowAt& row_at,
                       const std::vector<size_t>& right_aligned) {
  std::string out;
  EmitRows(headers, rows, row_at, right_aligned, [&out](const std::string& line) { out += line; });
  return out;
}

void WriteRows(std::FILE* out, const std::vector<std::string>& headers, size_t rows, const RowAt& row_at,
               const std::vector<size_t>& right_aligned) {
  EmitRows(headers, rows, row_at, right_aligned,
           [out](const std::string& line) { std::fwrite(line.data(), 1, line.size(), out); });
}

std::string Table::Render(const std::vector<size_t>& right_aligned) const {
  return RenderRows(headers_, rows_.size(), [this](size_t i) -> const std::vector<std::string>& { return rows_[i]; },
                    right_aligned);
}

}  // namespace gpuherd::cli
