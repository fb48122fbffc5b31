// The fixture of tests run once per ISA name: the ISA's kernel table (skipped where this CPU or
// build lacks it) next to the scalar reference.
#pragma once

#include <gtest/gtest.h>

#include "kernels/kernels.h"

namespace aft::kernels {

class IsaTableTest : public testing::TestWithParam<const char*> {
 protected:
  void SetUp() override {
    table_ = kernels_for_isa(GetParam());
    if (table_ == nullptr) GTEST_SKIP() << GetParam() << " is not available on this CPU";
  }
  const KernelTable& k() const { return *table_; }
  const KernelTable& ref() const { return scalar_kernels(); }

 private:
  const KernelTable* table_ = nullptr;
};

}  // namespace aft::kernels
