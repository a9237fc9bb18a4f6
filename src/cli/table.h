// Plain-text tables for the terminal: columns sized to their widest cell.
#pragma once

#include <string>
#include <vector>

namespace gpuherd::cli {

class Table {
 public:
  explicit Table(std::vector<std::string> headers) : headers_(std::move(headers)) {}
  // Cells may contain ANSI colour codes; they do not count towards width.
  void AddRow(std::vector<std::string> cells) { rows_.push_back(std::move(cells)); }
  // Columns listed in `right_aligned` (by index) are aligned right (numbers).
  std::string Render(const std::vector<size_t>& right_aligned = {}) const;

 private:
  std::vector<std::string> headers_;
  std::vector<std::vector<std::string>> rows_;
};

// Display width of a UTF-8 string without ANSI escape sequences.
size_t DisplayWidth(const std::string& text);

// Wraps text in an ANSI colour when `enabled`.
std::string Colored(const std::string& text, const char* ansi_code, bool enabled);
inline constexpr const char* kRed = "31";
inline constexpr const char* kYellow = "33";
inline constexpr const char* kGreen = "32";
inline constexpr const char* kBold = "1";

}  // namespace gpuherd::cli
