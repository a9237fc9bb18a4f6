// Plain-text tables for the terminal: columns sized to their widest cell.
#pragma once

#include <cstdio>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "core/printable.h"

namespace gpuherd::cli {

// Row `i`'s cells; the reference stays valid until the next call.
using RowAt = std::function<const std::vector<std::string>&(size_t i)>;

// A table of `rows` rows whose cells `row_at` makes on demand, twice each
// (once to measure, once to write), so that a long listing is never held as
// cells: for 20,000 jobs those were 6 MB, mostly page faults on a VM. Cells
// are escaped and aligned as Table's.
std::string RenderRows(const std::vector<std::string>& headers, size_t rows, const RowAt& row_at,
                       const std::vector<size_t>& right_aligned = {});
// The same, written line by line to `out` instead of into one string.
void WriteRows(std::FILE* out, const std::vector<std::string>& headers, size_t rows, const RowAt& row_at,
               const std::vector<size_t>& right_aligned = {});

class Table {
 public:
  explicit Table(std::vector<std::string> headers) : headers_(std::move(headers)) {}
  // Cells may contain ANSI colour codes; they do not count towards width.
  // Any other control character in a cell is printed escaped (Printable).
  void AddRow(std::vector<std::string> cells) { rows_.push_back(std::move(cells)); }
  void Reserve(size_t rows) { rows_.reserve(rows); }
  // Columns listed in `right_aligned` (by index) are aligned right (numbers).
  std::string Render(const std::vector<size_t>& right_aligned = {}) const;

 private:
  std::vector<std::string> headers_;
  std::vector<std::vector<std::string>> rows_;
};

// User text made safe for a terminal (core/printable.h): every place the CLI
// prints a name, label, command, path, reason or message that a user or a
// job wrote goes through Printable (tables do it for their cells too); JSON
// output needs nothing, since JSON escapes control characters itself.
using gpuherd::Printable;
using gpuherd::PrintableLines;
// Printable, except that the colour sequences Colored writes ("ESC [ 31 m"
// with one of the codes below, and "ESC [ 0 m") are kept: a table cell. Any
// other sequence, SGR included, is escaped, so text that reached a cell
// unescaped still cannot hide itself or restyle the rest of the line.
std::string PrintableCell(std::string_view text);

// Display width of a UTF-8 string without ANSI escape sequences.
size_t DisplayWidth(const std::string& text);

// Wraps text in an ANSI colour when `enabled`.
std::string Colored(const std::string& text, const char* ansi_code, bool enabled);
inline constexpr const char* kRed = "31";
inline constexpr const char* kYellow = "33";
inline constexpr const char* kGreen = "32";
inline constexpr const char* kBold = "1";

}  // namespace gpuherd::cli
