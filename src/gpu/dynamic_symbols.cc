#include "gpu/dynamic_symbols.h"

#include <dlfcn.h>

namespace gpuherd::gpu {

void* LookupSymbol(void* handle, const char* name, std::string* error) {
  dlerror();
  void* symbol = dlsym(handle, name);
  if (symbol == nullptr) {
    const char* text = dlerror();
    *error = text != nullptr ? text : std::string(name) + " resolved to null";
  }
  return symbol;
}

SymbolLookup LookupFirst(void* handle, std::span<const char* const> names) {
  SymbolLookup out;
  for (size_t i = 0; i < names.size() && names[i] != nullptr; ++i) {
    out.symbol = LookupSymbol(handle, names[i], &out.error);
    if (out.symbol != nullptr) {
      out.variant = static_cast<int>(i);
      break;
    }
    out.tried += out.tried.empty() ? names[i] : std::string(" or ") + names[i];
  }
  return out;
}

}  // namespace gpuherd::gpu
