// Other processes' load on the CPUs, for the automatic thread count (compute_threads.cpp): two
// processes that each take every core stall each other at every barrier, while one thread each
// runs at full speed (docs/architecture.md, "Threads and determinism").
#pragma once

#include <sched.h>

#include <optional>
#include <string>

namespace aft {

// The CPUs this process may run on now (its affinity mask), read once per call of the automatic
// count and handed to what needs it.
struct AllowedCpus {
  cpu_set_t set;
  int count;  // at least 1
};
AllowedCpus allowed_cpus();

// The system's runnable threads from /proc/loadavg's text ("0.50 0.40 0.30 3/250 1234" gives 3);
// nullopt if the text is not of that form.
std::optional<int> runnable_threads(const std::string& loadavg);

// How many CPUs the threads of other processes keep busy now: the system's runnable threads less
// own_running, this process's. nullopt where it cannot be told: /proc/loadavg unreadable, or this
// process confined to some of the system's CPUs (allowed < online: a container's cpuset), whose
// load the system's count does not tell.
std::optional<int> cpus_busy_elsewhere(int own_running, int allowed);

}  // namespace aft
