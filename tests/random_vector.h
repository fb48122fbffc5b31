// Reproducible test data: n floats uniform in [lo, hi), the same for a seed on every platform's
// libstdc++.
#pragma once

#include <cstddef>
#include <random>
#include <vector>

namespace aft::test_data {

inline std::vector<float> random_vector(std::size_t n, float lo, float hi, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

}  // namespace aft::test_data
