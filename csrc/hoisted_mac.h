// Hoisted baby-step rotations times plaintext diagonals, accumulated over P*Q (the fused
// linear transform of Cheddar Par.5; double hoisting of Bossuat et al. 2021). One element
// function shared by the CPU loop (csrc/cpu/elementwise.cpp) and the CUDA kernel
// (csrc/cuda/elementwise.cu); semantics in csrc/bind/schema.cpp ("hoisted_mac").
#pragma once
#include <cstdint>

#include "arith.h"

namespace fhetorch {

constexpr int kMacBabies = 16;  // baby steps per call
constexpr int kMacGiants = 8;   // outputs (giant steps) per call

// Everything one call needs; passed by value to the kernel (__grid_constant__), so the
// pointer tables need no device copy and the launch can be graph-captured.
struct MacArgs {
  const int32_t* d;    // (B, beta, Lext, n): ModUp of c[b][1]
  const int32_t* c;    // (B, 2, L, n)
  const int32_t* c_p;  // (L,): P mod q_i, Montgomery form
  const int32_t* mod;  // (Lext, 2)
  int32_t* out;        // (B, giants, 2, Lext, n)
  int64_t B, n;
  int log_n, beta, L, Lext, q_start, digit_start, babies, giants;
  uint32_t galois[kMacBabies];  // 1: no rotation (u = P * c)
  const int32_t* key_q[kMacBabies];  // (digits, 2, lq_key, n)
  const int32_t* key_p[kMacBabies];  // (digits, 2, K, n)
  int lq_key[kMacBabies];
  const int32_t* pt[kMacBabies][kMacGiants];  // (Lext, n) diagonal of (baby, giant), or null
};

// All outputs of ciphertext bb at ext limb i, coefficient x (item = i * n + x). Every
// product is reduced at once (mont_mul, add_mod): lazy 64-bit sums of centred products with
// one reduction per sum measured slower on the H100 (docs/benchmarks.md).
FT_HD void hoisted_mac_one(const MacArgs& g, int64_t bb, int64_t item) {
  // Offsets inside one tensor fit 32 bits (the binding checks the sizes), so the index
  // arithmetic of the loops stays 32-bit; pointers advance by whole strides.
  const uint32_t n = static_cast<uint32_t>(g.n);
  const int i = static_cast<int>(item >> g.log_n);
  const uint32_t x = static_cast<uint32_t>(item) & (n - 1u);
  const int32_t q = g.mod[2 * i], qinv = g.mod[2 * i + 1];
  const bool in_q = i < g.L;
  const int K = g.Lext - g.L;
  const int32_t cp = in_q ? g.c_p[i] : 0;
  const uint32_t d_stride = static_cast<uint32_t>(g.Lext) * n;  // digit to digit in d
  const int64_t plane = static_cast<int64_t>(g.Lext) * n;
  const int32_t* d_row = g.d + bb * g.beta * plane + static_cast<int64_t>(i) * n;
  const int32_t* c0_row = g.c + (2 * bb * g.L + (in_q ? i : 0)) * static_cast<int64_t>(n);
  int32_t acc[kMacGiants][2];
#pragma unroll
  for (int k = 0; k < kMacGiants; ++k) acc[k][0] = acc[k][1] = 0;
  for (int b = 0; b < g.babies; ++b) {
    int32_t u0 = 0, u1 = 0;
    const uint32_t gal = g.galois[b];
    if (gal == 1u) {
      if (in_q) {
        u0 = mont_mul(c0_row[x], cp, q, qinv);
        u1 = mont_mul(c0_row[static_cast<int64_t>(g.L) * n + x], cp, q, qinv);
      }
    } else {
      const uint32_t src = automorphism_source(x, gal, g.log_n);
      const uint32_t rows = in_q ? static_cast<uint32_t>(g.lq_key[b]) : static_cast<uint32_t>(K);
      const uint32_t stride = rows * n;  // component 0 -> 1 of a key digit
      const int32_t* k0 = in_q ? g.key_q[b] + static_cast<int64_t>(2 * g.digit_start * g.lq_key[b] + g.q_start + i) * n
                               : g.key_p[b] + static_cast<int64_t>(2 * g.digit_start * K + (i - g.L)) * n;
      const int32_t* dj = d_row;
      for (int j = 0; j < g.beta; ++j, dj += d_stride, k0 += 2 * stride) {
        const int32_t dv = dj[src];
        u0 = add_mod(u0, mont_mul(dv, k0[x], q, qinv), q);
        u1 = add_mod(u1, mont_mul(dv, k0[stride + x], q, qinv), q);
      }
      if (in_q) u0 = add_mod(u0, mont_mul(c0_row[src], cp, q, qinv), q);
    }
#pragma unroll
    for (int k = 0; k < kMacGiants; ++k) {
      const int32_t* p = g.pt[b][k];
      if (k < g.giants && p != nullptr) {
        const int32_t v = p[item];
        acc[k][0] = add_mod(acc[k][0], mont_mul(v, u0, q, qinv), q);
        acc[k][1] = add_mod(acc[k][1], mont_mul(v, u1, q, qinv), q);
      }
    }
  }
  int32_t* out = g.out + 2 * bb * g.giants * plane + item;
#pragma unroll
  for (int k = 0; k < kMacGiants; ++k) {
    if (k < g.giants) {
      out[(2 * k) * plane] = acc[k][0];
      out[(2 * k + 1) * plane] = acc[k][1];
    }
  }
}

// Every ciphertext of the batch at one item: the keys and diagonals they share are re-read
// by the same thread, from cache.
FT_HD void hoisted_mac_element(const MacArgs& g, int64_t item) {
  for (int64_t bb = 0; bb < g.B; ++bb) hoisted_mac_one(g, bb, item);
}

}  // namespace fhetorch
