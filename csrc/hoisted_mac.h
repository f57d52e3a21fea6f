// Hoisted baby-step rotations times plaintext diagonals, accumulated over P*Q (the fused
// linear transform of Cheddar Par.5; double hoisting of Bossuat et al. 2021), and the sum of its
// giant steps' rotations over P*Q (keyswitch_inner_sum). Element functions shared by the CPU loop
// (csrc/cpu/elementwise.cpp) and the CUDA kernels (csrc/cuda/elementwise.cu); semantics in
// csrc/bind/schema.cpp ("hoisted_mac", "keyswitch_inner_sum").
#pragma once
#include <cstdint>

#include "arith.h"

namespace fhetorch {

constexpr int kMacBabies = 16;  // baby steps per call
constexpr int kMacGiants = 8;   // outputs (giant steps) per call

// V accumulator words moved at once (16-byte shared-memory accesses for V = 4).
template <int V>
struct alignas(4 * V) Words {
  int32_t w[V];
};

// One giant's accumulators (both components) += diagonal * the baby step's (u0, u1).
template <int V>
FT_HD void mac_giant(int32_t* a0, int32_t* a1, const int32_t* pv, const int32_t* u0, const int32_t* u1, int32_t q,
                     int32_t qinv) {
#pragma unroll
  for (int v = 0; v < V; ++v) {
    a0[v] = add_mod(a0[v], mont_mul(pv[v], u0[v], q, qinv), q);
    a1[v] = add_mod(a1[v], mont_mul(pv[v], u1[v], q, qinv), q);
  }
}

// u0, u1 (V words each) += sum over the beta digits of the lifted digit read through a rotation
// (d_row + src[v], the digits d_stride apart) times the key's two components (k0: digit 0's row of
// component 0; the components stride apart, the digits 2 stride): a rotation's key products over P*Q.
// Two digits' key rows and gathers in flight at once: at 2 blocks an SM hoisted_mac waits on memory
// latency (128 registers unrolled, 2 blocks still; by 3, 160 registers: 1 block).
template <int V, class Mem, class Stride>
FT_HD void add_rotated_key_products(int32_t* u0, int32_t* u1, const int32_t* d_row, Stride d_stride,
                                    const int32_t* k0, uint32_t stride, uint32_t x, const uint32_t* src, int beta,
                                    int32_t q, int32_t qinv) {
  const int32_t* dj = d_row;
#pragma unroll 2
  for (int j = 0; j < beta; ++j, dj += d_stride, k0 += 2 * stride) {
    int32_t ka[V], kb[V], dv[V];
    Mem::template load<V>(k0 + x, ka);
    Mem::template load<V>(k0 + stride + x, kb);
#pragma unroll
    for (int v = 0; v < V; ++v) dv[v] = Mem::load1(dj + src[v]);
#pragma unroll
    for (int v = 0; v < V; ++v) {
      u0[v] = add_mod(u0[v], mont_mul(dv[v], ka[v], q, qinv), q);
      u1[v] = add_mod(u1[v], mont_mul(dv[v], kb[v], q, qinv), q);
    }
  }
}

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

// All outputs of ciphertext bb at ext limb i, coefficients x .. x + V - 1 (item = i * n + x, V
// dividing n). Mem reads and writes memory: Mem::load<V> / store<V> move V consecutive words
// (the GPU's 16-byte accesses for V = 4: the keys, c, the diagonals and the outputs are the bytes
// this op is bound by), Mem::load1 one word (the rotated digits are gathers). Every product is
// reduced at once (mont_mul, add_mod) to a canonical value, so any V gives the same results; lazy
// 64-bit sums of centred products with one reduction per sum measured slower on the H100
// (docs/benchmarks.md). GMAX bounds g.giants: a build for few giants holds fewer accumulators.
// The accumulators of giants GREG .. GMAX - 1 live in `spare` instead of registers (the GPU's
// shared memory: slot (k - GREG) * 2 + component at spare + slot * spare_stride, V words each).
// LG giants' diagonals are loaded before their products (each giant's load sat in a branch of its
// own, one load in flight at a time); the sums are the same in any case.
template <int V, class Mem, int GMAX = kMacGiants, int GREG = GMAX, int LG = 1>
FT_HD void hoisted_mac_run(const MacArgs& g, int64_t bb, int64_t item, int32_t* spare = nullptr,
                           int spare_stride = 0) {
  const uint32_t n = static_cast<uint32_t>(g.n);
  const int i = static_cast<int>(item >> g.log_n);
  const uint32_t x = static_cast<uint32_t>(item) & (n - 1u);
  const int32_t q = Mem::load1(g.mod + 2 * i), qinv = Mem::load1(g.mod + 2 * i + 1);
  const bool in_q = i < g.L;
  const int K = g.Lext - g.L;
  const int32_t cp = in_q ? Mem::load1(g.c_p + i) : 0;
  const uint32_t d_stride = static_cast<uint32_t>(g.Lext) * n;
  const int64_t plane = static_cast<int64_t>(g.Lext) * n;
  const int32_t* d_row = g.d + bb * g.beta * plane + static_cast<int64_t>(i) * n;
  const int32_t* c0_row = g.c + (2 * bb * g.L + (in_q ? i : 0)) * static_cast<int64_t>(n);
  int32_t acc[GREG > 0 ? GREG : 1][2][V];
#pragma unroll
  for (int k = 0; k < GREG; ++k)
#pragma unroll
    for (int v = 0; v < V; ++v) acc[k][0][v] = acc[k][1][v] = 0;
#pragma unroll
  for (int k = 2 * GREG; k < 2 * GMAX; ++k)
    *reinterpret_cast<Words<V>*>(spare + (k - 2 * GREG) * spare_stride) = Words<V>{};
  for (int b = 0; b < g.babies; ++b) {
    int32_t u0[V], u1[V];
#pragma unroll
    for (int v = 0; v < V; ++v) u0[v] = u1[v] = 0;
    const uint32_t gal = g.galois[b];
    if (gal == 1u) {
      if (in_q) {
        int32_t c0[V], c1[V];
        Mem::template load<V>(c0_row + x, c0);
        Mem::template load<V>(c0_row + static_cast<int64_t>(g.L) * n + x, c1);
#pragma unroll
        for (int v = 0; v < V; ++v) {
          u0[v] = mont_mul(c0[v], cp, q, qinv);
          u1[v] = mont_mul(c1[v], cp, q, qinv);
        }
      }
    } else {
      uint32_t src[V];
#pragma unroll
      for (int v = 0; v < V; ++v) src[v] = automorphism_source(x + v, gal, g.log_n);
      const uint32_t rows = in_q ? static_cast<uint32_t>(g.lq_key[b]) : static_cast<uint32_t>(K);
      const uint32_t stride = rows * n;
      const int32_t* k0 = in_q ? g.key_q[b] + static_cast<int64_t>(2 * g.digit_start * g.lq_key[b] + g.q_start + i) * n
                               : g.key_p[b] + static_cast<int64_t>(2 * g.digit_start * K + (i - g.L)) * n;
      add_rotated_key_products<V, Mem>(u0, u1, d_row, d_stride, k0, stride, x, src, g.beta, q, qinv);
      if (in_q) {
#pragma unroll
        for (int v = 0; v < V; ++v) u0[v] = add_mod(u0[v], mont_mul(Mem::load1(c0_row + src[v]), cp, q, qinv), q);
      }
    }
#pragma unroll
    for (int k0 = 0; k0 < GMAX; k0 += LG) {
      int32_t pv[LG][V];
      bool on[LG];
#pragma unroll
      for (int j = 0; j < LG; ++j) {
        const int k = k0 + j;
        const int32_t* p = k < GMAX ? g.pt[b][k] : nullptr;
        on[j] = k < g.giants && p != nullptr;
        if (on[j]) Mem::template load<V>(p + item, pv[j]);
      }
#pragma unroll
      for (int j = 0; j < LG; ++j) {
        const int k = k0 + j;
        if (!on[j]) continue;
        if (k < GREG) {
          mac_giant<V>(acc[k][0], acc[k][1], pv[j], u0, u1, q, qinv);
        } else {
          Words<V>* s0 = reinterpret_cast<Words<V>*>(spare + (2 * (k - GREG)) * spare_stride);
          Words<V>* s1 = reinterpret_cast<Words<V>*>(spare + (2 * (k - GREG) + 1) * spare_stride);
          Words<V> a0 = *s0, a1 = *s1;
          mac_giant<V>(a0.w, a1.w, pv[j], u0, u1, q, qinv);
          *s0 = a0;
          *s1 = a1;
        }
      }
    }
  }
  int32_t* out = g.out + 2 * bb * g.giants * plane + item;
#pragma unroll
  for (int k = 0; k < GMAX; ++k) {
    if (k < g.giants && k < GREG) {
      Mem::template store<V>(out + (2 * k) * plane, acc[k][0]);
      Mem::template store<V>(out + (2 * k + 1) * plane, acc[k][1]);
    } else if (k < g.giants) {
      Mem::template store<V>(out + (2 * k) * plane, spare + (2 * (k - GREG)) * spare_stride);
      Mem::template store<V>(out + (2 * k + 1) * plane, spare + (2 * (k - GREG) + 1) * spare_stride);
    }
  }
}


// keyswitch_inner_sum: the rotations of G polynomials' ModUp'd digits summed over P*Q.
struct InnerSumArgs {
  const int32_t* d;       // (B, G, beta, Lext, n): ModUp of y_k1
  const int32_t* addend;  // (B, G, La, n), addend_stride words between its planes: y_k0, added as aut_k(y_k0) * c_add
                          // on component 0
  const int32_t* c_add;   // (La,), Montgomery form
  const int32_t* acc;     // (B, 2, Lext, n) running sum, or null
  const int32_t* mod;     // (Lext, 2)
  int32_t* out;           // (B, 2, Lext, n)
  int64_t B, n, addend_stride;
  int log_n, G, beta, Lq, Lext, La, q_start, digit_start;
  uint32_t galois[kMacGiants];
  const int32_t* key_q[kMacGiants];  // (digits, 2, lq_key, n)
  const int32_t* key_p[kMacGiants];  // (digits, 2, K, n)
  int lq_key[kMacGiants];
};

// Both outputs of ciphertext bb at ext limb i, coefficients x .. x + V - 1 (item = i * n + x):
// acc + sum_k (sum_j aut_k(d_kj) * key_kj, + aut_k(addend_k) * c_add on component 0 of the first La
// limbs). Canonical after every step (mont_mul, add_mod), so any V gives the same results.
template <int V, class Mem>
FT_HD void keyswitch_inner_sum_run(const InnerSumArgs& g, int64_t bb, int64_t item) {
  const uint32_t n = static_cast<uint32_t>(g.n);
  const int i = static_cast<int>(item >> g.log_n);
  const uint32_t x = static_cast<uint32_t>(item) & (n - 1u);
  const int32_t q = Mem::load1(g.mod + 2 * i), qinv = Mem::load1(g.mod + 2 * i + 1);
  const bool in_q = i < g.Lq, add = i < g.La;
  const int K = g.Lext - g.Lq;
  const int32_t ca = add ? Mem::load1(g.c_add + i) : 0;
  const int64_t plane = static_cast<int64_t>(g.Lext) * n;
  int32_t acc0[V], acc1[V];
  if (g.acc) {
    Mem::template load<V>(g.acc + 2 * bb * plane + item, acc0);
    Mem::template load<V>(g.acc + (2 * bb + 1) * plane + item, acc1);
  } else {
#pragma unroll
    for (int v = 0; v < V; ++v) acc0[v] = acc1[v] = 0;
  }
  for (int k = 0; k < g.G; ++k) {
    uint32_t src[V];
#pragma unroll
    for (int v = 0; v < V; ++v) src[v] = automorphism_source(x + v, g.galois[k], g.log_n);
    const uint32_t rows = in_q ? static_cast<uint32_t>(g.lq_key[k]) : static_cast<uint32_t>(K);
    const uint32_t stride = rows * n;
    const int32_t* k0 = in_q ? g.key_q[k] + static_cast<int64_t>(2 * g.digit_start * g.lq_key[k] + g.q_start + i) * n
                             : g.key_p[k] + static_cast<int64_t>(2 * g.digit_start * K + (i - g.Lq)) * n;
    const int32_t* d_row = g.d + (bb * g.G + k) * g.beta * plane + static_cast<int64_t>(i) * n;
    add_rotated_key_products<V, Mem>(acc0, acc1, d_row, plane, k0, stride, x, src, g.beta, q, qinv);
    if (add) {
      const int32_t* y0 = g.addend + (bb * g.G + k) * g.addend_stride + i * static_cast<int64_t>(n);
#pragma unroll
      for (int v = 0; v < V; ++v) acc0[v] = add_mod(acc0[v], mont_mul(Mem::load1(y0 + src[v]), ca, q, qinv), q);
    }
  }
  Mem::template store<V>(g.out + 2 * bb * plane + item, acc0);
  Mem::template store<V>(g.out + (2 * bb + 1) * plane + item, acc1);
}

// Plain memory accesses (the CPU loop).
struct PlainMem {
  static FT_HD int32_t load1(const int32_t* p) { return *p; }
  template <int V>
  static FT_HD void load(const int32_t* p, int32_t* o) {
    for (int v = 0; v < V; ++v) o[v] = p[v];
  }
  template <int V>
  static FT_HD void store(int32_t* p, const int32_t* v) {
    for (int k = 0; k < V; ++k) p[k] = v[k];
  }
};

// Every ciphertext of the batch at one item: the keys and diagonals they share are re-read
// by the same thread, from cache.
FT_HD void hoisted_mac_element(const MacArgs& g, int64_t item) {
  for (int64_t bb = 0; bb < g.B; ++bb) hoisted_mac_run<1, PlainMem>(g, bb, item);
}

FT_HD void keyswitch_inner_sum_element(const InnerSumArgs& g, int64_t item) {
  for (int64_t bb = 0; bb < g.B; ++bb) keyswitch_inner_sum_run<1, PlainMem>(g, bb, item);
}

}  // namespace fhetorch
