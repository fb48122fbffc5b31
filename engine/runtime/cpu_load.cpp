#include "cpu_load.h"

#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <sstream>

namespace aft {

std::optional<int> runnable_threads(const std::string& loadavg) {
  std::istringstream in(loadavg);
  double one = 0, five = 0, fifteen = 0;
  long long runnable = -1, total = -1;
  char slash = 0;
  if (!(in >> one >> five >> fifteen >> runnable >> slash >> total) || slash != '/' ||
      runnable < 0 || total < runnable) {
    return std::nullopt;
  }
  return static_cast<int>(std::min<long long>(runnable, 1 << 20));
}

AllowedCpus allowed_cpus() {
  AllowedCpus allowed;
  CPU_ZERO(&allowed.set);
  if (sched_getaffinity(0, sizeof(allowed.set), &allowed.set) != 0) {
    CPU_ZERO(&allowed.set);
    CPU_SET(0, &allowed.set);
  }
  allowed.count = std::max(1, CPU_COUNT(&allowed.set));
  return allowed;
}

std::optional<int> cpus_busy_elsewhere(int own_running, int allowed) {
  const long online = sysconf(_SC_NPROCESSORS_ONLN);
  if (online < 1 || allowed < online) return std::nullopt;
  std::ifstream file("/proc/loadavg");
  std::string text;
  if (!std::getline(file, text)) return std::nullopt;
  const std::optional<int> runnable = runnable_threads(text);
  if (!runnable) return std::nullopt;
  return std::max(0, *runnable - own_running);
}

}  // namespace aft
