// Network: InfiniBand/RoCE ports up, at their rate and with a usable MTU, and
// NCCL variables that contradict the hardware.
#include <algorithm>
#include <map>

#include "doctor/check_families.h"
#include "doctor/sysfs.h"

namespace gpuherd::doctor::internal {
namespace {

constexpr int64_t kRoceMinMtu = 4200;  // RoCE's 4096-byte MTU plus its headers

Check Make(const std::string& id, const std::string& title) {
  Check check;
  check.id = id;
  check.category = "network";
  check.title = title;
  return check;
}

std::string PortName(const RdmaPort& port) { return port.device + "/" + std::to_string(port.port); }

Check PortCheck(const RdmaPort& port, const std::vector<RdmaPort>& all) {
  Check check = Make("network.port." + PortName(port), "RDMA port " + PortName(port));
  const bool roce = port.link_layer == "Ethernet";
  check.current = port.state + (port.rate.empty() ? "" : ", " + port.rate) + (roce ? " (RoCE)" : " (InfiniBand)");
  double best = 0;
  bool other_active = false;
  for (const RdmaPort& p : all) {
    if (p.state != "ACTIVE" || p.link_layer != port.link_layer) continue;
    best = std::max(best, p.rate_gbps.value_or(0));
    if (&p != &port) other_active = true;
  }
  check.recommended = best > 0 ? "ACTIVE at " + std::to_string(static_cast<int>(best)) + " Gb/sec" : "ACTIVE";
  check.why =
      "Multi-node training moves every gradient through these ports: a port that is down leaves "
      "NCCL on TCP or stops the job, and a port that trained below the others' rate (a bad cable or "
      "transceiver) slows every all-reduce to its speed. Any packet loss on InfiniBand needs looking into.";
  if (port.state == "INIT" || port.state == "ARMED") {
    check.current += ": no subnet manager has configured the port";
    check.severity = Severity::kCritical;
    check.fix = {"# start a subnet manager (opensm on one node, or the switch's) and check ibstat"};
  } else if (port.state != "ACTIVE") {
    // A second port of a dual-port card is often left unplugged on purpose.
    check.severity = other_active ? Severity::kWarning : Severity::kCritical;
    check.fix = {"# check the cable and the switch port; ibstat " + port.device + " shows the physical state"};
  } else if (port.rate_gbps && *port.rate_gbps < best) {
    check.severity = Severity::kWarning;
    check.fix = {"# reseat or replace the cable or transceiver of " + PortName(port) +
                 "; compare with ibstat and the switch's port counters"};
  }
  return check;
}

std::vector<Check> MtuChecks(const host::Host& host, const std::vector<RdmaPort>& ports) {
  std::vector<Check> checks;
  std::map<std::string, int64_t> mtu;
  for (const NetDevice& dev : ListNetDevices(host)) {
    if (dev.mtu) mtu[dev.name] = *dev.mtu;
  }
  for (const RdmaPort& port : ports) {
    for (const std::string& netdev : port.netdevs) {
      if (!mtu.count(netdev)) continue;
      Check check = Make("network.mtu." + netdev, "MTU " + netdev + " (" + PortName(port) + ")");
      check.current = std::to_string(mtu[netdev]);
      if (port.link_layer == "Ethernet") {
        check.recommended = "9000 (at least 4200)";
        check.why =
            "RoCE sizes its packets from the interface MTU: at 1500 it uses 1024-byte RDMA packets "
            "and loses a large part of the link's throughput to headers; jumbo frames allow 4096.";
        if (mtu[netdev] < kRoceMinMtu) {
          check.severity = Severity::kWarning;
          check.fix = {"ip link set dev " + netdev + " mtu 9000",
                       "# and set MTU 9000 in the interface's network configuration; the switch ports must allow it"};
        }
      } else {
        check.recommended = ">= 2044 (IPoIB; NCCL uses verbs with the port's own 4096-byte MTU)";
        check.why = "IPoIB carries only TCP traffic (NCCL's bootstrap, storage over IP); its MTU does not limit RDMA.";
        if (mtu[netdev] < 2044) {
          check.severity = Severity::kWarning;
          check.fix = {"ip link set dev " + netdev + " mtu 2044"};
        }
      }
      checks.push_back(std::move(check));
    }
  }
  return checks;
}

// NCCL_SOCKET_IFNAME: "eth0,ib" (prefixes), "=eth0" (exact), "^docker" (excluded).
std::vector<std::string> MissingInterfaces(const std::string& value, const std::vector<NetDevice>& devices) {
  std::string list = value;
  bool exact = false;
  if (!list.empty() && list[0] == '^') return {};  // exclusions cannot name a missing interface
  if (!list.empty() && list[0] == '=') {
    exact = true;
    list = list.substr(1);
  }
  std::vector<std::string> missing;
  size_t start = 0;
  while (start <= list.size()) {
    size_t comma = list.find(',', start);
    if (comma == std::string::npos) comma = list.size();
    const std::string name = Trim(list.substr(start, comma - start));
    start = comma + 1;
    if (name.empty()) continue;
    const bool found = std::any_of(devices.begin(), devices.end(), [&](const NetDevice& d) {
      return exact ? d.name == name : d.name.rfind(name, 0) == 0;
    });
    if (!found) missing.push_back(name);
  }
  return missing;
}

std::vector<Check> NcclChecks(const host::Host& host, const std::map<std::string, std::string>& env,
                              const std::vector<RdmaPort>& ports) {
  std::vector<Check> checks;
  const bool rdma_up = std::any_of(ports.begin(), ports.end(), [](const RdmaPort& p) { return p.state == "ACTIVE"; });
  if (auto it = env.find("NCCL_IB_DISABLE"); it != env.end()) {
    Check check = Make("network.nccl.ib_disable", "NCCL_IB_DISABLE");
    check.current = it->second;
    check.recommended = rdma_up ? "unset (RDMA ports are up)" : "any (no RDMA port is up)";
    check.why =
        "NCCL_IB_DISABLE=1 makes NCCL use TCP sockets between nodes even though InfiniBand or RoCE is "
        "there, typically several times slower for all-reduce.";
    if (it->second == "1" && rdma_up) {
      check.severity = Severity::kWarning;
      check.fix = {"# remove NCCL_IB_DISABLE from the job's environment (and /etc/nccl.conf, ~/.nccl.conf)"};
    }
    checks.push_back(std::move(check));
  }
  const std::vector<NetDevice> devices = ListNetDevices(host);
  if (auto it = env.find("NCCL_SOCKET_IFNAME"); it != env.end()) {
    Check check = Make("network.nccl.socket_ifname", "NCCL_SOCKET_IFNAME");
    check.current = it->second;
    check.recommended = "names (or prefixes) of interfaces that exist";
    check.why =
        "NCCL finds no interface to bootstrap on and every multi-node job fails at start-up with "
        "'no socket interface found'.";
    const std::vector<std::string> missing = MissingInterfaces(it->second, devices);
    if (!missing.empty()) {
      std::string names;
      for (const std::string& n : missing) names += (names.empty() ? "" : ", ") + n;
      check.current += " (no interface matches " + names + ")";
      check.severity = Severity::kCritical;
      check.fix = {"# set NCCL_SOCKET_IFNAME to one of: ip -br link"};
    }
    checks.push_back(std::move(check));
  }
  if (auto it = env.find("NCCL_IB_HCA"); it != env.end() && !it->second.empty() && it->second[0] != '^') {
    Check check = Make("network.nccl.ib_hca", "NCCL_IB_HCA");
    check.current = it->second;
    check.recommended = "names of RDMA adapters that exist";
    check.why = "NCCL skips adapters it cannot find; naming only missing ones leaves it on TCP sockets.";
    std::string missing;
    std::string list = it->second[0] == '=' ? it->second.substr(1) : it->second;
    size_t start = 0;
    while (start <= list.size()) {
      size_t comma = list.find(',', start);
      if (comma == std::string::npos) comma = list.size();
      std::string hca = Trim(list.substr(start, comma - start));
      start = comma + 1;
      hca = hca.substr(0, hca.find(':'));  // "mlx5_0:1": a port of the adapter
      if (hca.empty()) continue;
      const bool found = std::any_of(ports.begin(), ports.end(), [&](const RdmaPort& p) {
        return p.device.rfind(hca, 0) == 0;
      });
      if (!found) missing += (missing.empty() ? "" : ", ") + hca;
    }
    if (!missing.empty()) {
      check.current += " (not found: " + missing + ")";
      check.severity = Severity::kCritical;
      check.fix = {"# set NCCL_IB_HCA to adapters listed by ls /sys/class/infiniband"};
    }
    checks.push_back(std::move(check));
  }
  if (checks.empty()) {
    Check check = Make("network.nccl", "NCCL variables");
    check.current = "none set";
    check.recommended = "only what the hardware needs";
    checks.push_back(std::move(check));
  }
  return checks;
}

}  // namespace

std::vector<Check> NetworkChecks(const host::Host& host, const std::map<std::string, std::string>& env) {
  std::vector<Check> checks;
  const std::vector<RdmaPort> ports = ListRdmaPorts(host);
  if (ports.empty()) {
    Check check = Make("network.rdma", "InfiniBand / RoCE");
    check.current = "no RDMA adapters";
    check.recommended = "RDMA for multi-node training (single-node machines need none)";
    checks.push_back(std::move(check));
  }
  for (const RdmaPort& port : ports) checks.push_back(PortCheck(port, ports));
  std::vector<Check> mtu = MtuChecks(host, ports);
  checks.insert(checks.end(), mtu.begin(), mtu.end());
  std::vector<Check> nccl = NcclChecks(host, env, ports);
  checks.insert(checks.end(), nccl.begin(), nccl.end());
  return checks;
}

}  // namespace gpuherd::doctor::internal
