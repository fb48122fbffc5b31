// The kernel table sessions run (kernels::active_kernels()), with the warning of a forced ISA the
// CPU lacks sent to the log once.
#pragma once

#include "kernels/kernels.h"

namespace aft {

const kernels::KernelTable& runtime_kernels();

}  // namespace aft
