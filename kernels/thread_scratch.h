// Per-thread scratch memory for the kernels that stage data (bf16 rows widened once for a batch,
// a batch's activations transposed for the tiles). It lives in a file compiled with the baseline
// flags: an ISA file that held a std::vector would emit its member functions, compiled with that
// ISA's flags, as weak symbols that the linker may pick for every caller (kernels/README.md).
#pragma once

#include <cstddef>

namespace aft::kernels {

// The calling thread's buffer of at least `bytes`, 64-byte aligned, grown as asked; valid until
// the thread's next call. A kernel takes it once per call and calls no other kernel that does.
void* thread_scratch(std::size_t bytes);

}  // namespace aft::kernels
