// A view of a row-major matrix of floats: the only shape the runtime passes between ops.
#pragma once

#include <cstddef>

namespace aft {

struct Tensor {
  float* data = nullptr;
  std::size_t rows = 0;
  std::size_t width = 0;

  float* row(std::size_t r) const { return data + r * width; }
};

}  // namespace aft
