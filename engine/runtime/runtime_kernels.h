// The kernel table sessions run (kernels::active_kernels()), with the warnings of a forced ISA the
// CPU lacks and of an AFT_MATRIX_UNITS setting not honoured sent to the log once.
#pragma once

#include "kernels/kernels.h"

namespace aft {

const kernels::KernelTable& runtime_kernels();

}  // namespace aft
