// ChaCha20 block function (RFC 8439), shared by the CPU and CUDA samplers.
//
// The samplers are counter-based: output element e of a draw is computed from
// block(key, counter = e / per_block, nonce = (stream_lo, stream_hi, round)) alone, so
// every thread draws independently and the CPU and CUDA kernels give identical values.
#pragma once
#include <cstdint>
#include "arith.h"

namespace fhetorch {

FT_HD uint32_t rotl32(uint32_t x, int r) { return (x << r) | (x >> (32 - r)); }

#define FT_QR(a, b, c, d)          \
  a += b; d ^= a; d = rotl32(d, 16); \
  c += d; b ^= c; b = rotl32(b, 12); \
  a += b; d ^= a; d = rotl32(d, 8);  \
  c += d; b ^= c; b = rotl32(b, 7);

FT_HD void chacha20_block(const uint32_t key[8], uint32_t counter, uint32_t n0, uint32_t n1,
                          uint32_t n2, uint32_t out[16]) {
  uint32_t s[16] = {0x61707865u, 0x3320646eu, 0x79622d32u, 0x6b206574u,
                    key[0], key[1], key[2], key[3], key[4], key[5], key[6], key[7],
                    counter, n0, n1, n2};
  uint32_t x[16];
#pragma unroll
  for (int i = 0; i < 16; ++i) x[i] = s[i];
#pragma unroll 1
  for (int i = 0; i < 10; ++i) {
    FT_QR(x[0], x[4], x[8], x[12]);
    FT_QR(x[1], x[5], x[9], x[13]);
    FT_QR(x[2], x[6], x[10], x[14]);
    FT_QR(x[3], x[7], x[11], x[15]);
    FT_QR(x[0], x[5], x[10], x[15]);
    FT_QR(x[1], x[6], x[11], x[12]);
    FT_QR(x[2], x[7], x[8], x[13]);
    FT_QR(x[3], x[4], x[9], x[14]);
  }
#pragma unroll
  for (int i = 0; i < 16; ++i) out[i] = x[i] + s[i];
}
#undef FT_QR

// --- samplers: one output element, from its index alone ---------------------------

// Uniform in [0, q) by rejection (no modulo bias): element e tries words 4*(e%4)..+3 of
// block e/4 in round 0, then the same words of the next rounds. bound = q*floor(2^32/q).
FT_HD int32_t sample_uniform_one(const uint32_t key[8], uint64_t stream, uint64_t e, int32_t q) {
  const uint32_t uq = static_cast<uint32_t>(q);
  const uint32_t bound = uq * (0xFFFFFFFFu / uq);  // = q*floor(2^32/q): q is odd
  uint32_t w[16];
  for (uint32_t round = 0;; ++round) {
    chacha20_block(key, static_cast<uint32_t>(e >> 2), static_cast<uint32_t>(stream),
                   static_cast<uint32_t>(stream >> 32), round ^ (static_cast<uint32_t>(e >> 34) << 8), w);
    for (int i = 0; i < 4; ++i) {
      uint32_t r = w[4 * (e & 3u) + i];
      if (r < bound) return static_cast<int32_t>(r % uq);
    }
  }
}

// Uniform ternary {-1, 0, 1}: word e%16 of block e/16, rejecting 0xFFFFFFFF (2^32 = 1 mod 3).
FT_HD int32_t sample_ternary_one(const uint32_t key[8], uint64_t stream, uint64_t e) {
  uint32_t w[16];
  for (uint32_t round = 0;; ++round) {
    chacha20_block(key, static_cast<uint32_t>(e >> 4), static_cast<uint32_t>(stream),
                   static_cast<uint32_t>(stream >> 32), round ^ (static_cast<uint32_t>(e >> 36) << 8), w);
    uint32_t r = w[e & 15u];
    if (r != 0xFFFFFFFFu) return static_cast<int32_t>(r % 3u) - 1;
  }
}

// Centred binomial with eta = 21 (variance 10.5, sigma 3.24 >= 3.2): popcount of 21 bits
// minus popcount of 21 bits, from words 2*(e%8), 2*(e%8)+1 of block e/8.
constexpr int kCbdEta = 21;
FT_HD int32_t popcount32(uint32_t x) {
#if defined(__CUDA_ARCH__)
  return __popc(x);
#else
  return __builtin_popcount(x);
#endif
}
FT_HD int32_t sample_cbd_one(const uint32_t key[8], uint64_t stream, uint64_t e) {
  uint32_t w[16];
  chacha20_block(key, static_cast<uint32_t>(e >> 3), static_cast<uint32_t>(stream),
                 static_cast<uint32_t>(stream >> 32), static_cast<uint32_t>(e >> 35) << 8, w);
  uint32_t w0 = w[2 * (e & 7u)], w1 = w[2 * (e & 7u) + 1];
  uint32_t a = w0 & 0x1FFFFFu;
  uint32_t b = (w0 >> 21) | ((w1 & 0x3FFu) << 11);
  return popcount32(a) - popcount32(b);
}

}  // namespace fhetorch
