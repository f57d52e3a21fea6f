// Per-thread bodies of the ChaCha20 samplers (oracle: csrc/cpu/sample.cpp; the streams are
// defined in csrc/chacha.h). The CPU draws every element from its own block computation;
// here a thread computes a block once and emits all the elements that read it (4 for
// uniform, 16 for ternary, 8 for CBD), recomputing further rounds only on a rejection.
#pragma once
#include <cstdint>
#include "util.cuh"
#include "../chacha.h"

namespace fhetorch::cuda::sample_detail {

FT_HD void load_key(const uint32_t* key, uint32_t k[8]) {
#pragma unroll
  for (int i = 0; i < 8; ++i) k[i] = static_cast<uint32_t>(ldg(reinterpret_cast<const int32_t*>(key) + i));
}

struct UniformArgs {
  const uint32_t* key;
  uint64_t stream;
  int32_t* out;
  int64_t total;
  LimbOf limb;
  const int32_t* mod;
};

// Elements 4t .. 4t+3: words 4*(e%4) .. +3 of block e/4, round 0 (then the same words of
// later rounds on rejection), as sample_uniform_one.
FT_HD void uniform_thread(const UniformArgs& g, int64_t t) {
  const uint64_t e0 = 4 * static_cast<uint64_t>(t);
  if (static_cast<int64_t>(e0) >= g.total) return;
  uint32_t key[8], w[16];
  load_key(g.key, key);
  const uint32_t s0 = static_cast<uint32_t>(g.stream), s1 = static_cast<uint32_t>(g.stream >> 32);
  const uint32_t hi = static_cast<uint32_t>(e0 >> 34) << 8;
  chacha20_block(key, static_cast<uint32_t>(e0 >> 2), s0, s1, hi, w);
#pragma unroll
  for (int m = 0; m < 4; ++m) {
    const uint64_t e = e0 + m;
    if (static_cast<int64_t>(e) >= g.total) break;
    const uint32_t uq = static_cast<uint32_t>(ldg(g.mod + 2 * g.limb(static_cast<int64_t>(e))));
    const uint32_t bound = uq * (0xFFFFFFFFu / uq);
    int32_t val = -1;
#pragma unroll
    for (int i = 3; i >= 0; --i)  // the first accepted word wins
      if (w[4 * m + i] < bound) val = static_cast<int32_t>(w[4 * m + i] % uq);
    if (val < 0) val = sample_uniform_one(key, g.stream, e, static_cast<int32_t>(uq));  // rare: later rounds
    g.out[e] = val;
  }
}

struct SmallArgs {
  const uint32_t* key;
  uint64_t stream;
  int64_t* out;
  int64_t total;
};

// Elements 16t .. 16t+15: word e%16 of block e/16 (round 0; later rounds on 0xFFFFFFFF).
FT_HD void ternary_thread(const SmallArgs& g, int64_t t) {
  const uint64_t e0 = 16 * static_cast<uint64_t>(t);
  if (static_cast<int64_t>(e0) >= g.total) return;
  uint32_t key[8], w[16];
  load_key(g.key, key);
  chacha20_block(key, static_cast<uint32_t>(e0 >> 4), static_cast<uint32_t>(g.stream),
                 static_cast<uint32_t>(g.stream >> 32), static_cast<uint32_t>(e0 >> 36) << 8, w);
#pragma unroll
  for (int m = 0; m < 16; ++m) {
    const uint64_t e = e0 + m;
    if (static_cast<int64_t>(e) >= g.total) break;
    g.out[e] = w[m] != 0xFFFFFFFFu ? static_cast<int64_t>(static_cast<int32_t>(w[m] % 3u) - 1)
                                   : static_cast<int64_t>(sample_ternary_one(key, g.stream, e));
  }
}

// Elements 8t .. 8t+7: words 2*(e%8), 2*(e%8)+1 of block e/8.
FT_HD void cbd_thread(const SmallArgs& g, int64_t t) {
  const uint64_t e0 = 8 * static_cast<uint64_t>(t);
  if (static_cast<int64_t>(e0) >= g.total) return;
  uint32_t key[8], w[16];
  load_key(g.key, key);
  chacha20_block(key, static_cast<uint32_t>(e0 >> 3), static_cast<uint32_t>(g.stream),
                 static_cast<uint32_t>(g.stream >> 32), static_cast<uint32_t>(e0 >> 35) << 8, w);
#pragma unroll
  for (int m = 0; m < 8; ++m) {
    const uint64_t e = e0 + m;
    if (static_cast<int64_t>(e) >= g.total) break;
    const uint32_t w0 = w[2 * m], w1 = w[2 * m + 1];
    const uint32_t a = w0 & 0x1FFFFFu, b = (w0 >> 21) | ((w1 & 0x3FFu) << 11);
    g.out[e] = popcount32(a) - popcount32(b);
  }
}

}  // namespace fhetorch::cuda::sample_detail
