#include "doctor/cpulist.h"

#include "doctor/sysfs.h"

namespace gpuherd::doctor {

std::map<int, int> ReadFirstThreads(const host::Host& host) {
  std::map<int, int> first;
  for (const std::string& name : internal::List(host, "/sys/devices/system/cpu")) {
    if (name.size() < 4 || name.rfind("cpu", 0) != 0) continue;
    auto cpu = host::ParseCpuNumber(std::string_view(name).substr(3));
    if (!cpu) continue;
    auto siblings = internal::ReadLine(host, "/sys/devices/system/cpu/" + name + "/topology/thread_siblings_list");
    if (!siblings) continue;
    auto list = ParseCpuList(*siblings);
    if (list.ok() && !list->empty()) first[*cpu] = list->front();
  }
  return first;
}

}  // namespace gpuherd::doctor
