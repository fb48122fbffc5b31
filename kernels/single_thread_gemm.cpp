// oneDNN's BLAS-like sgemm (row-major, runtime shapes, no primitive to build or cache), pinned to
// the calling thread.
#include "kernels/single_thread_gemm.h"

#include <stdexcept>
#include <string>

#include <dnnl.h>

#include "kernels/single_threaded_onednn.h"

namespace aft::kernels {

void gemm_f32_single_thread(std::size_t m, std::size_t n, std::size_t k, const float* a,
                            std::size_t lda, const float* b, std::size_t ldb, float* c,
                            std::size_t ldc) {
  if (m == 0 || n == 0) return;
  dnnl_status_t status;
  {
    SingleThreadedOneDnn single;
    status = dnnl_sgemm('N', 'N', static_cast<dnnl_dim_t>(m), static_cast<dnnl_dim_t>(n),
                        static_cast<dnnl_dim_t>(k), 1.0f, a, static_cast<dnnl_dim_t>(lda), b,
                        static_cast<dnnl_dim_t>(ldb), 0.0f, c, static_cast<dnnl_dim_t>(ldc));
  }
  if (status != dnnl_success) {
    throw std::runtime_error("aft gemm (M=" + std::to_string(m) + ", N=" + std::to_string(n) +
                             ", K=" + std::to_string(k) + "): oneDNN sgemm failed (status " +
                             std::to_string(static_cast<int>(status)) + ")");
  }
}

}  // namespace aft::kernels
