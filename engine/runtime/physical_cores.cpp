#include "physical_cores.h"

#include <sched.h>

#include <fstream>
#include <set>
#include <string>
#include <thread>
#include <utility>

namespace aft {
namespace {

int read_topology(int cpu, const char* field) {
  std::ifstream in("/sys/devices/system/cpu/cpu" + std::to_string(cpu) + "/topology/" + field);
  int value = -1;
  in >> value;
  return in ? value : -1;
}

}  // namespace

int physical_cores() {
  const int logical = static_cast<int>(std::thread::hardware_concurrency());
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  if (sched_getaffinity(0, sizeof(allowed), &allowed) != 0) return logical > 0 ? logical : 1;
  std::set<std::pair<int, int>> cores;  // (package, core)
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (!CPU_ISSET(cpu, &allowed)) continue;
    const int package = read_topology(cpu, "physical_package_id");
    const int core = read_topology(cpu, "core_id");
    // Without topology information every allowed CPU counts as a core.
    cores.insert(core < 0 ? std::make_pair(-1, cpu) : std::make_pair(package, core));
  }
  return cores.empty() ? 1 : static_cast<int>(cores.size());
}

}  // namespace aft
