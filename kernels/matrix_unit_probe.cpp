#include "kernels/matrix_unit_probe.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <unordered_map>
#include <vector>

#include <dnnl.hpp>

#include "kernels/first_exception.h"
#include "kernels/matmul.h"
#include "kernels/onednn_engine.h"
#include "kernels/single_threaded_onednn.h"
#include "kernels/thread_team.h"

namespace aft::kernels {
namespace {

using dnnl::memory;
using Clock = std::chrono::steady_clock;

constexpr memory::dim kRows = 512;      // M: a prompt chunk
constexpr memory::dim kColumns = 1024;  // K and N
constexpr double kRunSeconds = 0.05;

// One thread's product and the memory it reads and writes (filled with small values: the speed
// of the units does not depend on them, and no subnormal slows a path down).
struct ThreadProduct {
  std::vector<std::vector<char>> buffers;  // src, weights, dst, scratchpad
  std::unordered_map<int, memory> args;    // the call's arguments, over the buffers
};

}  // namespace

struct MatrixUnitProbe::Impl {
  std::string implementation;
  dnnl::matmul product;
  std::vector<ThreadProduct> threads;
  int repeats = 1;  // products per timed run, ~kRunSeconds on one thread

  void run_on(int thread, int repeats_here) const {
    const SingleThreadedOneDnn single;
    dnnl::stream stream(onednn_cpu_engine());
    const ThreadProduct& t = threads[static_cast<std::size_t>(thread)];
    for (int i = 0; i < repeats_here; ++i) product.execute(stream, t.args);
    stream.wait();
  }
};

MatrixUnitProbe::MatrixUnitProbe(UnitProduct type, int max_threads)
    : impl_(std::make_unique<Impl>()) {
  if (type == UnitProduct::Bf16 && matrix_units().empty()) return;
  const memory::data_type in =
      type == UnitProduct::Bf16 ? memory::data_type::bf16 : memory::data_type::u8;
  const memory::data_type weights =
      type == UnitProduct::Bf16 ? memory::data_type::bf16 : memory::data_type::s8;
  const memory::data_type out =
      type == UnitProduct::Bf16 ? memory::data_type::f32 : memory::data_type::s32;
  const memory::desc src({kRows, kColumns}, in, memory::format_tag::ab);
  const memory::desc wei({kColumns, kColumns}, weights, memory::format_tag::any);
  const memory::desc dst({kRows, kColumns}, out, memory::format_tag::ab);
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  dnnl::matmul::primitive_desc pd;
  try {
    const SingleThreadedOneDnn single;
    pd = dnnl::matmul::primitive_desc(dnnl::matmul::desc(src, wei, dst), attr, onednn_cpu_engine());
    impl_->product = dnnl::matmul(pd);
  } catch (const dnnl::error&) {
    return;
  }
  const std::string name = pd.impl_info_str();
  if (name.rfind("ref", 0) == 0) return;
  impl_->threads.resize(static_cast<std::size_t>(std::max(max_threads, 1)));
  for (ThreadProduct& t : impl_->threads) {
    const memory::desc descs[] = {src, pd.weights_desc(), dst, pd.scratchpad_desc()};
    const int roles[] = {DNNL_ARG_SRC, DNNL_ARG_WEIGHTS, DNNL_ARG_DST, DNNL_ARG_SCRATCHPAD};
    for (int i = 0; i < 4; ++i) {
      // bf16 0x3c00 is 2^-7, and int8 / u8 1: small, exact, and the same bytes in both.
      t.buffers.emplace_back(std::max<std::size_t>(descs[i].get_size(), 1),
                             static_cast<char>(i < 2 ? 0x01 : 0));
      if (type == UnitProduct::Bf16 && i < 2) {
        auto* values = reinterpret_cast<uint16_t*>(t.buffers.back().data());
        std::fill(values, values + descs[i].get_size() / 2, uint16_t{0x3c00});
      }
      t.args.emplace(roles[i], memory(descs[i], onednn_cpu_engine(), t.buffers.back().data()));
    }
  }
  // Products per run: double until one run is long enough to time, then scale to kRunSeconds.
  double seconds = 0.0;
  while (true) {
    const auto start = Clock::now();
    impl_->run_on(0, impl_->repeats);
    seconds = std::chrono::duration<double>(Clock::now() - start).count();
    if (seconds > 0.01 || impl_->repeats > (1 << 20)) break;
    impl_->repeats *= 2;
  }
  impl_->repeats = std::max(1, static_cast<int>(impl_->repeats * (kRunSeconds / seconds)));
  impl_->implementation = name;
}

MatrixUnitProbe::~MatrixUnitProbe() = default;
MatrixUnitProbe::MatrixUnitProbe(MatrixUnitProbe&&) noexcept = default;
MatrixUnitProbe& MatrixUnitProbe::operator=(MatrixUnitProbe&&) noexcept = default;

const std::string& MatrixUnitProbe::implementation() const { return impl_->implementation; }

double MatrixUnitProbe::best_gops(int threads, int runs) const {
  if (impl_->implementation.empty()) return 0.0;
  threads = std::clamp(threads, 1, static_cast<int>(impl_->threads.size()));
  const double operations =
      2.0 * static_cast<double>(kRows) * kColumns * kColumns * impl_->repeats * threads;
  double best = 0.0;
  for (int run = 0; run < runs; ++run) {
    FirstException error;
    const auto start = Clock::now();
    ThreadTeam::of_this_thread().run(threads, [&](TeamMember member) {
      error.run([&] { impl_->run_on(member.id, impl_->repeats); });
    });
    const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
    error.rethrow();
    best = std::max(best, operations / seconds / 1e9);
  }
  return best;
}

}  // namespace aft::kernels
