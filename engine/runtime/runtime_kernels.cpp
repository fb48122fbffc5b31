#include "runtime_kernels.h"

#include "kernels/matmul.h"
#include "log.h"

namespace aft {

const kernels::KernelTable& runtime_kernels() {
  static const kernels::KernelTable& table = []() -> const kernels::KernelTable& {
    const kernels::KernelChoice& choice = kernels::active_kernel_choice();
    if (!choice.warning.empty()) log_message(AFT_LOG_WARNING, choice.warning);
    const kernels::MatrixUnitChoice& units = kernels::active_matrix_unit_choice();
    if (!units.warning.empty()) log_message(AFT_LOG_WARNING, units.warning);
    return *choice.table;
  }();
  return table;
}

}  // namespace aft
