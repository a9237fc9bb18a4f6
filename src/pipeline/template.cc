#include "pipeline/template.h"

namespace gpuherd::pipeline {
namespace {

constexpr std::string_view kOpen = "${{";
constexpr std::string_view kClose = "}}";

bool IsBlank(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

std::string_view Trim(std::string_view s) {
  while (!s.empty() && IsBlank(s.front())) s.remove_prefix(1);
  while (!s.empty() && IsBlank(s.back())) s.remove_suffix(1);
  return s;
}

// Calls on_text for literal stretches and on_ref for each reference name.
template <typename OnText, typename OnRef>
Status Scan(std::string_view text, OnText on_text, OnRef on_ref) {
  size_t pos = 0;
  while (pos < text.size()) {
    size_t open = text.find(kOpen, pos);
    if (open == std::string_view::npos) {
      on_text(text.substr(pos));
      break;
    }
    on_text(text.substr(pos, open - pos));
    size_t close = text.find(kClose, open + kOpen.size());
    if (close == std::string_view::npos) {
      return InvalidArgument("\"" + std::string(text.substr(open)) +
                             "\" opens ${{ without a closing }}");
    }
    std::string_view name = Trim(text.substr(open + kOpen.size(), close - open - kOpen.size()));
    if (name.empty()) {
      return InvalidArgument("an empty ${{ }}; write a name such as ${{ params.epochs }}");
    }
    GPUHERD_RETURN_IF_ERROR(on_ref(std::string(name)));
    pos = close + kClose.size();
  }
  return Status::Ok();
}

}  // namespace

Result<std::vector<std::string>> SplitCommand(std::string_view line) {
  std::vector<std::string> args;
  std::string current;
  bool in_word = false;
  size_t i = 0;
  while (i < line.size()) {
    char c = line[i];
    if (IsBlank(c)) {
      if (in_word) args.push_back(std::move(current));
      current.clear();
      in_word = false;
      ++i;
      continue;
    }
    in_word = true;
    if (line.substr(i, kOpen.size()) == kOpen) {
      size_t close = line.find(kClose, i + kOpen.size());
      if (close == std::string_view::npos) {
        return InvalidArgument("\"" + std::string(line.substr(i)) +
                               "\" opens ${{ without a closing }}");
      }
      current.append(line.substr(i, close + kClose.size() - i));
      i = close + kClose.size();
    } else if (c == '\'') {
      size_t close = line.find('\'', i + 1);
      if (close == std::string_view::npos) {
        return InvalidArgument("the command has an unclosed ' quote: " + std::string(line));
      }
      current.append(line.substr(i + 1, close - i - 1));
      i = close + 1;
    } else if (c == '"') {
      ++i;
      bool closed = false;
      while (i < line.size()) {
        if (line[i] == '"') {
          closed = true;
          ++i;
          break;
        }
        if (line[i] == '\\' && i + 1 < line.size() &&
            std::string_view("\"\\$`").find(line[i + 1]) != std::string_view::npos) {
          current.push_back(line[i + 1]);
          i += 2;
        } else {
          current.push_back(line[i++]);
        }
      }
      if (!closed) {
        return InvalidArgument("the command has an unclosed \" quote: " + std::string(line));
      }
    } else if (c == '\\') {
      if (i + 1 >= line.size()) {
        return InvalidArgument("the command ends with a lone backslash: " + std::string(line));
      }
      current.push_back(line[i + 1]);
      i += 2;
    } else {
      current.push_back(c);
      ++i;
    }
  }
  if (in_word) args.push_back(std::move(current));
  return args;
}

Result<std::vector<std::string>> FindReferences(std::string_view text) {
  std::vector<std::string> names;
  Status status = Scan(
      text, [](std::string_view) {},
      [&names](std::string name) {
        names.push_back(std::move(name));
        return Status::Ok();
      });
  if (!status.ok()) return status;
  return names;
}

Result<std::string> Substitute(std::string_view text,
                               const std::map<std::string, std::string>& values) {
  std::string out;
  Status status = Scan(
      text, [&out](std::string_view literal) { out.append(literal); },
      [&](const std::string& name) {
        auto it = values.find(name);
        if (it == values.end()) return InvalidArgument("${{ " + name + " }} is not defined");
        out += it->second;
        return Status::Ok();
      });
  if (!status.ok()) return status;
  return out;
}

}  // namespace gpuherd::pipeline
