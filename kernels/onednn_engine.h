// The one oneDNN CPU engine every product of the kernels library is created and run on.
#pragma once

#include <dnnl.hpp>

namespace aft::kernels {

inline dnnl::engine& onednn_cpu_engine() {
  static dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  return engine;
}

}  // namespace aft::kernels
