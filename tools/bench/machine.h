// What the benchmark record says about the machine: CPU model, cores, last-level cache.
#pragma once

#include <cstddef>
#include <string>

namespace aft::bench {

struct MachineInfo {
  std::string cpu;            // /proc/cpuinfo's model name ("unknown" if absent)
  int logical_cpus = 0;       // CPUs the OS reports
  int physical_cores = 0;     // cores this process may run on (the engine's default thread count)
  std::size_t llc_bytes = 0;  // the largest cache level's size per /sys (0 if unknown)
};

MachineInfo machine_info();

}  // namespace aft::bench
