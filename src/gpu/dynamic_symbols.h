// Entry points of a driver library opened with dlopen (NVML, the CUDA driver),
// looked up newest name first ("_v3" → "_v2" → plain) with dlerror's text kept
// for the message. Thread-safe as dlsym is; dlerror's state is per thread.
#pragma once

#include <span>
#include <string>

namespace gpuherd::gpu {

// dlsym(handle, name); nullptr with `error` set to dlerror's text when absent.
void* LookupSymbol(void* handle, const char* name, std::string* error);

struct SymbolLookup {
  void* symbol = nullptr;  // nullptr when no name resolved
  int variant = -1;        // index into the names of the one that resolved
  std::string tried;       // "a or b": the names that did not resolve
  std::string error;       // dlerror's text for the last of them
};

// Tries `names` in order, up to the first nullptr.
SymbolLookup LookupFirst(void* handle, std::span<const char* const> names);

}  // namespace gpuherd::gpu
