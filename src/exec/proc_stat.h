// /proc/<pid>/stat, read with a plain descriptor into a bounded buffer: no
// iostreams, so a process that ends between open() and read() (read fails
// with ESRCH) is an error result, never an exception in the daemon.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "core/status.h"

namespace gpuherd::exec {

struct ProcStat {
  char state = '?';         // field 3: R, S, D, Z, ...
  int64_t ppid = 0;         // field 4
  int64_t pgrp = 0;         // field 5
  int64_t session = 0;      // field 6
  uint64_t start_time = 0;  // field 22: clock ticks after boot
};

// Parses the text of a stat file. The command name (field 2) may hold spaces
// and parentheses: fields are counted after its last ')'. DataLoss when a
// field is missing or not a number.
Result<ProcStat> ParseProcStat(std::string_view text);

// Reads <proc_root>/<pid>/stat (proc_root is "/proc" but for tests).
// NotFound when there is no such process or it ended while being read;
// IoError when the file cannot be read; DataLoss when it does not parse or
// is larger than a stat file can be.
Result<ProcStat> ReadProcStat(int pid, const std::string& proc_root = "/proc");

}  // namespace gpuherd::exec
