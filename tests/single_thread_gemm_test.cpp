// gemm_f32_single_thread against a float64 product, with row strides wider than the rows, and its
// results when called from parallel regions of any size (bit-identical to a serial call).
#include "kernels/single_thread_gemm.h"

#include <omp.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "random_vector.h"

namespace aft::kernels {
namespace {

using test_data::random_vector;

struct Problem {
  std::size_t m, n, k;
  std::size_t lda, ldb, ldc;  // each a few floats wider than its rows
  std::vector<float> a, b;
  Problem(std::size_t m_, std::size_t n_, std::size_t k_)
      : m(m_),
        n(n_),
        k(k_),
        lda(k_ + 3),
        ldb(n_ + 5),
        ldc(n_ + 7),
        a(random_vector(m_ * lda, -1.0f, 1.0f, 1)),
        b(random_vector(k_ * ldb, -1.0f, 1.0f, 2)) {}

  // c with its padding set to a marker the product must not touch.
  std::vector<float> output() const { return std::vector<float>(m * ldc, -7.0f); }
  void run_into(std::vector<float>& c) const {
    gemm_f32_single_thread(m, n, k, a.data(), lda, b.data(), ldb, c.data(), ldc);
  }
  std::vector<float> run() const {
    std::vector<float> c = output();
    run_into(c);
    return c;
  }
};

struct Shape {
  std::size_t m, n, k;
};
constexpr Shape kShapes[] = {{1, 1, 1},    {3, 5, 7},      {64, 128, 64},
                             {37, 34, 19}, {256, 128, 64}, {200, 96, 33}};

TEST(SingleThreadGemm, MatchesFloat64Product) {
  for (const Shape& s : kShapes) {
    const Problem p(s.m, s.n, s.k);
    const std::vector<float> c = p.run();
    // Float accumulation of k products: at most k roundings of the sum of magnitudes.
    const double tol = static_cast<double>(p.k) * std::ldexp(1.0, -24);
    for (std::size_t i = 0; i < p.m; ++i) {
      for (std::size_t j = 0; j < p.ldc; ++j) {
        const float got = c[i * p.ldc + j];
        if (j >= p.n) {
          ASSERT_EQ(got, -7.0f) << "wrote past row " << i << " of " << p.m << "x" << p.n;
          continue;
        }
        double want = 0.0, magnitude = 0.0;
        for (std::size_t l = 0; l < p.k; ++l) {
          const double term = double(p.a[i * p.lda + l]) * p.b[l * p.ldb + j];
          want += term;
          magnitude += std::fabs(term);
        }
        ASSERT_LE(std::fabs(got - want), tol * magnitude + 1e-7)
            << p.m << "x" << p.n << "x" << p.k << " at (" << i << ", " << j << ")";
      }
    }
  }
}

TEST(SingleThreadGemm, EmptyProductsWriteNothing) {
  std::vector<float> c(4, -7.0f);
  const float one = 1.0f;
  gemm_f32_single_thread(0, 2, 2, &one, 2, &one, 2, c.data(), 2);
  gemm_f32_single_thread(2, 0, 2, &one, 2, &one, 2, c.data(), 2);
  EXPECT_EQ(c, std::vector<float>(4, -7.0f));
}

// Several products at once from teams of 1 to 4 threads: each equals the serial call bit for bit,
// and the caller's OpenMP thread count is left as it was.
TEST(SingleThreadGemm, ThreadsDoNotChangeResults) {
  const Problem p(256, 128, 64);
  const std::vector<float> serial = p.run();
  const int saved = omp_get_max_threads();
  for (int threads = 1; threads <= 4; ++threads) {
    std::vector<std::vector<float>> results(8, p.output());
    int failures = 0;
#pragma omp parallel for num_threads(threads) schedule(static) reduction(+ : failures)
    for (std::size_t i = 0; i < results.size(); ++i) {
      try {
        p.run_into(results[i]);
      } catch (...) {
        ++failures;  // exceptions must not leave the parallel region
      }
    }
    ASSERT_EQ(failures, 0);
    for (const std::vector<float>& c : results) ASSERT_EQ(c, serial) << threads << " threads";
    EXPECT_EQ(omp_get_max_threads(), saved);
  }
}

}  // namespace
}  // namespace aft::kernels
