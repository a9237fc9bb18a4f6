// Wording helpers for error messages that name what is allowed and guess
// what was meant. Shared by every reader of user files.
#pragma once

#include <string>
#include <vector>

namespace gpuherd {

// "a, b, c".
std::string JoinNames(const std::vector<std::string>& names);

// The entry of `known` closest to `word` by edit distance, when it is
// close enough to be a likely typo (at most two fifths of the word's letters,
// and at least one, differ), or else the one sharing the longest beginning
// of at least four letters; "" when neither.
std::string Closest(const std::string& word, const std::vector<std::string>& known);

// " (did you mean 'epochs'?)" or "".
std::string DidYouMean(const std::string& word, const std::vector<std::string>& known);

}  // namespace gpuherd
