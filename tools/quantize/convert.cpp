#include "tools/quantize/convert.h"

#include <cmath>
#include <cstring>
#include <sstream>
#include <stdexcept>

#include "kernels/bf16.h"
#include "kernels/kernels.h"

namespace aft::quantize {
namespace {

[[noreturn]] void refuse(const std::string& path, const TensorInfo& tensor, std::size_t index,
                         float value, const std::string& why) {
  std::ostringstream message;
  message.precision(9);
  message << path << ": tensor \"" << tensor.name << "\": value " << value << " at index " << index
          << " " << why;
  throw std::runtime_error(message.str());
}

}  // namespace

DType stored_dtype(const TensorInfo& tensor, bool linear_weight, DType dtype) {
  if (!linear_weight) return DType::F32;
  const bool whole_blocks = tensor.shape.size() == 2 &&
                            static_cast<uint64_t>(tensor.shape[1]) % kernels::kQ8BlockSize == 0;
  if (dtype == DType::Q8_0 && !whole_blocks) return DType::F32;
  return dtype;
}

std::vector<uint8_t> convert(const std::string& path, const TensorInfo& tensor, DType dtype) {
  const std::size_t n = tensor.element_count();
  const auto* values = static_cast<const float*>(tensor.data);
  for (std::size_t i = 0; i < n; ++i) {
    if (!std::isfinite(values[i])) refuse(path, tensor, i, values[i], "cannot be converted");
  }
  std::vector<uint8_t> bytes(*stored_bytes(dtype, n));
  if (dtype == DType::BF16) {
    for (std::size_t i = 0; i < n; ++i) {
      const uint16_t half = kernels::f32_to_bf16(values[i]);
      if ((half & 0x7FFF) == 0x7F80) {
        refuse(path, tensor, i, values[i], "is beyond bf16's range (it rounds to infinity)");
      }
      std::memcpy(bytes.data() + 2 * i, &half, 2);
    }
  } else if (dtype == DType::Q8_0) {
    // The scales plane starts at n, a multiple of 32: aligned for floats in a vector's storage.
    kernels::active_kernels().quantize_q8_0(n, values, reinterpret_cast<int8_t*>(bytes.data()),
                                            reinterpret_cast<float*>(bytes.data() + n));
  } else {
    throw std::logic_error("convert: f32 tensors are copied, not converted");
  }
  return bytes;
}

}  // namespace aft::quantize
