#include "tools/bench/probes.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <numeric>
#include <thread>
#include <vector>

#include "kernels/kernels.h"
#include "kernels/thread_team.h"

namespace aft::bench {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// Results land here so that no probe can be optimised away.
volatile float g_sink = 0.0f;

}  // namespace

ReadProbe::ReadProbe(std::size_t bytes)
    : buffer_(std::max<std::size_t>(bytes / sizeof(float), 1024) * sizeof(float)) {
  repeats_ = std::max<std::size_t>(1, (std::size_t{64} << 20) / this->bytes());
  // Written by the threads that will read it: its pages land on their memory nodes.
  auto* data = reinterpret_cast<float*>(buffer_.data());
  const std::size_t n = buffer_.size() / sizeof(float);
  kernels::ThreadTeam::of_this_thread().run(
      static_cast<int>(std::thread::hardware_concurrency()), [&](kernels::TeamMember member) {
        for (std::size_t i = member.share_begin(n); i < member.share_end(n); ++i) {
          data[i] = static_cast<float>(i & 1023);
        }
      });
}

float ReadProbe::pass(int threads, std::size_t streams) const {
  const kernels::KernelTable& k = kernels::active_kernels();
  const std::size_t n = buffer_.size() / sizeof(float);
  const auto* data = reinterpret_cast<const float*>(buffer_.data());
  const std::size_t repeats = repeats_;
  constexpr std::size_t kBlock = 1024;  // floats (4 KiB) per stream in turn
  std::vector<float> totals(static_cast<std::size_t>(threads), 0.0f);
  kernels::ThreadTeam::of_this_thread().run(threads, [&](kernels::TeamMember member) {
    // Ranges start on cache lines (16 floats).
    const std::size_t parts = static_cast<std::size_t>(member.size);
    const std::size_t part = static_cast<std::size_t>(member.id);
    float total = 0.0f;
    const std::size_t per = (n / parts + 15) / 16 * 16;
    const std::size_t begin = std::min(n, part * per);
    const std::size_t end = part + 1 == parts ? n : std::min(n, begin + per);
    const std::size_t stream_length = ((end - begin) / streams + 15) / 16 * 16;
    for (std::size_t r = 0; r < repeats; ++r) {
      for (std::size_t offset = 0; offset < stream_length; offset += kBlock) {
        for (std::size_t s = 0; s < streams; ++s) {
          const std::size_t from = std::min(end, begin + s * stream_length + offset);
          const std::size_t to = std::min({end, from + kBlock, begin + (s + 1) * stream_length});
          total += k.sum_f32(to - from, data + from);
        }
      }
    }
    totals[part] = total;
  });
  float total = 0.0f;
  for (float t : totals) total += t;
  return total;
}

double ReadProbe::best_gbps(int threads, int runs) const {
  g_sink = g_sink + pass(threads, 1);  // untimed: brings a cache-sized buffer into the cache
  const double bytes = static_cast<double>(buffer_.size() * repeats_);
  double best = 0.0;
  for (int run = 0; run < runs; ++run) {
    const auto start = Clock::now();
    const float total = pass(threads, run % 2 == 0 ? 1 : 4);
    const double seconds = seconds_since(start);
    g_sink = g_sink + total;
    best = std::max(best, bytes / seconds / 1e9);
  }
  return best;
}

FmaProbe::FmaProbe() {
  const kernels::KernelTable& k = kernels::active_kernels();
  float sink[kernels::kFmaProbeMaxChains];
  std::size_t iterations = 1 << 14;
  double seconds = 0.0;
  while (true) {  // double until a run is long enough to time, then scale to ~0.1 s
    const auto start = Clock::now();
    k.fma_probe_f32(iterations, sink);
    seconds = seconds_since(start);
    if (seconds > 0.01 || iterations > (std::size_t{1} << 40)) break;
    iterations *= 2;
  }
  g_sink = g_sink + sink[0];
  iterations_ = std::max<std::size_t>(1, static_cast<std::size_t>(iterations * (0.1 / seconds)));
}

double FmaProbe::best_gflops(int threads, int runs) const {
  const kernels::KernelTable& k = kernels::active_kernels();
  const std::size_t iterations = iterations_;
  // One sink per thread, each on its own cache lines.
  std::vector<float> sinks(static_cast<std::size_t>(threads) * kernels::kFmaProbeMaxChains);
  double best = 0.0;
  for (int run = 0; run < runs; ++run) {
    std::vector<std::size_t> flops(static_cast<std::size_t>(threads), 0);
    const auto start = Clock::now();
    kernels::ThreadTeam::of_this_thread().run(threads, [&](kernels::TeamMember member) {
      const auto part = static_cast<std::size_t>(member.id);
      flops[part] = k.fma_probe_f32(iterations, &sinks[part * kernels::kFmaProbeMaxChains]);
    });
    const double seconds = seconds_since(start);
    g_sink = g_sink + sinks[0];
    const double total =
        static_cast<double>(std::accumulate(flops.begin(), flops.end(), std::size_t{0}));
    best = std::max(best, total / seconds / 1e9);
  }
  return best;
}

double ForkJoinProbe::best_microseconds(int threads, int runs) {
  constexpr int kRegions = 2000;
  double best = 0.0;
  for (int run = 0; run < runs; ++run) {
    std::atomic<int> entered{0};
    const auto start = Clock::now();
    for (int i = 0; i < kRegions; ++i) {
      kernels::ThreadTeam::of_this_thread().run(
          threads, [&](kernels::TeamMember) { entered.fetch_add(1, std::memory_order_relaxed); });
    }
    const double microseconds = seconds_since(start) * 1e6 / kRegions;
    g_sink = g_sink + static_cast<float>(entered.load());
    best = run == 0 ? microseconds : std::min(best, microseconds);
  }
  return best;
}

}  // namespace aft::bench
