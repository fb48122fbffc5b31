// The default thread count: physical cores this process may run on (SMT siblings share one core's
// FMA units and gain nothing on these kernels).
#pragma once

namespace aft {

int physical_cores();

}  // namespace aft
