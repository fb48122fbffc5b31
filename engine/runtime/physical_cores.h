// The default thread count: physical cores this process may run on (SMT siblings share one core's
// FMA units and gain nothing on these kernels).
#pragma once

#include <sched.h>

namespace aft {

// Over the CPUs in `allowed`; the topology is read from /sys once per process.
int physical_cores(const cpu_set_t& allowed);
// Over the CPUs this process may run on now.
int physical_cores();

}  // namespace aft
