// The text of a pipeline step before expansion: `${{ name }}` references in
// commands, environment values and cwd, and shell-like splitting of a `run:`
// string. Private to the pipeline layer.
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace gpuherd::pipeline {

// Splits a command line into arguments the way a POSIX shell splits words,
// without running a shell: blanks separate arguments; '...' keeps everything
// literally; "..." keeps blanks and takes \" \\ \$ \` as escapes; a backslash
// outside quotes escapes the next character. A `${{ ... }}` reference stays
// whole (its inner blanks do not split), and the value substituted later is
// one argument however many blanks it holds. No globbing, no variables, no
// pipes: write ["sh", "-c", "..."] for those.
Result<std::vector<std::string>> SplitCommand(std::string_view line);

// The names referenced by `${{ name }}` in `text`, blanks around the name
// removed, in order of appearance. Errors on an unclosed `${{` or an empty
// name.
Result<std::vector<std::string>> FindReferences(std::string_view text);

// `text` with every `${{ name }}` replaced by values.at(name); a name missing
// from `values` is an error naming it.
Result<std::string> Substitute(std::string_view text,
                               const std::map<std::string, std::string>& values);

}  // namespace gpuherd::pipeline
