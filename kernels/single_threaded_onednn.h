// oneDNN sizes its internal split by omp_get_max_threads() when a primitive is created, and for
// some implementations (sgemm among them) when it runs outside a parallel region or from a team of
// one. While one of these lives, the calling thread's OpenMP team size is 1: oneDNN's work on it is
// single-threaded whatever the caller's OpenMP settings.
#pragma once

#include <omp.h>

namespace aft::kernels {

class SingleThreadedOneDnn {
 public:
  SingleThreadedOneDnn() : saved_(omp_get_max_threads()) { omp_set_num_threads(1); }
  ~SingleThreadedOneDnn() { omp_set_num_threads(saved_); }
  SingleThreadedOneDnn(const SingleThreadedOneDnn&) = delete;
  SingleThreadedOneDnn& operator=(const SingleThreadedOneDnn&) = delete;

 private:
  int saved_;
};

}  // namespace aft::kernels
