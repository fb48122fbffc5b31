// The kernel table for one xsimd architecture. Include it only from an isa_*.cpp file compiled with
// that architecture's flags, and instantiate it there once.
#pragma once

#include "kernels/bf16_gemv.hpp"
#include "kernels/f32_add.hpp"
#include "kernels/f32_aft_accumulate.hpp"
#include "kernels/f32_aft_output.hpp"
#include "kernels/f32_aft_window_frame.hpp"
#include "kernels/f32_aft_window_output.hpp"
#include "kernels/f32_aft_window_sums.hpp"
#include "kernels/f32_fma_probe.hpp"
#include "kernels/f32_gated_add.hpp"
#include "kernels/f32_gelu.hpp"
#include "kernels/f32_layer_norm.hpp"
#include "kernels/f32_relu.hpp"
#include "kernels/f32_sum.hpp"
#include "kernels/group_gemv.hpp"
#include "kernels/kernels.h"
#include "kernels/q8_0.hpp"

namespace aft::kernels::simd {

template <class A>
constexpr KernelTable make_table(const char* isa) {
  return KernelTable{
      isa,
      &gemv_groups<A, F32Columns<A>>,
      &gemv_batch_groups<A, F32Columns<A>>,
      &gemv_batch_f32_prefix<A>,
      GroupBlocks<A, F32Columns<A>>::kTakesPrompts,
      &layer_norm_f32<A>,
      &aft_accumulate_f32<A>,
      &aft_accumulate_biased_f32<A>,
      &aft_output_f32<A>,
      &aft_window_push_f32<A>,
      &aft_window_reframe_f32<A>,
      &aft_window_sums_f32<A>,
      &aft_window_sums_biased_f32<A>,
      &aft_window_output_f32<A>,
      &relu_f32<A>,
      &gelu_f32<A>,
      &relu_squared_f32<A>,
      &gated_add_f32<A>,
      &add_f32<A>,
      &quantize_q8_0<A>,
      &gemv_q8_0<A>,
      &gemv_batch_q8_0<A>,
      &gemv_groups<A, Bf16Columns<A>>,
      &gemv_batch_groups<A, Bf16Columns<A>>,
      &round_bf16<A>,
      &gemv_groups<A, Bf16PairColumns<A>>,
      &gemv_batch_groups<A, Bf16PairColumns<A>>,
      false,
      nullptr,
      &sum_f32<A>,
      &fma_probe_f32<A>,
  };
}

}  // namespace aft::kernels::simd
