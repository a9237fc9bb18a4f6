#include "gpu/xid.h"

#include <map>

namespace gpuherd::gpu {
namespace {

struct XidFacts {
  const char* description;
  bool fatal;
};

const std::map<int, XidFacts>& Table() {
  // From NVIDIA's XID catalogue; "fatal" = the GPU needs a reset or service.
  static const std::map<int, XidFacts> kTable = {
      {13, {"Graphics engine exception (often an application fault)", false}},
      {31, {"GPU memory page fault (often an application fault)", false}},
      {32, {"Invalid or corrupted push buffer stream", false}},
      {43, {"GPU stopped processing (reset channel)", false}},
      {45, {"Preemptive cleanup, due to previous errors", false}},
      {48, {"Double-bit ECC error", true}},
      {61, {"Internal micro-controller breakpoint/warning", false}},
      {62, {"Internal micro-controller halt", true}},
      {63, {"ECC page retirement or row remapping recorded", false}},
      {64, {"ECC page retirement or row remapper recording failure", true}},
      {68, {"Video processor exception", false}},
      {74, {"NVLink error", true}},
      {79, {"GPU has fallen off the bus", true}},
      {92, {"High single-bit ECC error rate", false}},
      {94, {"Contained ECC error", false}},
      {95, {"Uncontained ECC error", true}},
      {119, {"GSP RPC timeout", true}},
      {120, {"GSP error", true}},
  };
  return kTable;
}

}  // namespace

std::string XidDescription(int xid) {
  auto it = Table().find(xid);
  if (it != Table().end()) return it->second.description;
  return "XID " + std::to_string(xid) + " (see NVIDIA's XID catalogue)";
}

bool XidIsFatal(int xid) {
  auto it = Table().find(xid);
  return it != Table().end() && it->second.fatal;
}

}  // namespace gpuherd::gpu
