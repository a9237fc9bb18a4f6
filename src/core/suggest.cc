#include "core/suggest.h"

#include <algorithm>
#include <numeric>

namespace gpuherd {
namespace {

size_t EditDistance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  std::iota(row.begin(), row.end(), 0);
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

}  // namespace

std::string JoinNames(const std::vector<std::string>& names) {
  std::string out;
  for (const std::string& name : names) {
    if (!out.empty()) out += ", ";
    out += name;
  }
  return out;
}

std::string Closest(const std::string& word, const std::vector<std::string>& known) {
  const size_t limit = std::max<size_t>(1, word.size() * 2 / 5);
  std::string best;
  size_t best_distance = limit + 1;
  for (const std::string& candidate : known) {
    size_t d = EditDistance(word, candidate);
    if (d < best_distance) {
      best = candidate;
      best_distance = d;
    }
  }
  if (!best.empty()) return best;
  // A longer or shorter form of the same word ("preprocess" for "prepare"):
  // the longest shared beginning, if it is at least kMinPrefix letters.
  constexpr size_t kMinPrefix = 4;
  size_t best_prefix = kMinPrefix - 1;
  for (const std::string& candidate : known) {
    size_t n = 0;
    while (n < word.size() && n < candidate.size() && word[n] == candidate[n]) ++n;
    if (n > best_prefix) {
      best = candidate;
      best_prefix = n;
    }
  }
  return best;
}

std::string DidYouMean(const std::string& word, const std::vector<std::string>& known) {
  std::string guess = Closest(word, known);
  return guess.empty() ? "" : " (did you mean '" + guess + "'?)";
}

}  // namespace gpuherd
