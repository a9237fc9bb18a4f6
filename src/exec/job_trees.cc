#include "exec/job_trees.h"

#include <cctype>

namespace gpuherd::exec {
namespace {

bool IsPositiveNumber(const std::string& text) {
  if (text.empty() || text.size() > 18 || text[0] == '0') return false;
  for (char c : text) {
    if (!std::isdigit(static_cast<unsigned char>(c))) return false;
  }
  return true;
}

}  // namespace

std::string AttemptRecordDir(const std::string& records, int64_t job_id, int attempt) {
  return records + "/" + std::to_string(job_id) + "/" + std::to_string(attempt);
}

bool SplitAttemptRecordDir(const std::string& record_dir, std::string* base, std::string* relative) {
  const size_t last = record_dir.rfind('/');
  if (last == std::string::npos || last == 0) return false;
  const size_t before = record_dir.rfind('/', last - 1);
  if (before == std::string::npos || before == 0) return false;
  const std::string id = record_dir.substr(before + 1, last - before - 1);
  const std::string attempt = record_dir.substr(last + 1);
  if (!IsPositiveNumber(id) || !IsPositiveNumber(attempt)) return false;
  *base = record_dir.substr(0, before);
  *relative = id + "/" + attempt;
  return true;
}

}  // namespace gpuherd::exec
