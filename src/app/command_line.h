// What both front ends (main.cc, client_main.cc) read of a command line
// before parsing it, and how one hands a command line to a sibling binary.
#pragma once

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>

namespace gpuherd::app {

// The command a command line runs: the first word that is not an option (or
// the value of --home); nullptr when there is none.
inline const char* CommandOf(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--home") == 0) {
      ++i;
      continue;
    }
    if (argv[i][0] != '-') return argv[i];
  }
  return nullptr;
}

// Replaces this process with `binary`, installed beside this one, on the
// same arguments; returns 1 (with the reason on stderr) only when it cannot.
inline int ExecSibling(const char* binary, char** argv, const char* what) {
  std::error_code ec;
  std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec);
  std::string full = (ec ? std::filesystem::path(argv[0]) : self).parent_path() / binary;
  ::execv(full.c_str(), argv);
  std::fprintf(stderr, "gpuherd: cannot run %s: %s (it is installed beside gpuherd and runs %s)\n", full.c_str(),
               std::strerror(errno), what);
  return 1;
}

}  // namespace gpuherd::app
