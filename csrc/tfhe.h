// TFHE on q = q0 * q1 (two NTT primes below 2^31, q_i = 1 mod 2^17): the step functions
// shared by the CPU kernels (csrc/cpu/tfhe.cpp) and the CUDA kernels (csrc/cuda/tfhe.cu), so
// both devices compute the same values bit for bit. Semantics in csrc/bind/schema.cpp
// ("tfhe_*"); the math in docs/tfhe.md.
//
// Integers mod q are int64 in [0, q) (q < 2^62: sums of two fit); polynomial products run
// per prime on the CKKS side's Montgomery arithmetic and NTT (same tables, same butterflies as
// csrc/cpu/ntt.cpp), and the two residues are joined by CRT (tfhe_compose).
//
// Work on one ciphertext is written for a "team": `rank` and `size` split the loops, `sync()`
// is a barrier between phases. The CPU runs a team of one (no barrier), CUDA one thread block
// (__syncthreads), so one function body serves both.
#pragma once
#include <cstdint>

#include "arith.h"
#include "chacha.h"

namespace fhetorch {

// The modulus q = q0 * q1 and its CRT constant; filled on the host by the binding.
struct TfheMod {
  int32_t q[2];
  int32_t qinv[2];  // q_i^-1 mod 2^32 (Montgomery)
  int64_t q_full;   // q0 * q1 < 2^62
  int64_t q0_inv;   // q0^-1 mod q1
  int32_t q0_inv_mont;  // q0^-1 * 2^32 mod q1 (the CRT join's Montgomery constant)
};

// Canonical mod-q arithmetic of the GGSW product, each reduction one unsigned min (x - q wraps
// above x when x < q; x + q wraps below x when x < 0): the same values as arith.h's add_mod and
// mont_mul.
FT_HD uint32_t tfhe_umin(uint32_t x, uint32_t y) { return x < y ? x : y; }
FT_HD int32_t tfhe_add_q(int32_t a, int32_t b, int32_t q) {
  const uint32_t s = static_cast<uint32_t>(a) + static_cast<uint32_t>(b);
  return static_cast<int32_t>(tfhe_umin(s, s - static_cast<uint32_t>(q)));
}
FT_HD int32_t tfhe_canon_q(int32_t x, int32_t q) {  // (-q, q) -> [0, q)
  return static_cast<int32_t>(tfhe_umin(static_cast<uint32_t>(x), static_cast<uint32_t>(x) + static_cast<uint32_t>(q)));
}
FT_HD int32_t tfhe_mul_q(int32_t a, int32_t b, int32_t q, int32_t qinv) {  // |a| < q, b in [0, q)
  return tfhe_canon_q(smr(static_cast<int64_t>(a) * b, q, qinv), q);
}

// Residues (r0 mod q0, r1 mod q1), canonical -> x in [0, q) (Garner: x = r0 + q0 * t).
// t = (r1 - r0) q0^-1 mod q1 by one Montgomery product: |r1 - r0| < 2^31 and q0_inv_mont < q1,
// so the product is inside smr's range; t is canonical, so x is unique whatever the method.
FT_HD int64_t tfhe_compose(int32_t r0, int32_t r1, const TfheMod& m) {
  const int64_t d = static_cast<int64_t>(r1) - static_cast<int64_t>(r0);
  const int32_t t = tfhe_canon_q(smr(d * m.q0_inv_mont, m.q[1], m.qinv[1]), m.q[1]);
  return static_cast<int64_t>(r0) + static_cast<int64_t>(m.q[0]) * t;
}

// x in [0, q) or a signed small integer -> its canonical residue mod p.
FT_HD int32_t tfhe_residue(int64_t x, int32_t p) {
  int64_t r = x % p;
  return static_cast<int32_t>(r < 0 ? r + p : r);
}

FT_HD int64_t tfhe_add(int64_t a, int64_t b, int64_t q) {
  const int64_t s = a + b;
  return s >= q ? s - q : s;
}
FT_HD int64_t tfhe_sub(int64_t a, int64_t b, int64_t q) {
  const int64_t s = a - b;
  return s < 0 ? s + q : s;
}

// round(x * 2^bits / q) mod 2^bits for x in [0, q), bits <= 62, exactly (round half up; q is
// odd, so there is no tie). The modulus switch (bits = log2 2N) and the gadget decomposition's
// rounding (bits = base_log * level) are both this.
//  * bits <= 48: a double estimate r of x 2^bits / q (relative error < 2^-51, so within 1/8 of
//    the true value below 2^48: r is the rounded value or off by one), then an exact correction:
//    D = x 2^bits - r q computed mod 2^64 is exact as a signed number (|D| < 1.5 q < 2^63), and
//    the rounded value is the r with -q/2 < D < q/2. The result does not depend on how the
//    device rounds the double: any estimate within one of the truth gives the same r.
//  * larger bits: bit-by-bit long division (the remainder stays below q < 2^62, so its double
//    fits), then round half up. No 128-bit arithmetic on either device.
FT_HD uint64_t tfhe_round_pow2(int64_t x, int64_t q, int bits) {
  const uint64_t mask = (uint64_t(1) << bits) - 1;
  if (bits <= 48) {
    const double scale = static_cast<double>(uint64_t(1) << bits) / static_cast<double>(q);
    int64_t r = static_cast<int64_t>(static_cast<double>(x) * scale + 0.5);
    const int64_t d = static_cast<int64_t>((static_cast<uint64_t>(x) << bits) -
                                           static_cast<uint64_t>(r) * static_cast<uint64_t>(q));
    const int64_t half = q >> 1;
    if (d > half) r += 1;
    else if (d < -half) r -= 1;
    return static_cast<uint64_t>(r) & mask;
  }
  uint64_t r = static_cast<uint64_t>(x), res = 0;
  const uint64_t uq = static_cast<uint64_t>(q);
  for (int i = 0; i < bits; ++i) {
    r <<= 1;
    res <<= 1;
    if (r >= uq) {
      r -= uq;
      res |= 1u;
    }
  }
  if (2 * r >= uq) res += 1;
  return res & mask;
}

// Digit j (j = 0 the most significant) of the balanced base-2^base_log decomposition of
// v < 2^(base_log * level): digits in [-B/2, B/2) with sum_j d_j B^(level-1-j) = v mod B^level.
// Computed from the least significant digit up, as the carries run.
FT_HD int32_t tfhe_digit(uint64_t v, int base_log, int level, int j) {
  const uint64_t mask = (uint64_t(1) << base_log) - 1, half = uint64_t(1) << (base_log - 1);
  int64_t d = 0;
  for (int k = level - 1; k >= j; --k) {
    const uint64_t u = v & mask;
    v >>= base_log;
    d = static_cast<int64_t>(u);
    if (u >= half) {
      d -= static_cast<int64_t>(mask) + 1;
      v += 1;
    }
  }
  return static_cast<int32_t>(d);
}

// Coefficient c of X^s * P (N = 2^log_n coefficients, s in [0, 2N), negacyclic) is P[j], negated
// where neg: the index j, with neg set.
FT_HD int64_t tfhe_rotation_source(int64_t c, int64_t s, int log_n, bool& neg) {
  const int64_t n = int64_t(1) << log_n;
  int64_t u = c - s;
  neg = false;
  if (u >= 0) return u;
  u += 2 * n;
  if (u < n) return u;
  neg = true;
  return u - n;
}

// Coefficient c of X^s * P for P mod q.
FT_HD int64_t tfhe_rotated(const int64_t* p, int64_t c, int64_t s, int log_n, int64_t q) {
  bool neg;
  const int64_t v = p[tfhe_rotation_source(c, s, log_n, neg)];
  return !neg || v == 0 ? v : q - v;
}

// Uniform int64 in [lo, lo + span) (span in [1, 2^62]) by rejection (no modulo bias): element
// e reads words 2(e%8), 2(e%8)+1 of block e/8, trying round 0, 1, ... (as chacha.h's samplers).
FT_HD int64_t tfhe_sample_int_one(const uint32_t key[8], uint64_t stream, uint64_t e, int64_t lo, uint64_t span) {
  const uint64_t limit = span * (~uint64_t(0) / span);
  uint32_t w[16];
  for (uint32_t round = 0;; ++round) {
    chacha20_block(key, static_cast<uint32_t>(e >> 3), static_cast<uint32_t>(stream),
                   static_cast<uint32_t>(stream >> 32), round ^ (static_cast<uint32_t>(e >> 35) << 8), w);
    const uint64_t r = static_cast<uint64_t>(w[2 * (e & 7u)]) | (static_cast<uint64_t>(w[2 * (e & 7u) + 1]) << 32);
    if (r < limit) return lo + static_cast<int64_t>(r % span);
  }
}

// ---- teams ---------------------------------------------------------------------------------

struct SoloTeam {  // the CPU: one thread per ciphertext
  static constexpr int rank = 0, size = 1;
  FT_HD void sync() const {}
};

// A read of read-only data (keys, tables): through the non-coherent cache on the GPU.
FT_HD int32_t tfhe_load(const int32_t* p) {
#if defined(__CUDA_ARCH__)
  return __ldg(p);
#else
  return *p;
#endif
}

// ---- NTT of polynomials held by a team -----------------------------------------------------
//
// Coefficient x of a row lives at slot tfhe_slot(x) = x ^ ((x >> 5) & 31) (a permutation of the
// row: the low 5 bits are XORed with bits 5..9). Every access to the NTT scratch goes through it,
// so the values are the same as without it; on the GPU it spreads the accesses of a warp over
// the 32 banks of shared memory (below).
FT_HD uint32_t tfhe_slot(uint32_t x) { return x ^ ((x >> 5) & 31u); }

// Lazy values of the NTT, in [0, 2q) (2q < 2^32): [0, 2q) -> [0, q) by one unsigned min.
FT_HD uint32_t tfhe_reduce_2q(uint32_t x, uint32_t q) { return tfhe_umin(x, x - q); }

// a w 2^-32 mod q in [0, 2q), for a < 2q, w < q, nqinv = -q^-1 mod 2^32: with t = lo(a w) nqinv,
// a w + t q < 2q^2 + 2^32 q < 2^64 is divisible by 2^32, and the quotient is below 2q.
FT_HD uint32_t tfhe_mont_lazy(uint32_t a, uint32_t w, uint32_t q, uint32_t nqinv) {
  const uint64_t p = static_cast<uint64_t>(a) * w;
  const uint32_t t = static_cast<uint32_t>(p) * nqinv;
  return static_cast<uint32_t>((p + static_cast<uint64_t>(t) * q) >> 32);
}

// The bits of w deposited, lowest first, at the set bits of mask.
FT_HD uint32_t tfhe_deposit(uint32_t w, uint32_t mask) {
  uint32_t x = 0;
  for (; mask != 0; mask &= mask - 1, w >>= 1)
    if (w & 1u) x |= mask & (0u - mask);
  return x;
}

// A round of R stages of a negacyclic NTT on `rows` rows of N = 2^log_n (row r on limb r & 1: the
// rows of a TFHE polynomial alternate q0, q1; or every row on `limb` where limb >= 0), over the
// index bits [lo, lo + R): every item is the 2^R coefficients that differ only in those bits,
// loaded into registers, taken through the R stages, stored back. Forward (INV false): Cooley-Tukey, bits from high to low; inverse:
// Gentleman-Sande, bits from low to high. The stage on bit b pairs x with x | 2^b (bit b clear in
// x) under twiddle tw[l][(N + x) >> (b + 1)], as csrc/cpu/ntt.cpp's radix-2 loops. Arithmetic is
// lazy: inputs and outputs in [0, 2q) (canonical inputs are fine; readers of the output reduce),
// the same values mod q whatever the grouping of stages into rounds.
// Items: w's 5 lowest bits (a warp's lanes, for consecutive ranks) go to index bits i, or i + 5
// where bit i is a round bit, so that tfhe_slot maps the 32 lanes to 32 distinct banks (each bank
// bit is one lane bit XOR constants); w's other bits fill the free index bits upwards.
template <bool INV, int R, class T>
FT_HD void tfhe_ntt_round(const T& t, int32_t* a, int rows, int log_n, int lo, const int32_t* tw, const TfheMod& m,
                          int limb) {
  constexpr int E = 1 << R;
  const uint32_t n = 1u << log_n, round_bits = ((1u << R) - 1u) << lo;
  const int wbits = log_n - R;
  const uint32_t items = static_cast<uint32_t>(rows) << wbits;
  const bool lanes = log_n >= 10;  // room for the lane layout; smaller rows: plain deposit
  // lane bit i goes to index bit i, or i + 5 where i is a round bit
  uint32_t lane_bits = 0;
#pragma unroll
  for (int i = 0; i < 5; ++i) lane_bits |= 1u << (i + 5 * ((round_bits >> i) & 1u));
  const uint32_t free_bits = (n - 1u) & ~round_bits, rest_bits = free_bits & ~lane_bits;
  for (uint32_t it = static_cast<uint32_t>(t.rank); it < items; it += static_cast<uint32_t>(t.size)) {
    const uint32_t r = it >> wbits, w = it & ((1u << wbits) - 1u);
    uint32_t x0;
    if (lanes) {
      x0 = tfhe_deposit(w >> 5, rest_bits);
#pragma unroll
      for (int i = 0; i < 5; ++i) x0 |= ((w >> i) & 1u) << (i + 5 * ((round_bits >> i) & 1u));
    } else {
      x0 = tfhe_deposit(w, free_bits);
    }
    const int l = limb >= 0 ? limb : static_cast<int>(r & 1u);
    const uint32_t q = static_cast<uint32_t>(m.q[l]), nqinv = 0u - static_cast<uint32_t>(m.qinv[l]);
    uint32_t* row = reinterpret_cast<uint32_t*>(a) + static_cast<int64_t>(r) * n;
    const int32_t* twl = tw + static_cast<int64_t>(l) * n;
    uint32_t v[E];
#pragma unroll
    for (int u = 0; u < E; ++u) v[u] = row[tfhe_slot(x0 | (static_cast<uint32_t>(u) << lo))];
#pragma unroll
    for (int k = 0; k < R; ++k) {
      const int lb = INV ? k : R - 1 - k, b = lo + lb;  // local and row bit of this stage
      // twiddle of the pair whose lower member is x0 | u << lo: base + (u >> (lb + 1))
      const uint32_t base = (n + x0) >> (b + 1);
      uint32_t w_tw[E / 2];
#pragma unroll
      for (int g = 0; g < (E >> (lb + 1)); ++g) w_tw[g] = static_cast<uint32_t>(tfhe_load(twl + base + g));
#pragma unroll
      for (int u = 0; u < E; ++u) {
        if ((u >> lb) & 1) continue;
        const uint32_t s = w_tw[u >> (lb + 1)];
        uint32_t& x = v[u];
        uint32_t& y = v[u | (1 << lb)];
        const uint32_t xr = tfhe_reduce_2q(x, q);
        if (INV) {  // Gentleman-Sande: (x + y, (x - y) s)
          const uint32_t yr = tfhe_reduce_2q(y, q);
          x = xr + yr;
          y = tfhe_mont_lazy(xr - yr + q, s, q, nqinv);
        } else {  // Cooley-Tukey: (x + s y, x - s y)
          const uint32_t sy = tfhe_reduce_2q(tfhe_mont_lazy(y, s, q, nqinv), q);
          x = xr + sy;
          y = xr - sy + q;
        }
      }
    }
#pragma unroll
    for (int u = 0; u < E; ++u) row[tfhe_slot(x0 | (static_cast<uint32_t>(u) << lo))] = v[u];
  }
  t.sync();
}

// The whole transform in rounds of at most 4 stages, as even as possible (N = 2^11: 4, 4, 3),
// or of at most 3 or 2 where a round of 4 would leave part of a large team without an item;
// one barrier per round; outputs in [0, 2q). No post factor: the caller folds N^-1 into the
// values before an INTT.
template <bool INV, class T>
FT_HD void tfhe_team_ntt(const T& t, int32_t* a, int rows, int log_n, const int32_t* tw, const TfheMod& m,
                         int limb = -1) {
  const int64_t coeffs = static_cast<int64_t>(rows) << log_n;
  const int cap = (coeffs >> 4) >= t.size ? 4 : (coeffs >> 3) >= t.size ? 3 : 2;
  const int rounds = (log_n + cap - 1) / cap;
  int done = 0;  // stages done
  for (int i = 0; i < rounds; ++i) {
    const int r = log_n / rounds + (i < log_n % rounds ? 1 : 0);
    const int lo = INV ? done : log_n - done - r;
    switch (r) {
      case 1: tfhe_ntt_round<INV, 1>(t, a, rows, log_n, lo, tw, m, limb); break;
      case 2: tfhe_ntt_round<INV, 2>(t, a, rows, log_n, lo, tw, m, limb); break;
      case 3: tfhe_ntt_round<INV, 3>(t, a, rows, log_n, lo, tw, m, limb); break;
      default: tfhe_ntt_round<INV, 4>(t, a, rows, log_n, lo, tw, m, limb); break;
    }
    done += r;
  }
}

// ---- external product, CMux, blind rotation ------------------------------------------------

// What the polynomial ops share: k1 = k + 1 polynomials of N = 2^log_n per GLWE ciphertext;
// GGSW (k1, level, k1, 2, N): row (p, j) is a GLWE encryption (NTT form over (q0, q1),
// Montgomery) of zero plus mu * G_j on component p, G_j = round(q / B^(j+1)).
struct TfheRing {
  TfheMod m;
  int log_n, k1, base_log, level;
  const int32_t* psi;      // (2, N) forward twiddles
  const int32_t* psi_inv;  // (2, N) inverse twiddles
  const int32_t* post;     // (2,) N^-1 * 2^32 mod q_i
};

constexpr int kTfheMaxK1 = 8;  // k <= 7 (the bindings check it)

// The digit scratch of one ciphertext, int32 words: (k1, level, 2, N) digit polynomials, one per
// (component, level, prime); the product's (k1, 2, N) result reuses its first rows.
FT_HD int64_t tfhe_scratch_words(const TfheRing& r) {
  return static_cast<int64_t>(r.k1) * r.level * 2 << r.log_n;
}

// The balanced base-2^base_log digit of v's lowest digit (in [-B/2, B/2)), v advanced past it
// with the carry: called level times from the least significant digit up, as tfhe_digit.
FT_HD int32_t tfhe_next_digit(uint64_t& v, int base_log) {
  const uint64_t mask = (uint64_t(1) << base_log) - 1, half = uint64_t(1) << (base_log - 1);
  const uint64_t u = v & mask;
  v >>= base_log;
  int32_t d = static_cast<int32_t>(u);
  if (u >= half) {
    d -= static_cast<int32_t>(mask) + 1;
    v += 1;
  }
  return d;
}

// Element e of the k1 N values to decompose (component p = e / N, coefficient c): the level
// balanced digits of v = tfhe_round_pow2(x, q, base_log * level), least significant first as
// the carries run (as tfhe_digit), each as its residue mod q0 and mod q1.
FT_HD void tfhe_store_digits(const TfheRing& r, int32_t* dig, int64_t e, uint64_t v) {
  const uint32_t n = 1u << r.log_n, c = static_cast<uint32_t>(e) & (n - 1u);
  const int64_t p = e >> r.log_n;
  for (int j = r.level - 1; j >= 0; --j) {
    const int32_t d = tfhe_next_digit(v, r.base_log);
    int32_t* row = dig + ((p * r.level + j) * 2 << r.log_n) + tfhe_slot(c);
    row[0] = d < 0 ? d + r.m.q[0] : d;
    row[n] = d < 0 ? d + r.m.q[1] : d;
  }
}

// The GGSW operand of a product, read per NTT column e = l N + c (prime l, coefficient c):
// column(r, e).at(pj, pp) is the Montgomery residue of row pj = (p, j), component pp, there.
struct TfheGgswOperand {  // one stored GGSW (k1, level, k1, 2, N)
  const int32_t* ggsw;
  struct Column {
    const int32_t* ggsw;
    uint32_t e, row_stride, two_n;  // k1 2N <= 2^20
    FT_HD int32_t at(int pj, int pp) const {
      const int32_t* g = ggsw + static_cast<int64_t>(pj) * row_stride + e;
      return tfhe_load(g + static_cast<int64_t>(pp) * two_n);
    }
  };
  FT_HD Column column(const TfheRing& r, uint32_t e) const {
    const uint32_t two_n = 2u << r.log_n;
    return Column{ggsw, e, static_cast<uint32_t>(r.k1) * two_n, two_n};
  }
};

// One team's GGSW rows already gathered (the CUDA cluster path's rows prefetched into shared
// memory): row pj = (p, j) of the team's component and prime at rows + pj * row_stride. Plain
// loads: the rows may be in shared memory.
struct TfheRowsOperand {
  const int32_t* rows;
  int64_t row_stride;
  struct Column {
    const int32_t* p;
    int64_t stride;
    FT_HD int32_t at(int pj, int) const { return p[pj * stride]; }
  };
  FT_HD Column column(const TfheRing& r, uint32_t e) const {
    return Column{rows + (e & ((1u << r.log_n) - 1u)), row_stride};
  }
};

// acc (k1, N) += GGSW x (the GLWE whose digits dig holds, tfhe_store_digits): forward NTT of
// the 2 k1 level digit rows, multiply-accumulate with the GGSW rows per (prime, coefficient)
// into the first 2 k1 rows of dig (each column is read whole before it is overwritten, by the
// same thread), times N^-1, inverse NTT of those rows, CRT, add. All in place in dig. `key`: a
// stored GGSW (TfheGgswOperand) or a multi-bit key bundle (TfheKeyBundleOperand).
// rows: the digit rows (p, j) taken, from the first (-1: all k1 level; the GLWE key switch takes the
// mask's level rows only); at least k1 rows of dig are written whatever it is.
template <class T, class Key>
FT_HD void tfhe_team_ggsw_product(const T& t, const TfheRing& r, const Key key, int32_t* dig, int64_t* acc,
                                  int rows = -1) {
  const uint32_t n = 1u << r.log_n, two_n = 2u * n;
  const int pj_count = rows >= 0 ? rows : r.k1 * r.level;
  tfhe_team_ntt<false>(t, dig, 2 * pj_count, r.log_n, r.psi, r.m);
  for (uint32_t e = static_cast<uint32_t>(t.rank); e < two_n; e += static_cast<uint32_t>(t.size)) {
    const int l = static_cast<int>(e >> r.log_n);
    const uint32_t c = e & (n - 1u), slot = tfhe_slot(c) + static_cast<uint32_t>(l) * n;
    const int32_t q = r.m.q[l], qinv = r.m.qinv[l];
    const typename Key::Column col = key.column(r, e);
    int32_t s[kTfheMaxK1];
#pragma unroll
    for (int pp = 0; pp < kTfheMaxK1; ++pp) s[pp] = 0;
    for (int pj = 0; pj < pj_count; ++pj) {
      const uint32_t lazy = static_cast<uint32_t>(dig[static_cast<int64_t>(pj) * two_n + slot]);
      const int32_t d = static_cast<int32_t>(tfhe_reduce_2q(lazy, static_cast<uint32_t>(q)));
#pragma unroll
      for (int pp = 0; pp < kTfheMaxK1; ++pp)
        if (pp < r.k1) s[pp] = tfhe_add_q(s[pp], tfhe_mul_q(d, col.at(pj, pp), q, qinv), q);
    }
    const int32_t post = tfhe_load(r.post + l);
#pragma unroll
    for (int pp = 0; pp < kTfheMaxK1; ++pp)
      if (pp < r.k1) dig[static_cast<int64_t>(pp) * two_n + slot] = tfhe_mul_q(s[pp], post, q, qinv);
  }
  t.sync();
  tfhe_team_ntt<true>(t, dig, 2 * r.k1, r.log_n, r.psi_inv, r.m);
  const uint32_t k1n = static_cast<uint32_t>(r.k1) * n;
  for (uint32_t e = static_cast<uint32_t>(t.rank); e < k1n; e += static_cast<uint32_t>(t.size)) {
    const uint32_t p = e >> r.log_n;
    const uint32_t* mp = reinterpret_cast<const uint32_t*>(dig) + static_cast<int64_t>(p) * two_n +
                         tfhe_slot(e & (n - 1u));
    const int32_t r0 = static_cast<int32_t>(tfhe_reduce_2q(mp[0], static_cast<uint32_t>(r.m.q[0])));
    const int32_t r1 = static_cast<int32_t>(tfhe_reduce_2q(mp[n], static_cast<uint32_t>(r.m.q[1])));
    acc[e] = tfhe_add(acc[e], tfhe_compose(r0, r1, r.m), r.m.q_full);
  }
  t.sync();
}

// out (k1, N) = GGSW x glwe (k1, N): the external_product op, one ciphertext; dig: its scratch.
template <class T>
FT_HD void tfhe_team_external_product_op(const T& t, const TfheRing& r, const int64_t* glwe, const int32_t* ggsw,
                                         int32_t* dig, int64_t* out) {
  const uint32_t k1n = static_cast<uint32_t>(r.k1) << r.log_n;
  const int bits = r.base_log * r.level;
  for (uint32_t e = static_cast<uint32_t>(t.rank); e < k1n; e += static_cast<uint32_t>(t.size)) {
    tfhe_store_digits(r, dig, e, tfhe_round_pow2(glwe[e], r.m.q_full, bits));
    out[e] = 0;
  }
  t.sync();
  tfhe_team_ggsw_product(t, r, TfheGgswOperand{ggsw}, dig, out);
}

// ---- GLWE key switching (k = 1): the ring-side key switches of scheme switching ---------------
//
// The digit scratch of one key switch: the mask's (level, 2, N) digit rows, and at least the
// (2, 2, N) rows the product leaves its result in.
FT_HD int64_t tfhe_glwe_keyswitch_words(const TfheRing& r) {
  return static_cast<int64_t>(r.level > 2 ? r.level : 2) * 2 << r.log_n;
}

// The input of a GLWE key switch and what its output is added to: the key switch of tau_g(x -
// X^shift y) (y null: of tau_g(x)), plus x + X^shift y where `add` (the LWE packing's step; y null:
// plus x). ginv = g^-1 mod 2N (1: no automorphism). x, y: (2, N) in [0, q).
// lwe: x and y are LWE ciphertexts (N + 1,) under the GLWE key's coefficients instead, taken as the
// GLWE whose constant coefficient has their phase (lwe_to_glwe) times `scale` mod q (scale_mont[l]:
// scale 2^32 mod q_l), the packing's leaves.
struct TfheGlweInput {
  const int64_t* x;
  const int64_t* y;
  uint32_t ginv, shift;
  bool add, lwe;
  int32_t scale_mont[2];
};

// Coefficient p of component c of a GLWE input: stored, or made from an LWE (a, b): mask a_0, -a_(N-p);
// body b at p = 0, else 0; times the scale.
FT_HD int64_t tfhe_input_coeff(const TfheGlweInput& in, const TfheMod& m, const int64_t* x, int c, uint32_t p,
                               int log_n) {
  if (!in.lwe) return x[(static_cast<int64_t>(c) << log_n) + p];
  const uint32_t n = 1u << log_n;
  int64_t v;
  if (c == 0) {
    v = x[p == 0 ? 0 : n - p];
    if (p != 0 && v != 0) v = m.q_full - v;
  } else {
    v = p == 0 ? x[n] : 0;
  }
  const int32_t r0 = tfhe_mul_q(tfhe_residue(v, m.q[0]), in.scale_mont[0], m.q[0], m.qinv[0]);
  const int32_t r1 = tfhe_mul_q(tfhe_residue(v, m.q[1]), in.scale_mont[1], m.q[1], m.qinv[1]);
  return tfhe_compose(r0, r1, m);
}

// Coefficient i (< 2N, negated from N on: X^N = -1) of a polynomial x (N,) in [0, q).
FT_HD int64_t tfhe_signed_at(const int64_t* x, uint32_t i, int log_n, int64_t q) {
  const uint32_t n = 1u << log_n;
  const int64_t v = x[i & (n - 1u)];
  return (i & n) && v != 0 ? q - v : v;
}

// Coefficient p of component c of x - X^shift y (sign -1) or x + X^shift y (sign +1); x alone
// without y. (X^s y)[p] is y's coefficient p - s mod 2N, signed.
FT_HD int64_t tfhe_pair_at(const TfheGlweInput& in, const TfheMod& m, int c, uint32_t p, bool plus, int log_n) {
  const int64_t q = m.q_full;
  const int64_t x = tfhe_input_coeff(in, m, in.x, c, p, log_n);
  if (in.y == nullptr) return x;
  const uint32_t n = 1u << log_n, i = (p - in.shift) & (2u * n - 1u);
  int64_t y = tfhe_input_coeff(in, m, in.y, c, i & (n - 1u), log_n);
  if ((i & n) && y != 0) y = q - y;
  return plus ? tfhe_add(x, y, q) : tfhe_sub(x, y, q);
}

// Coefficient p of component c of the key switch's input tau_g(x - X^shift y): the difference's
// coefficient i = p ginv mod 2N, negated where i >= N (2N divides 2^32: the 32-bit product's
// wrap-around keeps p ginv mod 2N).
FT_HD int64_t tfhe_key_switch_input_at(const TfheGlweInput& in, const TfheMod& m, int c, uint32_t p, int log_n) {
  const uint32_t n = 1u << log_n, i = (p * in.ginv) & (2u * n - 1u);
  const int64_t v = tfhe_pair_at(in, m, c, i & (n - 1u), false, log_n);
  return (i & n) && v != 0 ? m.q_full - v : v;
}

// out (2, N) = KS(w) (+ x + X^shift y where in.add), w = tau_g(x - X^shift y) = (A, B), x and y as
// tfhe_input_coeff reads them: with d_j the digit polynomials of A, KS(w) = (-sum_j d_j A_j, B -
// sum_j d_j B_j), key (level, 2, 2, N) the rows (A_j, B_j) in NTT form (Montgomery), encryptions of
// G_j S_in under S_out: so KS(w) decrypts under S_out to w's phase under S_in, plus noise. r.k1 = 2.
// dig: tfhe_glwe_keyswitch_words of scratch. The product is the external product's on the mask's
// digit rows only.
template <class T>
FT_HD void tfhe_team_glwe_keyswitch_op(const T& t, const TfheRing& r, const TfheGlweInput& in, const int32_t* key,
                                       int32_t* dig, int64_t* out) {
  const uint32_t n = 1u << r.log_n;
  const int64_t q = r.m.q_full;
  const int bits = r.base_log * r.level;
  for (uint32_t e = static_cast<uint32_t>(t.rank); e < n; e += static_cast<uint32_t>(t.size)) {
    tfhe_store_digits(r, dig, e, tfhe_round_pow2(tfhe_key_switch_input_at(in, r.m, 0, e, r.log_n), q, bits));
    out[e] = 0;
    out[n + e] = 0;
  }
  t.sync();
  tfhe_team_ggsw_product(t, r, TfheGgswOperand{key}, dig, out, r.level);
  for (uint32_t e = static_cast<uint32_t>(t.rank); e < n; e += static_cast<uint32_t>(t.size)) {
    int64_t a = out[e] != 0 ? q - out[e] : 0;
    int64_t b = tfhe_sub(tfhe_key_switch_input_at(in, r.m, 1, e, r.log_n), out[n + e], q);
    if (in.add) {
      a = tfhe_add(a, tfhe_pair_at(in, r.m, 0, e, true, r.log_n), q);
      b = tfhe_add(b, tfhe_pair_at(in, r.m, 1, e, true, r.log_n), q);
    }
    out[e] = a;
    out[n + e] = b;
  }
  t.sync();
}

// A batch of GLWE key switches (the tfhe_glwe_keyswitch and tfhe_glwe_pack_step ops): ciphertext b's
// input is `in` with x and y advanced by b inputs (2N values, or N + 1 for LWE inputs; y may be null),
// its output out + 2N b.
struct GlweKeyswitchArgs {
  TfheRing r;
  TfheGlweInput in;
  const int32_t* key;  // (level, 2, 2, N)
  int64_t* out;
  int64_t B;
  FT_HD TfheGlweInput input(int64_t b) const {
    const int64_t off = b * (in.lwe ? (int64_t(1) << r.log_n) + 1 : int64_t(2) << r.log_n);
    TfheGlweInput i = in;
    i.x += off;
    if (i.y != nullptr) i.y += off;
    return i;
  }
};

struct BlindRotateArgs {
  TfheRing r;
  const int64_t* ct;         // (B, n + 1) LWE ciphertexts under the bootstrapping key's LWE secret
  const int64_t* luts;       // (T, N) test polynomials (the body of a trivial GLWE)
  const int64_t* lut_index;  // (B,) in [0, T) (clamped into it: never a read outside luts), or null: LUT 0
  const int32_t* bsk;        // (n, k1, level, k1, 2, N): GGSW of each LWE secret bit; multi-bit:
                             // (n / grouping, 2^grouping, k1, level, k1, 2, N), the GGSWs of f_S
  int64_t* acc;              // (B, k1, N) the accumulators (the output)
  int32_t* scratch;          // B * tfhe_scratch_words(r), where the team's scratch is not its own
  int64_t B, T;
  int n;
  int grouping;              // <= 1: classical (one CMux per key bit); 2..kTfheMaxGrouping: multi-bit
  const int32_t* mono_exp;   // multi-bit: (2, N) e_lc: the NTT of X^a on prime l, slot c, is w_l^(e_lc a)
  const int32_t* mono_pow;   // multi-bit: (2, 2N) w_l^j * 2^32 mod q_l, w_l a primitive 2N-th root
};

constexpr int kTfheMaxGrouping = 4;
constexpr int kTfheRotBytes = 4 << kTfheMaxGrouping;  // a team's subset rotations (multi-bit)

// Steps of a blind rotation: one per key bit, or one per group of `grouping` key bits.
FT_HD int tfhe_rotate_steps(const BlindRotateArgs& g) { return g.grouping > 1 ? g.n / g.grouping : g.n; }

// One ciphertext's whole blind rotation fits a team's own fast memory (a thread block's shared
// memory: the accumulator and the digit scratch) when this many bytes are at most
// kTfheFusedBytesMax, sm_90's opt-in maximum of shared memory per block (227 KiB). Then one
// launch runs every key bit (tfhe_team_blind_rotate); otherwise one launch per key bit
// (tfhe_team_cmux_step) keeps them in global memory. Both devices choose by this rule.
constexpr int64_t kTfheFusedBytesMax = 227 * 1024;
FT_HD int64_t tfhe_fused_bytes(const TfheRing& r) {
  return (static_cast<int64_t>(r.k1) * 8 << r.log_n) + 4 * tfhe_scratch_words(r);
}
FT_HD bool tfhe_fused_fits(const TfheRing& r) { return tfhe_fused_bytes(r) <= kTfheFusedBytesMax; }

// acc (k1, N) := X^(-round(body * 2N / q)) * LUT of ciphertext b (a trivial GLWE: masks zero).
template <class T>
FT_HD void tfhe_team_blind_rotate_init(const T& t, const BlindRotateArgs& g, int64_t b, int64_t* acc) {
  const TfheRing& r = g.r;
  const int64_t n = int64_t(1) << r.log_n;
  const int64_t* ct = g.ct + b * (g.n + 1);
  const int64_t body = static_cast<int64_t>(tfhe_round_pow2(ct[g.n], r.m.q_full, r.log_n + 1));
  const int64_t shift = (2 * n - body) & (2 * n - 1);
  int64_t li = g.lut_index ? g.lut_index[b] : 0;
  li = li < 0 ? 0 : (li >= g.T ? g.T - 1 : li);
  const int64_t* lut = g.luts + li * n;
  const int64_t k1n = r.k1 * n, body_start = (r.k1 - 1) * n;
  for (int64_t e = t.rank; e < k1n; e += t.size)
    acc[e] = e < body_start ? 0 : tfhe_rotated(lut, e - body_start, shift, r.log_n, r.m.q_full);
  t.sync();
}

// Key bit i of ciphertext b: acc := CMux(bsk_i, acc, X^a_i * acc) = acc + bsk_i x ((X^a_i - 1) acc),
// a_i = round(mask_i * 2N / q); dig: the team's digit scratch (tfhe_scratch_words). a_i = 0
// leaves acc unchanged (decomposing zero gives zero).
template <class T>
FT_HD void tfhe_team_cmux_step(const T& t, const BlindRotateArgs& g, int64_t b, int i, int64_t* acc, int32_t* dig) {
  const TfheRing& r = g.r;
  const int64_t n = int64_t(1) << r.log_n;
  const int64_t a = static_cast<int64_t>(tfhe_round_pow2(g.ct[b * (g.n + 1) + i], r.m.q_full, r.log_n + 1));
  if (a == 0) return;  // the whole team sees the same a
  const int bits = r.base_log * r.level;
  const int64_t k1n = r.k1 * n;
  for (int64_t e = t.rank; e < k1n; e += t.size) {
    const int64_t p = e >> r.log_n, c = e & (n - 1);
    const int64_t diff = tfhe_sub(tfhe_rotated(acc + p * n, c, a, r.log_n, r.m.q_full), acc[e], r.m.q_full);
    tfhe_store_digits(r, dig, e, tfhe_round_pow2(diff, r.m.q_full, bits));
  }
  t.sync();  // every read of acc is done before the product adds to it
  const int32_t* ggsw = g.bsk + static_cast<int64_t>(i) * r.k1 * r.level * r.k1 * 2 * n;
  tfhe_team_ggsw_product(t, r, TfheGgswOperand{ggsw}, dig, acc);
}

// ---- multi-bit blind rotation (grouping factor G, TFHE-rs's multi-bit PBS) ------------------
//
// Group j holds key bits s_i, i = G j .. G j + G - 1, and the bootstrapping key the GGSWs of
// f_S = prod_(i in S) s_i prod_(i not in S) (1 - s_i) for the 2^G subsets S (bit u of S: key bit
// G j + u); exactly one f_S is 1. With a_S = round(2N (sum_(i in S) mask_i mod q) / q) (one
// rounding per subset sum, a_0 = 0), the step is acc := K x acc with the key bundle
// K = sum_S X^(a_S) GGSW(f_S), a GGSW of X^(a_S*) for the selected S*: one external product
// per group. K is never stored: the product reads it per NTT column, where X^a is the scalar
// w_l^(e_lc a) (mono_exp, mono_pow), so each of K's entries is 2^G - 1 products and sums of the
// group's GGSW entries. No rotation of acc, and its digits are those of acc itself.
struct TfheKeyBundleOperand {
  const int32_t* ggsw;      // the group's (2^G, k1, level, k1, 2, N)
  const int32_t* mono_exp;  // (2, N)
  const int32_t* mono_pow;  // (2, 2N)
  const int32_t* rot;       // (2^G,) a_S, in the team's memory (tfhe_team_subset_rotations)
  int subsets;              // 2^G
  struct Column {
    const int32_t* g;  // ggsw + e
    int64_t row_stride, two_n, ggsw_words;
    int32_t q, qinv;
    int subsets;
    int32_t mono[1 << kTfheMaxGrouping];  // X^(a_S) at this column, Montgomery (S = 0: unused, 1)
    FT_HD int32_t at(int pj, int pp) const {
      const int32_t* p = g + pj * row_stride + pp * two_n;
      int32_t s = tfhe_load(p);  // S = {}: X^0 = 1
#pragma unroll
      for (int u = 1; u < (1 << kTfheMaxGrouping); ++u)
        if (u < subsets) s = tfhe_add_q(s, tfhe_mul_q(mono[u], tfhe_load(p + u * ggsw_words), q, qinv), q);
      return s;
    }
  };
  FT_HD Column column(const TfheRing& r, uint32_t e) const {
    const int64_t two_n = int64_t(2) << r.log_n;
    const int l = static_cast<int>(e >> r.log_n);
    Column c{};
    c.g = ggsw + e;
    c.row_stride = static_cast<int64_t>(r.k1) * two_n;
    c.two_n = two_n;
    c.ggsw_words = static_cast<int64_t>(r.k1) * r.level * c.row_stride;
    c.q = r.m.q[l];
    c.qinv = r.m.qinv[l];
    c.subsets = subsets;
    const int64_t ex = tfhe_load(mono_exp + e);  // any value: the index below is masked into the table
    const int32_t* pw = mono_pow + l * two_n;
#pragma unroll
    for (int u = 1; u < (1 << kTfheMaxGrouping); ++u)
      c.mono[u] = u < subsets ? tfhe_load(pw + ((ex * rot[u]) & (two_n - 1))) : 0;
    return c;
  }
};

// rot[S] = a_S of group j of ciphertext b, S < 2^G: the subset sum of the group's masks mod q,
// switched to 2N (one rounding per subset; a_0 = 0). One member per subset; the caller syncs.
// The same from a group's G masks (mod q) and log2 N; shared with the torus rotation (tfhe_fft.h).
template <class T>
FT_HD void tfhe_team_switched_subset_sums(const T& t, const int64_t* mask, int grouping, int64_t q, int log_n,
                                          int32_t* rot) {
  for (int u = t.rank; u < (1 << grouping); u += t.size) {
    int64_t sum = 0;
    for (int i = 0; i < grouping; ++i)
      if ((u >> i) & 1) sum = tfhe_add(sum, mask[i], q);
    rot[u] = static_cast<int32_t>(tfhe_round_pow2(sum, q, log_n + 1));
  }
}

template <class T>
FT_HD void tfhe_team_subset_rotations(const T& t, const BlindRotateArgs& g, int64_t b, int j, int32_t* rot) {
  const int64_t* mask = g.ct + b * (g.n + 1) + static_cast<int64_t>(j) * g.grouping;
  tfhe_team_switched_subset_sums(t, mask, g.grouping, g.r.m.q_full, g.r.log_n, rot);
}

// The key bundle of group j, its subset rotations in rot.
FT_HD TfheKeyBundleOperand tfhe_key_bundle(const BlindRotateArgs& g, int j, const int32_t* rot) {
  const TfheRing& r = g.r;
  TfheKeyBundleOperand k{};
  k.subsets = 1 << g.grouping;
  k.ggsw = g.bsk + static_cast<int64_t>(j) * k.subsets * (static_cast<int64_t>(r.k1) * r.level * r.k1 * 2 << r.log_n);
  k.mono_exp = g.mono_exp;
  k.mono_pow = g.mono_pow;
  k.rot = rot;
  return k;
}

// Group j of ciphertext b: acc := K x acc (TfheKeyBundleOperand); dig: the team's digit scratch,
// rot: 2^G words of the team's memory.
template <class T>
FT_HD void tfhe_team_multi_bit_step(const T& t, const BlindRotateArgs& g, int64_t b, int j, int64_t* acc,
                                    int32_t* dig, int32_t* rot) {
  const TfheRing& r = g.r;
  const int bits = r.base_log * r.level;
  const int64_t k1n = static_cast<int64_t>(r.k1) << r.log_n;
  tfhe_team_subset_rotations(t, g, b, j, rot);  // the previous group's product is done: it ends with a sync
  for (int64_t e = t.rank; e < k1n; e += t.size) {  // each member reads and clears only its own acc[e]
    tfhe_store_digits(r, dig, e, tfhe_round_pow2(acc[e], r.m.q_full, bits));
    acc[e] = 0;
  }
  t.sync();
  tfhe_team_ggsw_product(t, r, tfhe_key_bundle(g, j, rot), dig, acc);
}

// Step i of ciphertext b's blind rotation (tfhe_rotate_steps): a CMux, or a multi-bit group.
// MULTI_BIT is a template parameter so that the classical kernels do not carry the key
// bundle's registers.
template <bool MULTI_BIT, class T>
FT_HD void tfhe_team_rotate_step(const T& t, const BlindRotateArgs& g, int64_t b, int i, int64_t* acc, int32_t* dig,
                                 int32_t* rot) {
  if (MULTI_BIT)
    tfhe_team_multi_bit_step(t, g, b, i, acc, dig, rot);
  else
    tfhe_team_cmux_step(t, g, b, i, acc, dig);
}

// The whole blind rotation of ciphertext b by one team: init, then every step (key bit, or
// group where MULTI_BIT), in the team's acc (k1 N int64) and dig (tfhe_scratch_words) scratch,
// then acc copied to the output (unless acc is the output already); rot: 2^G words (multi-bit).
template <bool MULTI_BIT, class T>
FT_HD void tfhe_team_blind_rotate(const T& t, const BlindRotateArgs& g, int64_t b, int64_t* acc, int32_t* dig,
                                  int32_t* rot) {
  tfhe_team_blind_rotate_init(t, g, b, acc);
  const int steps = MULTI_BIT ? g.n / g.grouping : g.n;
  for (int i = 0; i < steps; ++i) tfhe_team_rotate_step<MULTI_BIT>(t, g, b, i, acc, dig, rot);
  const int64_t k1n = static_cast<int64_t>(g.r.k1) << g.r.log_n;
  int64_t* out = g.acc + b * k1n;
  if (acc != out)
    for (int64_t e = t.rank; e < k1n; e += t.size) out[e] = acc[e];
}

// ---- low latency: one ciphertext over a cluster of 2 k1 teams -----------------------------
//
// For small batches (tfhe_cluster_fits), team c of a cluster owns component p = c >> 1 on prime
// l = c & 1: its level digit rows and one output row of the GGSW product, so the (k1, 2) NTTs of
// a CMux run on 2 k1 SMs at once. Every team keeps a replica of the accumulator and updates it
// from all teams' output rows, so each step is three phases with a cluster barrier after each;
// a team reads the other teams' rows through `peer_dig` / `peer_out` (CUDA: distributed shared
// memory; CPU: the teams' heap scratch, the teams run one after another within each phase).
// Per team: acc (k1 N int64), dig (level N int32), out (N int32); multi-bit: rot (kTfheRotBytes).
// Multi-bit (MULTI_BIT): the same phases per group, on acc's own digits, with the key bundle as the
// product's operand, and acc replaced by the product (tfhe_team_multi_bit_step).
constexpr int kTfheClusterMax = 8;    // 2 k1 teams: k <= 3 (a portable cluster size)
constexpr int kTfheClusterCtas = 128; // batches with B * 2 k1 <= 128 teams take this path
FT_HD int64_t tfhe_cluster_bytes(const TfheRing& r) {
  return (static_cast<int64_t>(r.k1) * 8 << r.log_n) + (static_cast<int64_t>(r.level) * 4 << r.log_n) + (4 << r.log_n);
}
FT_HD bool tfhe_cluster_fits(const BlindRotateArgs& g) {
  const TfheRing& r = g.r;
  const int64_t B = g.B;
  return 2 * r.k1 <= kTfheClusterMax && B * 2 * r.k1 <= kTfheClusterCtas && tfhe_cluster_bytes(r) <= kTfheFusedBytesMax;
}

// a_i of ciphertext b: round(mask_i * 2N / q) (0: the step is skipped).
FT_HD int64_t tfhe_mask_rotation(const BlindRotateArgs& g, int64_t b, int i) {
  return static_cast<int64_t>(tfhe_round_pow2(g.ct[b * (g.n + 1) + i], g.r.m.q_full, g.r.log_n + 1));
}

// Phase 1 of team c: the level digit rows of component p of (X^a - 1) acc (multi-bit: of acc) on
// prime l, forward NTT.
template <bool MULTI_BIT, class T>
FT_HD void tfhe_cluster_digits(const T& t, const TfheRing& r, int c, int64_t a, const int64_t* acc, int32_t* dig) {
  const int p = c >> 1, l = c & 1;
  const uint32_t n = 1u << r.log_n;
  const int bits = r.base_log * r.level;
  const int64_t* ap = acc + (static_cast<int64_t>(p) << r.log_n);
  for (uint32_t x = static_cast<uint32_t>(t.rank); x < n; x += static_cast<uint32_t>(t.size)) {
    const int64_t diff = MULTI_BIT ? ap[x] : tfhe_sub(tfhe_rotated(ap, x, a, r.log_n, r.m.q_full), ap[x], r.m.q_full);
    uint64_t v = tfhe_round_pow2(diff, r.m.q_full, bits);
    for (int j = r.level - 1; j >= 0; --j) {  // as tfhe_store_digits, one prime
      const int32_t d = tfhe_next_digit(v, r.base_log);
      dig[(static_cast<int64_t>(j) << r.log_n) + tfhe_slot(x)] = d < 0 ? d + r.m.q[l] : d;
    }
  }
  t.sync();
  tfhe_team_ntt<false>(t, dig, r.level, r.log_n, r.psi, r.m, l);
}

// Phase 2 of team c: output row (p' = c >> 1, prime l) = sum over (p, j) of the digit rows of the
// teams on prime l times the GGSW rows (key: TfheGgswOperand or TfheKeyBundleOperand), times N^-1,
// inverse NTT.
template <class T, class Key>
FT_HD void tfhe_cluster_product(const T& t, const TfheRing& r, int c, const Key key, const int32_t* const* peer_dig,
                                int32_t* out) {
  const int pp = c >> 1, l = c & 1;
  const uint32_t n = 1u << r.log_n;
  const int32_t q = r.m.q[l], qinv = r.m.qinv[l];
  for (uint32_t x = static_cast<uint32_t>(t.rank); x < n; x += static_cast<uint32_t>(t.size)) {
    const uint32_t slot = tfhe_slot(x);
    const typename Key::Column col = key.column(r, (static_cast<uint32_t>(l) << r.log_n) + x);
    int32_t s = 0;
    for (int p = 0; p < r.k1; ++p) {
      const int32_t* pd = peer_dig[2 * p + l];
      for (int j = 0; j < r.level; ++j) {
        const uint32_t lazy = static_cast<uint32_t>(pd[(static_cast<int64_t>(j) << r.log_n) + slot]);
        const int32_t d = static_cast<int32_t>(tfhe_reduce_2q(lazy, static_cast<uint32_t>(q)));
        s = tfhe_add_q(s, tfhe_mul_q(d, col.at(p * r.level + j, pp), q, qinv), q);
      }
    }
    out[slot] = tfhe_mul_q(s, tfhe_load(r.post + l), q, qinv);
  }
  t.sync();
  tfhe_team_ntt<true>(t, out, 1, r.log_n, r.psi_inv, r.m, l);
}

// Phase 3 of every team: its replica acc += CRT of the output rows (component p: teams 2p, 2p+1);
// multi-bit: acc = that CRT.
template <bool MULTI_BIT, class T>
FT_HD void tfhe_cluster_accumulate(const T& t, const TfheRing& r, const int32_t* const* peer_out, int64_t* acc) {
  const uint32_t n = 1u << r.log_n, k1n = static_cast<uint32_t>(r.k1) * n;
  for (uint32_t e = static_cast<uint32_t>(t.rank); e < k1n; e += static_cast<uint32_t>(t.size)) {
    const uint32_t p = e >> r.log_n, slot = tfhe_slot(e & (n - 1u));
    const uint32_t* o0 = reinterpret_cast<const uint32_t*>(peer_out[2 * p]);
    const uint32_t* o1 = reinterpret_cast<const uint32_t*>(peer_out[2 * p + 1]);
    const int32_t r0 = static_cast<int32_t>(tfhe_reduce_2q(o0[slot], static_cast<uint32_t>(r.m.q[0])));
    const int32_t r1 = static_cast<int32_t>(tfhe_reduce_2q(o1[slot], static_cast<uint32_t>(r.m.q[1])));
    const int64_t v = tfhe_compose(r0, r1, r.m);
    acc[e] = MULTI_BIT ? v : tfhe_add(acc[e], v, r.m.q_full);
  }
  t.sync();
}

// ---- LWE key switching: a tiled integer GEMM -----------------------------------------------
//
// out[b] = (0, ..., 0, body_b) - sum_t d[b, t] * KSK[t], t = i * level + j running over the n_in
// masks and their level digits: per prime a GEMM digits (B, n_in level) x KSK_l (n_in level,
// n_out + 1). A tile is 16 mb ciphertexts x kKsCols output coefficients, both primes at once (the
// digits do not depend on the prime). Its K loop advances by tfhe_ks_masks_per_step masks: a
// step loads their digits (computed from the masks as they are loaded: no digit pass) and the
// matching key rows into the team's shared buffer, then every micro-tile multiply-accumulates.
// 256 micro-tiles (y, x) in 16 x 16: micro-tile (y, x) owns ciphertexts y + 16 m (m < mb) and
// coefficients x + 16 c (c < 4), so consecutive threads read consecutive shared words and write
// consecutive outputs. CUDA: a block of 256 threads, one micro-tile each; the CPU: a team of one
// running all 256. Small batches cut the K loop into `splits` parts (grid z) whose sums land in
// `partial` and are joined by tfhe_keyswitch_finish_one.
//
// Lazy int64 accumulation: |d| <= B/2 = 2^(base_log-1) and residues < 2^31, so a product is below
// 2^(base_log+30) in magnitude; after a reduction |acc| < q_l < 2^31, and R = 2^(32-base_log)
// products add less than 2^62: |acc| < 2^62 + 2^31 < 2^63. The sum is reduced every
// floor(R / terms) steps (never at base_log <= 8 and K <= 2^24), and once at the end, so the
// result is the exact canonical residue whatever the tiling: CPU and CUDA agree bit for bit.

constexpr int kKsTeam = 256;         // micro-tiles per tile (threads of a CUDA block)
constexpr int kKsCols = 64;          // output coefficients per tile: 4 per micro-tile
constexpr int kKsTermsPerStep = 32;  // digits per K step (at least one mask's level digits)

struct KeyswitchArgs {
  TfheMod m;
  const int64_t* ct;             // (B, n_in + 1)
  const int32_t* keyswitch_key;  // (n_in, level, 2, n_out + 1): LWE encryptions under s_out of s_in[i] * G_j, residues
  int64_t* out;                  // (B, n_out + 1)
  int32_t* partial;              // splits > 1: (splits, B, n_out + 1, 2) canonical residues of each part's sum
  int64_t B;
  int n_in, n_out, base_log, level;
  int splits;  // parts of the K loop (1: the tile writes out itself)
};

FT_HD int tfhe_ks_masks_per_step(int level) { return level >= kKsTermsPerStep ? 1 : kKsTermsPerStep / level; }
FT_HD int tfhe_ks_steps(const KeyswitchArgs& g) {
  const int per = tfhe_ks_masks_per_step(g.level);
  return (g.n_in + per - 1) / per;
}
FT_HD int64_t tfhe_ks_col_tiles(const KeyswitchArgs& g) { return (g.n_out + kKsCols) / kKsCols; }
FT_HD int64_t tfhe_ks_row_tiles(const KeyswitchArgs& g, int mb) { return (g.B + 16 * mb - 1) / (16 * mb); }
// int32 words of one tile's shared buffer: digits (terms, 16 mb) and key rows (2, terms, kKsCols).
FT_HD int64_t tfhe_ks_tile_words(int level, int mb) {
  const int64_t terms = static_cast<int64_t>(tfhe_ks_masks_per_step(level)) * level;
  return terms * 16 * mb + 2 * terms * kKsCols;
}

// The tiling of a batch: mb (1 or 4 ciphertexts per micro-tile: 4 once the batch fills 64-row
// tiles and there are `target` of them) and the K splits, so that about `target` tiles run at
// once (CUDA: two blocks per SM). Sets g.splits; returns mb.
FT_HD int tfhe_ks_plan(KeyswitchArgs& g, int64_t target) {
  const int mb = g.B >= 64 && tfhe_ks_row_tiles(g, 4) * tfhe_ks_col_tiles(g) >= target ? 4 : 1;
  const int64_t tiles = tfhe_ks_row_tiles(g, mb) * tfhe_ks_col_tiles(g);
  int64_t splits = tiles >= target ? 1 : (target + tiles - 1) / tiles;
  const int64_t steps = tfhe_ks_steps(g);
  splits = splits > 64 ? 64 : splits;
  g.splits = static_cast<int>(splits > steps ? steps : splits);
  return mb;
}

// The level balanced digits of v (as tfhe_digit gives them, j = 0 the most significant) at d[j * stride]
// (int32 for the GEMM tiles, int8 for the tensor-core key switch: base_log <= 8).
template <class D>
FT_HD void tfhe_digits(uint64_t v, int base_log, int level, D* d, int stride) {
  const uint64_t mask = (uint64_t(1) << base_log) - 1, half = uint64_t(1) << (base_log - 1);
  for (int j = level - 1; j >= 0; --j) {
    const uint64_t u = v & mask;
    v >>= base_log;
    int64_t x = static_cast<int64_t>(u);
    if (u >= half) {
      x -= static_cast<int64_t>(mask) + 1;
      v += 1;
    }
    d[j * stride] = static_cast<D>(x);
  }
}

// Output coefficient c of ciphertext b from the two residues of its sum: (body - sum) mod q.
FT_HD void tfhe_ks_write(const KeyswitchArgs& g, int64_t b, int64_t c, const int32_t r[2]) {
  int32_t v[2];
  for (int l = 0; l < 2; ++l) {
    const int32_t body = c == g.n_out ? tfhe_residue(g.ct[b * (g.n_in + 1) + g.n_in], g.m.q[l]) : 0;
    v[l] = tfhe_residue(static_cast<int64_t>(body) - r[l], g.m.q[l]);
  }
  g.out[b * (g.n_out + 1) + c] = tfhe_compose(v[0], v[1], g.m);
}

// The tile (row_tile, col_tile) of K part `split`; MB ciphertexts per micro-tile, OWN = 256 / team
// size micro-tiles per member; buf: tfhe_ks_tile_words(level, MB) words.
template <int MB, int OWN, class T>
FT_HD void tfhe_team_keyswitch_tile(const T& t, const KeyswitchArgs& g, int64_t row_tile, int64_t col_tile, int split,
                                    int32_t* buf) {
  constexpr int rows = 16 * MB;
  const int per = tfhe_ks_masks_per_step(g.level), terms = per * g.level;
  const int64_t w = g.n_out + 1, b0 = row_tile * rows, c0 = col_tile * kKsCols;
  const int64_t t_end = static_cast<int64_t>(g.n_in) * g.level;
  int32_t* sd = buf;                 // (terms, rows)
  int32_t* sk = buf + terms * rows;  // (2, terms, kKsCols)
  const int steps = tfhe_ks_steps(g), span = (steps + g.splits - 1) / g.splits;
  const int s0 = split * span, s1 = s0 + span < steps ? s0 + span : steps;
  const int64_t reduce = (int64_t(1) << (32 - g.base_log)) / terms;  // >= 8: base_log <= 23, terms <= 60
  int64_t acc[OWN][2][MB][4] = {};
  for (int s = s0; s < s1; ++s) {
    const int i0 = s * per;
    for (int e = t.rank; e < rows * per; e += t.size) {  // the digits of masks i0 .. i0 + per
      const int r = e / per, ii = e - r * per;
      const int64_t b = b0 + r, i = i0 + ii;
      int32_t* d = sd + ii * g.level * rows + r;
      if (b < g.B && i < g.n_in)
        tfhe_digits(tfhe_round_pow2(g.ct[b * (g.n_in + 1) + i], g.m.q_full, g.base_log * g.level), g.base_log,
                    g.level, d, rows);
      else
        for (int j = 0; j < g.level; ++j) d[j * rows] = 0;
    }
    const int64_t t0 = static_cast<int64_t>(i0) * g.level;
    for (int e = t.rank; e < 2 * terms * kKsCols; e += t.size) {  // key rows t0 .. t0 + terms, both primes
      const int c = e % kKsCols, l = (e / kKsCols) & 1, kk = e / (2 * kKsCols);
      const int64_t row = t0 + kk, col = c0 + c;
      sk[(l * terms + kk) * kKsCols + c] = row < t_end && col < w ? g.keyswitch_key[(row * 2 + l) * w + col] : 0;
    }
    t.sync();
    const bool reduce_now = (s - s0 + 1) % reduce == 0;
    for (int o = 0; o < OWN; ++o) {
      const int u = t.rank + o * t.size, y = u / 16, x = u % 16;
      for (int kk = 0; kk < terms; ++kk) {
        int32_t d[MB];
#pragma unroll
        for (int m = 0; m < MB; ++m) d[m] = sd[kk * rows + y + 16 * m];
#pragma unroll
        for (int l = 0; l < 2; ++l) {
          const int32_t* kr = sk + (l * terms + kk) * kKsCols + x;
#pragma unroll
          for (int c = 0; c < 4; ++c) {
            const int32_t k = kr[16 * c];
#pragma unroll
            for (int m = 0; m < MB; ++m) acc[o][l][m][c] += static_cast<int64_t>(d[m]) * k;
          }
        }
      }
      if (reduce_now) {
#pragma unroll
        for (int l = 0; l < 2; ++l)
#pragma unroll
          for (int m = 0; m < MB; ++m)
#pragma unroll
            for (int c = 0; c < 4; ++c) acc[o][l][m][c] %= g.m.q[l];
      }
    }
    t.sync();  // the buffer is refilled next step
  }
  for (int o = 0; o < OWN; ++o) {
    const int u = t.rank + o * t.size, y = u / 16, x = u % 16;
#pragma unroll
    for (int m = 0; m < MB; ++m) {
      const int64_t b = b0 + y + 16 * m;
#pragma unroll
      for (int c = 0; c < 4; ++c) {
        const int64_t col = c0 + x + 16 * c;
        if (b >= g.B || col >= w) continue;
        int32_t r[2];
        for (int l = 0; l < 2; ++l) r[l] = tfhe_residue(acc[o][l][m][c] % g.m.q[l], g.m.q[l]);
        if (g.splits == 1) {
          tfhe_ks_write(g, b, col, r);
        } else {
          int32_t* p = g.partial + ((split * g.B + b) * w + col) * 2;
          p[0] = r[0];
          p[1] = r[1];
        }
      }
    }
  }
}

// Element e = (b, c) of B * (n_out + 1) after a split GEMM: the parts' residues summed.
FT_HD void tfhe_keyswitch_finish_one(const KeyswitchArgs& g, int64_t e) {
  const int64_t bw = g.B * (g.n_out + 1);
  int32_t r[2];
  for (int l = 0; l < 2; ++l) {
    int64_t sum = 0;  // splits <= 64 residues < 2^31
    for (int s = 0; s < g.splits; ++s) sum += g.partial[(s * bw + e) * 2 + l];
    r[l] = static_cast<int32_t>(sum % g.m.q[l]);
  }
  const int64_t b = e / (g.n_out + 1);
  tfhe_ks_write(g, b, e - b * (g.n_out + 1), r);
}


// ---- LWE key switching on int8 tensor cores -------------------------------------------------
//
// The same sum as the GEMM above, out[b] = (0, ..., 0, body_b) - sum_t d[b, t] KSK[t], as one int8
// x int8 -> int32 matrix product (torch._int_mm: tensor cores on CUDA, oneDNN on the CPU) between
// two element-wise passes (docs/tfhe.md, "Key switch on int8 tensor cores"):
//  * digits (tfhe_ks_digits_one): D (rows, K8) int8, D[b, i level + j] = digit j of mask i of
//    ciphertext b (|d| <= 2^(base_log-1) <= 128: base_log <= 8), zero in the padding rows b >= B
//    and columns t >= K = n_in level (K8 = K rounded up to a multiple of 8);
//  * the product with the byte planes of the key, built once per key in Python
//    (fhetorch._tfhe.algorithms.keyswitch_byte_planes): each residue of KSK[t, l, c], centred to
//    (-q_l/2, q_l/2], is sum_j 2^(8j) W_lj[t, c] with signed bytes W_lj in [-128, 127]; column
//    kKsPlanes c + 4 l + j of the product holds S_lj[b, c] = sum_t D[b, t] W_lj[t, c], exact in
//    int32 while 2^(base_log-1) 128 K < 2^31 (the caller checks the bound);
//  * combine (tfhe_ks_combine_one): per prime sum_j 2^(8j) S_lj = sum_t d[b, t] KSK_l[t, c]
//    (exactly: |.| < 2^31 (1 + 2^8 + 2^16 + 2^24) < 2^56 in int64), reduced mod q_l, subtracted
//    from the body and composed as tfhe_ks_write does for the GEMM: the same canonical output
//    bit for bit.

constexpr int kKsPlanes = 8;        // sums per output coefficient: 2 primes x 4 byte planes
constexpr int kKsInt8MaxBaseLog = 8;  // balanced digits in [-2^(base_log-1), 2^(base_log-1)) fit int8

// K = n_in level rounded up to a multiple of 8 (torch._int_mm's inner dimension on CUDA).
FT_HD int64_t tfhe_ks_digit_cols(const KeyswitchArgs& g) {
  return (static_cast<int64_t>(g.n_in) * g.level + 7) / 8 * 8;
}

// Element e of rows x (n_in + 1): ciphertext b = e / (n_in + 1), mask i = e % (n_in + 1); i < n_in
// writes that mask's level digits (zeros for b >= B), i = n_in the padding columns [K, K8).
FT_HD void tfhe_ks_digits_one(const KeyswitchArgs& g, int8_t* digits, int64_t e) {
  const int64_t per = static_cast<int64_t>(g.n_in) + 1, b = e / per, i = e - b * per;
  const int64_t cols = tfhe_ks_digit_cols(g);
  int8_t* row = digits + b * cols;
  if (i == g.n_in) {
    for (int64_t t = i * g.level; t < cols; ++t) row[t] = 0;
    return;
  }
  int8_t* d = row + i * g.level;
  if (b < g.B)
    tfhe_digits(tfhe_round_pow2(g.ct[b * per + i], g.m.q_full, g.base_log * g.level), g.base_log, g.level, d, 1);
  else
    for (int j = 0; j < g.level; ++j) d[j] = 0;
}

// Output coefficient e = (b, c) of B x (n_out + 1) from its kKsPlanes sums s[4 l + j] = S_lj[b, c].
FT_HD void tfhe_ks_combine_one(const KeyswitchArgs& g, const int32_t s[kKsPlanes], int64_t e) {
  const int64_t w = static_cast<int64_t>(g.n_out) + 1, b = e / w;
  int32_t r[2];
  for (int l = 0; l < 2; ++l) {
    const int32_t* p = s + 4 * l;
    const int64_t v = static_cast<int64_t>(p[0]) + static_cast<int64_t>(p[1]) * (int64_t(1) << 8) +
                      static_cast<int64_t>(p[2]) * (int64_t(1) << 16) + static_cast<int64_t>(p[3]) * (int64_t(1) << 24);
    r[l] = tfhe_residue(v, g.m.q[l]);
  }
  tfhe_ks_write(g, b, e - b * w, r);
}

}  // namespace fhetorch
