// Per-thread bodies of the ChaCha20 samplers (oracle: csrc/cpu/sample.cpp; the streams are
// defined in csrc/chacha.h). The CPU draws every element from its own block computation;
// here a thread computes a block once and emits all the elements that read it (4 for
// uniform, 16 for ternary, 8 for CBD), recomputing further rounds only on a rejection.
#pragma once
#include <cstdint>
#include "util.cuh"
#include "../chacha.h"

namespace fhetorch::cuda::sample_detail {

struct UniformArgs {
  const uint32_t* key;
  uint64_t stream;
  int32_t* out;
  int64_t total;
  LimbOf limb;
  const int32_t* mod;
};

struct SmallArgs {
  const uint32_t* key;
  uint64_t stream;
  int64_t* out;
  int64_t total;
};

// Elements e = 2^LOG_PER * t + m (m < 2^LOG_PER, e < total) of a stream whose element e reads
// block e >> LOG_PER of round 0: the block is computed once, then emit(key, e, m, w) writes
// element e from the block's words w.
template <int LOG_PER, class A, class Emit>
FT_HD void for_block(const A& g, int64_t t, Emit&& emit) {
  const uint64_t e0 = static_cast<uint64_t>(t) << LOG_PER;
  if (static_cast<int64_t>(e0) >= g.total) return;
  uint32_t key[8], w[16];
#pragma unroll
  for (int i = 0; i < 8; ++i) key[i] = static_cast<uint32_t>(ldg(reinterpret_cast<const int32_t*>(g.key) + i));
  chacha20_block(key, static_cast<uint32_t>(e0 >> LOG_PER), static_cast<uint32_t>(g.stream),
                 static_cast<uint32_t>(g.stream >> 32), static_cast<uint32_t>(e0 >> (32 + LOG_PER)) << 8, w);
#pragma unroll
  for (int m = 0; m < (1 << LOG_PER); ++m) {
    if (static_cast<int64_t>(e0 + m) >= g.total) break;
    emit(key, e0 + m, m, w);
  }
}

// Words 4m .. 4m+3 (the first accepted wins; later rounds, as sample_uniform_one, on rejection).
FT_HD void uniform_thread(const UniformArgs& g, int64_t t) {
  for_block<2>(g, t, [&](const uint32_t* key, uint64_t e, int m, const uint32_t* w) {
    const uint32_t uq = static_cast<uint32_t>(ldg(g.mod + 2 * g.limb(static_cast<int64_t>(e))));
    const uint32_t bound = uq * (0xFFFFFFFFu / uq);
    int32_t val = -1;
#pragma unroll
    for (int i = 3; i >= 0; --i)
      if (w[4 * m + i] < bound) val = static_cast<int32_t>(w[4 * m + i] % uq);
    g.out[e] = val >= 0 ? val : sample_uniform_one(key, g.stream, e, static_cast<int32_t>(uq));
  });
}

// Word m (later rounds on 0xFFFFFFFF, as sample_ternary_one).
FT_HD void ternary_thread(const SmallArgs& g, int64_t t) {
  for_block<4>(g, t, [&](const uint32_t* key, uint64_t e, int m, const uint32_t* w) {
    g.out[e] = w[m] != 0xFFFFFFFFu ? static_cast<int64_t>(static_cast<int32_t>(w[m] % 3u) - 1)
                                   : static_cast<int64_t>(sample_ternary_one(key, g.stream, e));
  });
}

// Words 2m, 2m + 1 (as sample_cbd_one).
FT_HD void cbd_thread(const SmallArgs& g, int64_t t) {
  for_block<3>(g, t, [&](const uint32_t*, uint64_t e, int m, const uint32_t* w) {
    const uint32_t w0 = w[2 * m], w1 = w[2 * m + 1];
    g.out[e] = popcount32(w0 & 0x1FFFFFu) - popcount32((w0 >> 21) | ((w1 & 0x3FFu) << 11));
  });
}

}  // namespace fhetorch::cuda::sample_detail
