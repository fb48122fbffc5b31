#include "physical_cores.h"

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "cpu_load.h"

namespace aft {
namespace {

int read_topology(int cpu, const char* field) {
  std::ifstream in("/sys/devices/system/cpu/cpu" + std::to_string(cpu) + "/topology/" + field);
  int value = -1;
  in >> value;
  return in ? value : -1;
}

// (package, core) of each CPU the system has, (-1, cpu) where /sys does not tell.
std::vector<std::pair<int, int>> read_topologies() {
  const long configured = sysconf(_SC_NPROCESSORS_CONF);
  const int n = static_cast<int>(std::clamp<long>(configured, 1, CPU_SETSIZE));
  std::vector<std::pair<int, int>> cores;
  for (int cpu = 0; cpu < n; ++cpu) {
    const int package = read_topology(cpu, "physical_package_id");
    const int core = read_topology(cpu, "core_id");
    cores.push_back(core < 0 ? std::make_pair(-1, cpu) : std::make_pair(package, core));
  }
  return cores;
}

}  // namespace

int physical_cores(const cpu_set_t& allowed) {
  static const std::vector<std::pair<int, int>> topology = read_topologies();
  std::set<std::pair<int, int>> cores;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (!CPU_ISSET(cpu, &allowed)) continue;
    // A CPU beyond the table (brought online later) counts as a core of its own.
    cores.insert(cpu < static_cast<int>(topology.size()) ? topology[cpu] : std::make_pair(-1, cpu));
  }
  return cores.empty() ? 1 : static_cast<int>(cores.size());
}

int physical_cores() { return physical_cores(allowed_cpus().set); }

}  // namespace aft
