// Greedy word wrapping for text shown to people (the doctor's findings, its
// fix script's comments).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace gpuherd {

// `text` cut at spaces into lines of at most `width` characters, each word
// on the first line it fits; a word longer than `width` stands alone. Words
// stay joined by one space as written. Never empty: "" gives one empty line.
std::vector<std::string> WrapWords(std::string_view text, size_t width);

}  // namespace gpuherd
