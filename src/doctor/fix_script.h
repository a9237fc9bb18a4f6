// The fix script: a shell script for an admin to read, adjust and run as
// root. gpuherd writes it and never runs it.
#pragma once

#include <string>

#include "doctor/doctor.h"

namespace gpuherd::doctor {

// `set -euo pipefail`, then one commented block (what, why, the commands)
// per check that is not ok and has a fix, worst first. A report without such
// checks gives a script that only says so.
std::string FixScript(const Report& report);

}  // namespace gpuherd::doctor
