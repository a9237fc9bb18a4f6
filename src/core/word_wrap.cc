#include "core/word_wrap.h"

namespace gpuherd {

std::vector<std::string> WrapWords(std::string_view text, size_t width) {
  std::vector<std::string> lines;
  std::string line;
  size_t start = 0;
  while (start < text.size()) {
    size_t space = text.find(' ', start);
    if (space == std::string_view::npos) space = text.size();
    const std::string_view word = text.substr(start, space - start);
    start = space + 1;
    if (!line.empty() && line.size() + 1 + word.size() > width) {
      lines.push_back(std::move(line));
      line.clear();
    }
    if (!line.empty()) line += ' ';
    line += word;
  }
  lines.push_back(std::move(line));
  return lines;
}

}  // namespace gpuherd
