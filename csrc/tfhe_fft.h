// TFHE on the 2^64 torus: the negacyclic product of Z_{2^64}[X]/(X^N + 1) by a float64 FFT, the
// step functions shared by the CPU kernels (csrc/cpu/tfhe_fft.cpp) and the CUDA kernels
// (csrc/cuda/tfhe_fft.cu), so both devices compute the same doubles bit for bit. Semantics in
// csrc/bind/schema.cpp ("tfhe_fft*"); the math, the error model and the count in docs/tfhe.md
// ("Ring product on the 2^64 torus by f64 FFT").
//
// Torus values are int64 (arithmetic mod 2^64, two's complement), read as signed. A polynomial
// a of N = 2M coefficients is folded into the M complex values z_j = a_j + i a_(j+M): a mod
// (X^N + 1) evaluated at the roots of X^M = i is z mod (X^M - i) evaluated there (X^M = i), and
// these M roots (with their conjugates) are all 2N-th roots of -1. The transform splits
// X^(2m) - w^2 = (X^m - w)(X^m + w) down to degree one (Cooley-Tukey with the twist folded into
// the twiddles, as the negacyclic NTT folds psi): slot k of the output holds a(zeta^(e_k)),
// zeta = exp(i pi / N), e_k given by fhetorch._tfhe.fft.fft_exponents. Products are pointwise.
//
// Twiddles in Linzer and Feig's form: w = exp(i phi) is stored as (s, t), w = s (1 + i t), s ~ cos phi,
// t ~ sin phi / s (fhetorch._tfhe.fft.fft_twiddles; one complex128 slot per twiddle, its two doubles
// s and t). The forward butterfly x +- w y = x +- s y' with y' = (y.re - t y.im, y.im + t y.re) is
// six fmas (two for y', four for the outputs) where a complex product and four adds took eight.
// Rounding y' costs u |w y| whatever t's size (each part is formed exactly and rounded once, to
// within u |y'| = u |w y| / s, and s scales it back), so no cotangent form is needed; only
// cos phi = 0 cannot be stored, and no forward twiddle has it (node 1's is exp(i pi/4), t = 1, and
// the deeper angles are finer multiples of pi / N). The inverse reads the same rows: conj(w) d =
// s (d.re + t d.im, d.im - t d.re), two fmas and two multiplies, as many operations as before.
//
// Bit identity: every float64 operation is one of tfhe_dadd / dsub / dmul / dfma below, each a
// single IEEE round-to-nearest operation on both devices (CUDA: the __d*_rn / __fma_rn
// intrinsics, which nvcc never contracts, whatever -fmad; CPU: plain operators compiled with
// -ffp-contract=off, setup.py, and std::fma), in a fixed order per value; twiddles come from the
// host (no device sin/cos); the conversions are exact or integer code.
#pragma once
#include <cmath>
#include <cstdint>
#include <cstring>

#include "arith.h"
#include "tfhe.h"

namespace fhetorch {

// ---- float64 operations rounded the same way on both devices -------------------------------
FT_HD double tfhe_dadd(double a, double b) {
#if defined(__CUDA_ARCH__)
  return __dadd_rn(a, b);
#else
  return a + b;
#endif
}
FT_HD double tfhe_dsub(double a, double b) {
#if defined(__CUDA_ARCH__)
  return __dsub_rn(a, b);
#else
  return a - b;
#endif
}
FT_HD double tfhe_dmul(double a, double b) {
#if defined(__CUDA_ARCH__)
  return __dmul_rn(a, b);
#else
  return a * b;
#endif
}
FT_HD double tfhe_dfma(double a, double b, double c) {  // a b + c, one rounding
#if defined(__CUDA_ARCH__)
  return __fma_rn(a, b, c);
#else
  return std::fma(a, b, c);
#endif
}
// int64 -> the nearest double (ties to even): exact for |x| <= 2^53 (digits); a torus value
// loses its bits below the 53 leading ones (the key's conversion error, docs/tfhe.md).
FT_HD double tfhe_int_to_double(int64_t x) {
#if defined(__CUDA_ARCH__)
  return __ll2double_rn(static_cast<long long>(x));
#else
  return static_cast<double>(x);
#endif
}
FT_HD uint64_t tfhe_double_bits(double x) {
#if defined(__CUDA_ARCH__)
  return static_cast<uint64_t>(__double_as_longlong(x));
#else
  uint64_t u;
  std::memcpy(&u, &x, sizeof u);
  return u;
#endif
}
FT_HD double tfhe_double_from_bits(uint64_t bits) {
#if defined(__CUDA_ARCH__)
  return __longlong_as_double(static_cast<long long>(bits));
#else
  double d;
  std::memcpy(&d, &bits, sizeof d);
  return d;
#endif
}
FT_HD double tfhe_load_double(const double* p) {
#if defined(__CUDA_ARCH__)
  return __ldg(p);
#else
  return *p;
#endif
}

// round(v 2^-scale_log) mod 2^64 as int64, ties to even: k = rint(v 2^-(64 + scale_log)) counts the
// multiples of 2^(64 + scale_log) to drop, r = v - k 2^(64 + scale_log) is exact (both are multiples
// of v's last place, |r| <= 2^(63 + scale_log)), r 2^-scale_log in [-2^63, 2^63] is rounded by one
// conversion (2^63 wraps to -2^63). Any finite v: far above 2^63 only its value mod 2^64 matters
// (an FFT output), and beyond 2^(117 + scale_log) r is 0. Non-finite v gives 0. Every step is one
// IEEE operation, so both devices agree; five instructions where the old integer code took ~25.
FT_HD double tfhe_pow2(int e) {  // 2^e for e in [-1022, 1023], from its bits
  return tfhe_double_from_bits(static_cast<uint64_t>(e + 1023) << 52);
}
FT_HD double tfhe_rint(double x) {  // nearest integer, ties to even
#if defined(__CUDA_ARCH__)
  return rint(x);
#else
  return std::nearbyint(x);  // the default rounding mode: to nearest, ties to even
#endif
}
FT_HD int64_t tfhe_torus_from_double(double v, int scale_log) {
  const double k = tfhe_rint(tfhe_dmul(v, tfhe_pow2(-64 - scale_log)));
  double r = tfhe_dmul(tfhe_dfma(-k, tfhe_pow2(64 + scale_log), v), tfhe_pow2(-scale_log));
  const double two63 = 9223372036854775808.0;
  if (!(r >= -two63 && r <= two63)) return 0;  // NaN (from a non-finite v)
  if (r == two63) r = -two63;
#if defined(__CUDA_ARCH__)
  return static_cast<int64_t>(__double2ll_rn(r));
#else
  return static_cast<int64_t>(std::llrint(r));
#endif
}

// ---- complex values --------------------------------------------------------------------------
struct TfheComplex {
  double re, im;
};

// A complex value of read-only data (twiddles, keys; 16-byte aligned): one 16-byte load through
// the read-only cache on the GPU.
FT_HD TfheComplex tfhe_load_complex(const double* p) {
#if defined(__CUDA_ARCH__)
  const double2 v = __ldg(reinterpret_cast<const double2*>(p));
  return TfheComplex{v.x, v.y};
#else
  return TfheComplex{p[0], p[1]};
#endif
}

// A twiddle w = s (1 + i t) (Linzer and Feig's form; one slot of fft_twiddles, its doubles s, t).
struct TfheTwiddle {
  double s, t;
};
FT_HD TfheTwiddle tfhe_load_twiddle(const double* p) {  // 16-byte aligned, read-only
  const TfheComplex v = tfhe_load_complex(p);
  return TfheTwiddle{v.re, v.im};
}
// acc + a b, four fmas in a fixed order.
FT_HD TfheComplex tfhe_cmac(TfheComplex acc, TfheComplex a, TfheComplex b) {
  const double re = tfhe_dfma(-a.im, b.im, tfhe_dfma(a.re, b.re, acc.re));
  const double im = tfhe_dfma(a.im, b.re, tfhe_dfma(a.re, b.im, acc.im));
  return TfheComplex{re, im};
}

// The ring of the FFT product: N = 2^log_n (M = N/2 complex slots) and the twiddles, (M,)
// complex128 slots (interleaved doubles): slot h in [1, M) holds (s, t) of zeta^(e(2h)), the twiddle
// of heap node h (TfheTwiddle; fhetorch._tfhe.fft.fft_twiddles); the transforms read slot 1 and the even
// slots (tfhe_fft_stages: an odd node's twiddle is its sibling's times i).
struct TfheFftRing {
  int log_n;
  const double* twiddles;
};

// ---- the FFT of rows held by a team ------------------------------------------------------------
//
// A row of M complex values is two planes of M doubles, real then imaginary (rows at a + 2 r M).
// Value x lives at slot x ^ ((x >> 4) & 15) of its plane: on the GPU, 8-byte words strided by 16
// or more (the early and late stages) spread over the banks of shared memory, as tfhe_slot does
// for int32 words.
FT_HD uint32_t tfhe_fft_slot(uint32_t x) { return x ^ ((x >> 4) & 15u); }

// The transform's outputs are stored transposed: value x (leaf M + x, fhetorch._tfhe.fft) at
// tfhe_fft_order(x) = (x mod 8) M/8 + x / 8. The CUDA rotation (csrc/cuda/tfhe_fft.cu) ends its
// forward transform with thread t holding values 8 t .. 8 t + 7: in this order its key reads for
// one value are consecutive across the threads of a warp. log_m >= 3.
FT_HD uint32_t tfhe_fft_order(uint32_t x, int log_m) { return ((x & 7u) << (log_m - 3)) | (x >> 3); }
FT_HD uint32_t tfhe_fft_value(uint32_t k, int log_m) {  // the inverse: the value stored at k
  return ((k & ((1u << (log_m - 3)) - 1u)) << 3) | (k >> (log_m - 3));
}

// One butterfly on the pair (x, y) = (value x, value x | 2^b) under twiddle w = s (1 + i t), or (ROT) under
// i w, the twiddle of w's node's odd sibling (tfhe_fft_stages): the same table slot and the same operations,
// with y' or d taken times i or -i (a swap of its parts and a negation, both exact).
// Forward: (x, y) -> (x + w y, x - w y), six fmas: y' = (1 + i t) y, then x +- s y' (ROT: x +- s i y').
// Inverse: (x, y) -> (x + y, conj(w) (x - y)) (no 1/2: the caller divides by M at the end, exactly), four
// adds, then d' = (1 - i t) d by two fmas and s d' by two multiplies (ROT: s (-i d')). Every schedule of
// the transform (the generic rounds below, the CUDA rotation's register rounds) runs this same sequence
// of operations, so the grouping of stages into rounds and the team's size change no result.
template <bool INV>
FT_HD void tfhe_fft_butterfly(TfheComplex& x, TfheComplex& y, TfheTwiddle w, bool rot) {
  if (INV) {
    const TfheComplex d{tfhe_dsub(x.re, y.re), tfhe_dsub(x.im, y.im)};
    x = TfheComplex{tfhe_dadd(x.re, y.re), tfhe_dadd(x.im, y.im)};
    const double dr = tfhe_dfma(w.t, d.im, d.re), di = tfhe_dfma(-w.t, d.re, d.im);  // (1 - i t) d
    const double q1 = rot ? di : dr, q2 = rot ? -dr : di;                          // ROT: -i d'
    y = TfheComplex{tfhe_dmul(w.s, q1), tfhe_dmul(w.s, q2)};
  } else {
    const double pr = tfhe_dfma(-w.t, y.im, y.re), pi = tfhe_dfma(w.t, y.re, y.im);  // y' = (1 + i t) y
    const double p1 = rot ? -pi : pr, p2 = rot ? pr : pi;                          // ROT: i y'
    const TfheComplex a = x;
    x = TfheComplex{tfhe_dfma(w.s, p1, a.re), tfhe_dfma(w.s, p2, a.im)};
    y = TfheComplex{tfhe_dfma(-w.s, p1, a.re), tfhe_dfma(-w.s, p2, a.im)};
  }
}

// The R stages over the index bits [lo, lo + R) of the 2^R values v[u] = value x0 | (u << lo)
// (x0 zero in those bits, x0 < m), in registers, for ROWS rows at once (row r's values at v[r 2^R + u];
// they share the twiddles): forward from the high bit down, inverse from the low bit up. The stage
// on bit b pairs x with x | 2^b under the twiddle of heap node h = (M + x) >> (b + 1).
// Siblings: the twiddle of an odd node h >= 3 is i times its sibling h - 1's (zeta^(N/2) = i,
// fhetorch._tfhe.fft), so it is read from slot h - 1 and applied as i w (tfhe_fft_butterfly's ROT):
// a round reads 2^(R-1) slots where it read 2^R - 1. A node's parity is known at compile time in every
// stage but a round's top one (bit lo + R - 1), whose node's low bit is bit lo + R of x0: TOP gives it
// where the caller knows it (0 or 1), -1 reads it from x0. The root (h = 1) is its own slot.
// TW: the loader of the twiddle of node 2c (c >= 1) or of the root (c = 0), by c:
// TfheGlobalTwiddles reads the table (fft_twiddles: slot h holds node h's); a CUDA kernel may pass a
// loader of a shared-memory copy of those slots (M / 2 of them).
struct TfheGlobalTwiddles {
  FT_HD static TfheTwiddle at(const double* tw, uint32_t c) { return tfhe_load_twiddle(tw + 2 * (c == 0 ? 1 : 2 * c)); }
};
template <bool INV, int R, int ROWS = 1, class TW = TfheGlobalTwiddles, int TOP = -1>
FT_HD void tfhe_fft_stages(TfheComplex* v, uint32_t m, uint32_t x0, int lo, const double* tw) {
  constexpr int E = 1 << R;
#pragma unroll
  for (int k = 0; k < R; ++k) {
    const int lb = INV ? k : R - 1 - k, b = lo + lb;  // local and row bit of this stage
    // the stage's first node: the root when b is the top bit (x0 < m), even below the round's top stage
    const uint32_t base = (m >> (b + 1)) == 1u ? 1u : (m + x0) >> (b + 1);
#pragma unroll
    for (int u = 0; u < E; ++u) {
      if ((u >> lb) & 1) continue;
      const int j = u >> (lb + 1);  // node base + j
      if (lb < R - 1 && (j & 1)) continue;  // an odd node: served with its sibling below
      bool rot = false;
      uint32_t c = (base >> 1) + static_cast<uint32_t>(j >> 1);
      if (lb == R - 1) {  // one node (j = 0), either parity
        const bool odd = TOP >= 0 ? TOP == 1 : (base & 1u) != 0u;
        rot = odd && base > 1u;
      }
      const TfheTwiddle w = TW::at(tw, c);
#pragma unroll
      for (int s = 0; s < (lb < R - 1 ? 2 : 1); ++s) {  // node base + j, then (below the top) its sibling
        const int uu = u + (s << (lb + 1));
#pragma unroll
        for (int r = 0; r < ROWS; ++r)
          tfhe_fft_butterfly<INV>(v[r * E + uu], v[r * E + (uu | (1 << lb))], w, s == 1 || rot);
      }
    }
  }
}

// A round of R stages over the index bits [lo, lo + R) (as tfhe_ntt_round): every item is the
// 2^R values that differ only in those bits, loaded into registers, taken through the R stages
// (tfhe_fft_stages), stored back.
template <bool INV, int R, class T>
FT_HD void tfhe_fft_round(const T& t, double* a, int rows, int log_m, int lo, const double* tw) {
  constexpr int E = 1 << R;
  const uint32_t m = 1u << log_m;
  const int wbits = log_m - R;
  const uint32_t items = static_cast<uint32_t>(rows) << wbits;
  const uint32_t low = (1u << lo) - 1u;
  for (uint32_t it = static_cast<uint32_t>(t.rank); it < items; it += static_cast<uint32_t>(t.size)) {
    const uint32_t r = it >> wbits, w = it & ((1u << wbits) - 1u);
    const uint32_t x0 = (w & low) | ((w >> lo) << (lo + R));  // w's bits around the round's R bits
    double* re = a + (static_cast<int64_t>(2 * r) << log_m);
    double* im = re + m;
    TfheComplex v[E];
#pragma unroll
    for (int u = 0; u < E; ++u) {
      const uint32_t s = tfhe_fft_slot(x0 | (static_cast<uint32_t>(u) << lo));
      v[u] = TfheComplex{re[s], im[s]};
    }
    tfhe_fft_stages<INV, R>(v, m, x0, lo, tw);
#pragma unroll
    for (int u = 0; u < E; ++u) {
      const uint32_t s = tfhe_fft_slot(x0 | (static_cast<uint32_t>(u) << lo));
      re[s] = v[u].re;
      im[s] = v[u].im;
    }
  }
  t.sync();
}

// The whole transform of `rows` rows of M = 2^log_m values in rounds of at most 4 stages (fewer
// where a round of 4 would leave part of a large team without an item), one barrier per round.
// Forward: natural order in, slot order out (fft_exponents); inverse: the reverse, times M.
template <bool INV, class T>
FT_HD void tfhe_team_fft(const T& t, double* a, int rows, int log_m, const double* tw) {
  const int64_t values = static_cast<int64_t>(rows) << log_m;
  const int cap = (values >> 4) >= t.size ? 4 : (values >> 3) >= t.size ? 3 : 2;
  const int rounds = (log_m + cap - 1) / cap;
  int done = 0;
  for (int i = 0; i < rounds; ++i) {
    const int r = log_m / rounds + (i < log_m % rounds ? 1 : 0);
    const int lo = INV ? done : log_m - done - r;
    switch (r) {
      case 1: tfhe_fft_round<INV, 1>(t, a, rows, log_m, lo, tw); break;
      case 2: tfhe_fft_round<INV, 2>(t, a, rows, log_m, lo, tw); break;
      case 3: tfhe_fft_round<INV, 3>(t, a, rows, log_m, lo, tw); break;
      default: tfhe_fft_round<INV, 4>(t, a, rows, log_m, lo, tw); break;
    }
    done += r;
  }
}

// Scratch of one team: `rows` rows of M complex values, in doubles (2 M per row = N).
FT_HD int64_t tfhe_fft_scratch_doubles(const TfheFftRing& f, int rows) {
  return static_cast<int64_t>(rows) << f.log_n;
}

// Row r of a (rows, M) scratch := the folded polynomial x (N int64 coefficients, signed):
// z_j = x_j + i x_(j+M). The caller syncs.
template <class T>
FT_HD void tfhe_fft_load_row(const T& t, const TfheFftRing& f, const int64_t* x, double* a, int r) {
  const int log_m = f.log_n - 1;
  const uint32_t m = 1u << log_m;
  double* re = a + (static_cast<int64_t>(2 * r) << log_m);
  for (uint32_t j = static_cast<uint32_t>(t.rank); j < m; j += static_cast<uint32_t>(t.size)) {
    const uint32_t s = tfhe_fft_slot(j);
    re[s] = tfhe_int_to_double(x[j]);
    re[m + s] = tfhe_int_to_double(x[j + m]);
  }
}

// The polynomial of row r after an inverse transform: coefficient j = round(re_j / M),
// j + M = round(im_j / M), mod 2^64, into out (N int64), plus addend (N int64) where given
// (mod 2^64). The caller syncs.
FT_HD int64_t tfhe_torus_add(int64_t a, int64_t b) {
  return static_cast<int64_t>(static_cast<uint64_t>(a) + static_cast<uint64_t>(b));
}
FT_HD int64_t tfhe_torus_sub(int64_t a, int64_t b) {
  return static_cast<int64_t>(static_cast<uint64_t>(a) - static_cast<uint64_t>(b));
}
template <class T>
FT_HD void tfhe_fft_store_row(const T& t, const TfheFftRing& f, const double* a, int r, int64_t* out,
                              const int64_t* addend = nullptr) {
  const int log_m = f.log_n - 1;
  const uint32_t m = 1u << log_m;
  const double* re = a + (static_cast<int64_t>(2 * r) << log_m);
  for (uint32_t j = static_cast<uint32_t>(t.rank); j < m; j += static_cast<uint32_t>(t.size)) {
    const uint32_t s = tfhe_fft_slot(j);
    const int64_t lo = tfhe_torus_from_double(re[s], log_m), hi = tfhe_torus_from_double(re[m + s], log_m);
    out[j] = addend ? tfhe_torus_add(addend[j], lo) : lo;
    out[j + m] = addend ? tfhe_torus_add(addend[j + m], hi) : hi;
  }
}

// out (M complex, interleaved) = the FFT of one polynomial x (N int64); a: 2 M doubles.
template <class T>
FT_HD void tfhe_team_fft_op(const T& t, const TfheFftRing& f, const int64_t* x, double* a, double* out) {
  const int log_m = f.log_n - 1;
  const uint32_t m = 1u << log_m;
  tfhe_fft_load_row(t, f, x, a, 0);
  t.sync();
  tfhe_team_fft<false>(t, a, 1, log_m, f.twiddles);
  for (uint32_t k = static_cast<uint32_t>(t.rank); k < m; k += static_cast<uint32_t>(t.size)) {
    const uint32_t s = tfhe_fft_slot(tfhe_fft_value(k, log_m));
    out[2 * k] = a[s];
    out[2 * k + 1] = a[m + s];
  }
}

// out (N int64) = the rounded inverse FFT of one row x (M complex, interleaved), mod 2^64.
template <class T>
FT_HD void tfhe_team_ifft_op(const T& t, const TfheFftRing& f, const double* x, double* a, int64_t* out) {
  const int log_m = f.log_n - 1;
  const uint32_t m = 1u << log_m;
  for (uint32_t k = static_cast<uint32_t>(t.rank); k < m; k += static_cast<uint32_t>(t.size)) {
    const uint32_t s = tfhe_fft_slot(tfhe_fft_value(k, log_m));
    a[s] = x[2 * k];
    a[m + s] = x[2 * k + 1];
  }
  t.sync();
  tfhe_team_fft<true>(t, a, 1, log_m, f.twiddles);
  tfhe_fft_store_row(t, f, a, 0, out);
}

// A key of the FFT product: (rows, cols, M) complex in memory (the FFTs of torus polynomials);
// slot(k).at(r, c) is entry (r, c) at key slot k.
struct TfheFourierKey {
  const double* key;
  int cols;
  uint32_t m;
  struct Slot {
    const double* p;
    int cols;
    uint32_t m;
    FT_HD TfheComplex at(int r, int c) const {
      return tfhe_load_complex(p + 2 * ((static_cast<int64_t>(r) * cols + c) * m));
    }
  };
  FT_HD Slot slot(uint32_t k) const { return Slot{key + 2 * static_cast<int64_t>(k), cols, m}; }
};

// Rows [0, rows) of a hold digit polynomials (folded, synced): forward FFT, per slot the
// multiply-accumulate with the key (TfheFourierKey, or a multi-bit group's bundle,
// TfheFourierBundle) into the first cols rows (each slot's rows values are read before any is
// overwritten, by the same member), inverse FFT. Rows [0, cols) then hold M times the products;
// a: max(rows, cols) rows, cols <= kTfheMaxK1.
// MAXC (at least cols): the accumulators a member holds per slot; a kernel for k + 1 <= 2 passes 2
// and keeps the other six's registers (the result does not depend on it).
template <int MAXC = kTfheMaxK1, class T, class K>
FT_HD void tfhe_team_fft_rows_product(const T& t, const TfheFftRing& f, const K& key, int rows, int cols, double* a) {
  const int log_m = f.log_n - 1;
  const uint32_t m = 1u << log_m;
  tfhe_team_fft<false>(t, a, rows, log_m, f.twiddles);
  for (uint32_t k = static_cast<uint32_t>(t.rank); k < m; k += static_cast<uint32_t>(t.size)) {
    const uint32_t s = tfhe_fft_slot(tfhe_fft_value(k, log_m));  // key slot k
    const auto ks = key.slot(k);
    TfheComplex acc[MAXC];
#pragma unroll
    for (int c = 0; c < MAXC; ++c) acc[c] = TfheComplex{0.0, 0.0};
    for (int r = 0; r < rows; ++r) {
      const double* row = a + (static_cast<int64_t>(2 * r) << log_m);
      const TfheComplex d{row[s], row[m + s]};
#pragma unroll
      for (int c = 0; c < MAXC; ++c)
        if (c < cols) acc[c] = tfhe_cmac(acc[c], d, ks.at(r, c));
    }
#pragma unroll
    for (int c = 0; c < MAXC; ++c)
      if (c < cols) {
        double* row = a + (static_cast<int64_t>(2 * c) << log_m);
        row[s] = acc[c].re;
        row[m + s] = acc[c].im;
      }
  }
  t.sync();
  tfhe_team_fft<true>(t, a, cols, log_m, f.twiddles);
}

template <int MAXC = kTfheMaxK1, class T>
FT_HD void tfhe_team_fft_rows_product(const T& t, const TfheFftRing& f, const double* key, int rows, int cols,
                                      double* a) {
  tfhe_team_fft_rows_product<MAXC>(t, f, TfheFourierKey{key, cols, 1u << (f.log_n - 1)}, rows, cols, a);
}

// The ring product of one batch element: out[c] = sum_r digits[r] key[r, c] in
// Z_{2^64}[X]/(X^N + 1), c < cols, r < rows (tfhe_team_fft_rows_product, rounded).
// a: max(rows, cols) scratch rows; cols <= kTfheMaxK1.
template <class T>
FT_HD void tfhe_team_fft_product(const T& t, const TfheFftRing& f, const int64_t* digits, const double* key, int rows,
                                 int cols, double* a, int64_t* out) {
  const int64_t n = int64_t(1) << f.log_n;
  for (int r = 0; r < rows; ++r) tfhe_fft_load_row(t, f, digits + r * n, a, r);
  t.sync();
  tfhe_team_fft_rows_product(t, f, key, rows, cols, a);
  for (int c = 0; c < cols; ++c) tfhe_fft_store_row(t, f, a, c, out + c * n);
}

// ---- external product and CMux on the 2^64 torus ---------------------------------------------
//
// Gadget: g_j = 2^(64 - base_log (j + 1)), j < level (TFHE-rs's on 2^64); a value x is rounded to
// v = round(x / 2^(64 - base_log level)) (half up) and cut into balanced digits d_j in [-B/2, B/2)
// with sum_j d_j g_j = v 2^(64 - base_log level) mod 2^64 (the carry out of the top digit is a
// multiple of 2^64: it vanishes). base_log level <= 60.
FT_HD uint64_t tfhe_torus_round(int64_t x, int bits) {
  const int shift = 64 - bits;
  return (static_cast<uint64_t>(x) + (uint64_t(1) << (shift - 1))) >> shift;
}

// A GGSW on the torus in FFT form: (k1, level, k1, M) complex, row (p, j) the FFT of a GLWE
// encryption of zero plus mu g_j on component p.
struct TfheTorusGgsw {
  TfheFftRing f;
  int k1, base_log, level;
};

// out (k1, N) = c0 + GGSW x (c1 - c0), mod 2^64 (c0 null: out = GGSW x c1, the external
// product): the digits of every (component, level) of c1 - c0 into the folded scratch rows
// (p level + j), tfhe_team_fft_rows_product with the GGSW as key, rounding, + c0. a: k1 level
// scratch rows. out must not alias c0 or c1.
template <class T>
FT_HD void tfhe_team_torus_cmux(const T& t, const TfheTorusGgsw& g, const int64_t* c0, const int64_t* c1,
                                const double* ggsw, double* a, int64_t* out) {
  const int log_m = g.f.log_n - 1;
  const uint32_t m = 1u << log_m, n = 2u * m;
  const int bits = g.base_log * g.level;
  const uint32_t k1n = static_cast<uint32_t>(g.k1) * n;
  for (uint32_t e = static_cast<uint32_t>(t.rank); e < k1n; e += static_cast<uint32_t>(t.size)) {
    const int p = static_cast<int>(e >> g.f.log_n);
    const uint32_t c = e & (n - 1u);
    const int64_t x = c0 ? tfhe_torus_sub(c1[e], c0[e]) : c1[e];
    uint64_t v = tfhe_torus_round(x, bits);
    const uint32_t s = tfhe_fft_slot(c & (m - 1u)) + (c >= m ? m : 0u);  // real plane, then imaginary
    for (int j = g.level - 1; j >= 0; --j) {
      const int32_t d = tfhe_next_digit(v, g.base_log);
      a[(static_cast<int64_t>(2 * (p * g.level + j)) << log_m) + s] = static_cast<double>(d);
    }
  }
  t.sync();
  tfhe_team_fft_rows_product(t, g.f, ggsw, g.k1 * g.level, g.k1, a);
  const int64_t nn = n;
  for (int p = 0; p < g.k1; ++p) tfhe_fft_store_row(t, g.f, a, p, out + p * nn, c0 ? c0 + p * nn : nullptr);
}

}  // namespace fhetorch

namespace fhetorch {

// ---- the blind rotation on the torus (the Fourier bootstrapping key) ---------------------------
//
// The LWE side stays mod q = q0 q1 (key switch, modulus switch, the output ciphertexts); only the
// accumulator lives on the 2^64 torus, so that each CMux's ring product is one float64 FFT
// product with a key in FFT form. In: the test polynomials mod q, lifted to the torus
// (tfhe_torus_from_q, exact rounding); out: the accumulator brought back mod q
// (tfhe_torus_to_q). Both conversions are integer code: CPU = CUDA bit for bit.

// round(x 2^64 / q) mod 2^64 for x in [0, q), q < 2^62 odd: long division, one bit per step
// (the remainder stays below q, so 2 r < 2^63), then round half up (q odd: no tie).
FT_HD int64_t tfhe_torus_from_q(int64_t x, int64_t q) {
  uint64_t r = static_cast<uint64_t>(x), quo = 0;
  const uint64_t uq = static_cast<uint64_t>(q);
  for (int i = 0; i < 64; ++i) {
    r <<= 1;
    quo <<= 1;
    if (r >= uq) {
      r -= uq;
      quo |= 1u;
    }
  }
  return static_cast<int64_t>(quo + (2 * r >= uq ? 1u : 0u));
}

// round(y q / 2^64) mod q for a torus value y (read unsigned): the high word of the 128-bit
// product y q plus the carry of adding 2^63 to its low word; q itself wraps to 0.
FT_HD int64_t tfhe_torus_to_q(int64_t y, int64_t q) {
  const uint64_t uy = static_cast<uint64_t>(y), uq = static_cast<uint64_t>(q);
#if defined(__CUDA_ARCH__)
  const uint64_t hi = __umul64hi(uy, uq), lo = uy * uq;
#else
  const unsigned __int128 p = static_cast<unsigned __int128>(uy) * uq;
  const uint64_t hi = static_cast<uint64_t>(p >> 64), lo = static_cast<uint64_t>(p);
#endif
  const uint64_t v = hi + (lo >= (uint64_t(1) << 63) ? 1u : 0u);
  return static_cast<int64_t>(v == uq ? 0 : v);
}

// Coefficient c of X^s P on the torus (P of N = 2^log_n coefficients, s in [0, 2N)).
FT_HD int64_t tfhe_torus_rotated(const int64_t* p, int64_t c, int64_t s, int log_n) {
  bool neg;
  const int64_t v = p[tfhe_rotation_source(c, s, log_n, neg)];
  return neg ? tfhe_torus_sub(0, v) : v;
}

struct FourierRotateArgs {
  TfheTorusGgsw g;           // the ring, k1, base_log, level of the key
  TfheMod m;                 // q of the LWE side
  const int64_t* ct;         // (B, n + 1) LWE ciphertexts mod q under the key's LWE secret
  const int64_t* luts;       // (T, N) test polynomials mod q
  const int64_t* lut_index;  // (B,) clamped into [0, T), or null: LUT 0
  const double* bsk;         // (n, k1, level, k1, N/2) complex: the FFT of each key bit's GGSW on the torus
  int64_t* acc;              // (B, k1, N) the accumulators, mod q (the output)
  double* scratch;           // B * tfhe_fourier_scratch_doubles where the team's scratch is not its own
  int64_t* torus;            // B * k1 N torus accumulators where the team's are not its own
  int64_t B, T;
  int n;
  // Multi-bit (grouping > 1; tfhe_team_fourier_multi_bit_step): bsk is (n / G, 2^G, k1, level, k1,
  // N/2), the FFTs of the GGSWs of the subset indicators f_S (csrc/tfhe.h, "multi-bit blind rotation").
  int grouping;              // <= 1: classical
  const double* roots;       // (2N,) complex: zeta^j = exp(i pi j / N) (fhetorch._tfhe.fft.fft_roots)
  const int32_t* exps;       // (N/2,): e_k of key slot k, slot k of an FFT holding a(zeta^(e_k))
  const double* bundles;     // CUDA register kernel: the groups' bundles made ahead (tfhe_fourier_key_bundles)
};

// A team's digit scratch: k1 level folded rows of N doubles (the product's k1 outputs reuse the
// first rows).
FT_HD int64_t tfhe_fourier_scratch_doubles(const TfheTorusGgsw& g) {
  return static_cast<int64_t>(g.k1) * g.level << g.f.log_n;
}
// The fused path's shared memory: the torus accumulator and the digit scratch.
FT_HD int64_t tfhe_fourier_fused_bytes(const TfheTorusGgsw& g) {
  return 8 * ((static_cast<int64_t>(g.k1) << g.f.log_n) + tfhe_fourier_scratch_doubles(g));
}

// a_i (i < n) or the body's rotation (i = n) of ciphertext b: round(x 2N / q).
FT_HD int64_t tfhe_fourier_rotation(const FourierRotateArgs& a, int64_t b, int i) {
  return static_cast<int64_t>(tfhe_round_pow2(a.ct[b * (a.n + 1) + i], a.m.q_full, a.g.f.log_n + 1));
}

// Coefficient e (< k1 N) of ciphertext b's starting accumulator on the torus: X^(-~body) * (its LUT,
// lifted) in the body, zero in the masks.
FT_HD int64_t tfhe_fourier_start_value(const FourierRotateArgs& a, int64_t b, int64_t e) {
  const int log_n = a.g.f.log_n;
  const int64_t n = int64_t(1) << log_n, body_start = (a.g.k1 - 1) * n;
  if (e < body_start) return 0;
  const int64_t shift = (2 * n - tfhe_fourier_rotation(a, b, a.n)) & (2 * n - 1);
  int64_t li = a.lut_index ? a.lut_index[b] : 0;
  li = li < 0 ? 0 : (li >= a.T ? a.T - 1 : li);
  // coefficient c of X^shift lut, lifted: the lift of the LUT's value, negated on the torus where
  // the rotation wraps (lifting q - x gives exactly minus x's lift: q is odd, no tie)
  bool neg;
  const int64_t v = tfhe_torus_from_q(a.luts[li * n + tfhe_rotation_source(e - body_start, shift, log_n, neg)],
                                      a.m.q_full);
  return neg ? tfhe_torus_sub(0, v) : v;
}

// acc (k1, N) torus := ciphertext b's starting accumulator (tfhe_fourier_start_value).
template <class T>
FT_HD void tfhe_team_fourier_rotate_init(const T& t, const FourierRotateArgs& a, int64_t b, int64_t* acc) {
  const int64_t k1n = static_cast<int64_t>(a.g.k1) << a.g.f.log_n;
  for (int64_t e = t.rank; e < k1n; e += t.size) acc[e] = tfhe_fourier_start_value(a, b, e);
  t.sync();
}

// Key bit i of ciphertext b: acc := acc + BSK_i x ((X^(a_i) - 1) acc) on the torus, in place: the
// digits of (X^(a_i) - 1) acc into the folded rows of s (tfhe_fourier_scratch_doubles), the FFT
// product with the bit's GGSW (tfhe_team_fft_rows_product), each output coefficient rounded and
// added to acc by the member that reads it. a_i = 0 leaves acc unchanged.
template <int MAXC = kTfheMaxK1, class T>
FT_HD void tfhe_team_fourier_rotate_step(const T& t, const FourierRotateArgs& a, int64_t b, int i, int64_t* acc,
                                         double* s) {
  const TfheTorusGgsw& g = a.g;
  const int64_t rot = tfhe_fourier_rotation(a, b, i);
  if (rot == 0) return;  // the whole team sees the same rotation
  const int log_n = g.f.log_n, log_m = log_n - 1;
  const uint32_t m = 1u << log_m, n = 2u * m;
  const int bits = g.base_log * g.level;
  const uint32_t k1n = static_cast<uint32_t>(g.k1) * n;
  for (uint32_t e = static_cast<uint32_t>(t.rank); e < k1n; e += static_cast<uint32_t>(t.size)) {
    const uint32_t p = e >> log_n, c = e & (n - 1u);
    const int64_t* ap = acc + (static_cast<int64_t>(p) << log_n);
    uint64_t v = tfhe_torus_round(tfhe_torus_sub(tfhe_torus_rotated(ap, c, rot, log_n), ap[c]), bits);
    const uint32_t slot = tfhe_fft_slot(c & (m - 1u)) + (c >= m ? m : 0u);
    for (int j = g.level - 1; j >= 0; --j) {
      const int32_t d = tfhe_next_digit(v, g.base_log);
      s[(static_cast<int64_t>(2 * (static_cast<int>(p) * g.level + j)) << log_m) + slot] = static_cast<double>(d);
    }
  }
  t.sync();  // every read of acc is done before the product adds to it
  const int64_t per_bit = static_cast<int64_t>(g.k1) * g.level * g.k1 << log_m;  // complex values
  tfhe_team_fft_rows_product<MAXC>(t, g.f, a.bsk + 2 * per_bit * i, g.k1 * g.level, g.k1, s);
  for (int p = 0; p < g.k1; ++p) {
    int64_t* row = acc + (static_cast<int64_t>(p) << log_n);
    tfhe_fft_store_row(t, g.f, s, p, row, row);
  }
  t.sync();
}

// The accumulator of ciphertext b back mod q into the output.
template <class T>
FT_HD void tfhe_team_fourier_rotate_finish(const T& t, const FourierRotateArgs& a, int64_t b, const int64_t* acc) {
  const int64_t k1n = static_cast<int64_t>(a.g.k1) << a.g.f.log_n;
  int64_t* out = a.acc + b * k1n;
  for (int64_t e = t.rank; e < k1n; e += t.size) out[e] = tfhe_torus_to_q(acc[e], a.m.q_full);
}

// The whole blind rotation of ciphertext b by one team, in its acc (k1 N int64) and s scratch.
template <int MAXC = kTfheMaxK1, class T>
FT_HD void tfhe_team_fourier_blind_rotate(const T& t, const FourierRotateArgs& a, int64_t b, int64_t* acc,
                                          double* s) {
  tfhe_team_fourier_rotate_init(t, a, b, acc);
  for (int i = 0; i < a.n; ++i) tfhe_team_fourier_rotate_step<MAXC>(t, a, b, i, acc, s);
  tfhe_team_fourier_rotate_finish(t, a, b, acc);
}

// ---- the multi-bit blind rotation on the torus -------------------------------------------------
//
// The multi-bit step of csrc/tfhe.h (group j of G key bits, the GGSWs of the 2^G subset indicators
// f_S, exactly one of them 1) with the accumulator on the torus: acc := K x acc with the group's key
// bundle K = sum_S X^(a_S) GGSW(f_S), a_S the subset sums of the group's masks switched to 2N (a_0 = 0).
// In FFT form multiplying by X^a is multiplying slot k by zeta^(e_k a), a lookup in the roots table,
// so each entry of K at slot k is G_0 + sum_(S >= 1) zeta^(e_k a_S) G_S: 2^G - 1 complex
// multiply-adds (tfhe_cmac, S ascending) on the rows of the group's key. No rotation of acc: the
// digits are acc's own, and the product replaces acc.

// rot[S] = a_S of group j of ciphertext b, S < 2^G: the subset sum of the group's masks mod q,
// switched to 2N (one rounding per subset; a_0 = 0). One member per subset; the caller syncs.
template <class T>
FT_HD void tfhe_team_fourier_subset_rotations(const T& t, const FourierRotateArgs& a, int64_t b, int j, int32_t* rot) {
  const int64_t* mask = a.ct + b * (a.n + 1) + static_cast<int64_t>(j) * a.grouping;
  tfhe_team_switched_subset_sums(t, mask, a.grouping, a.m.q_full, a.g.f.log_n, rot);
}

// The key bundle of a group as a key of the FFT product (tfhe_team_fft_rows_product): slot(k)
// looks up the 2^G - 1 monomials' values at slot k once, at(r, c) sums the group's 2^G entries.
struct TfheFourierBundle {
  const double* ggsw;   // the group's (2^G, rows, cols, M) complex
  const double* roots;  // (2N,) complex
  const int32_t* exps;  // (M,)
  const int32_t* rot;   // (2^G,) a_S
  int64_t per_ggsw;     // rows cols M
  int cols, subsets;
  uint32_t m;
  struct Slot {
    const double* g;
    int64_t per_ggsw;
    int cols, subsets;
    uint32_t m;
    TfheComplex mono[1 << kTfheMaxGrouping];  // zeta^(e_k a_S), S >= 1
    FT_HD TfheComplex at(int r, int c) const {
      const double* p = g + 2 * ((static_cast<int64_t>(r) * cols + c) * m);
      TfheComplex v = tfhe_load_complex(p);  // S = {}: X^0
#pragma unroll
      for (int u = 1; u < (1 << kTfheMaxGrouping); ++u)
        if (u < subsets) v = tfhe_cmac(v, mono[u], tfhe_load_complex(p + 2 * u * per_ggsw));
      return v;
    }
  };
  FT_HD Slot slot(uint32_t k) const {
    Slot s{};
    s.g = ggsw + 2 * static_cast<int64_t>(k);
    s.per_ggsw = per_ggsw;
    s.cols = cols;
    s.subsets = subsets;
    s.m = m;
    const int64_t e = exps[k], mask = 4 * static_cast<int64_t>(m) - 1;  // 2N - 1
#pragma unroll
    for (int u = 1; u < (1 << kTfheMaxGrouping); ++u)
      s.mono[u] = u < subsets ? tfhe_load_complex(roots + 2 * ((e * rot[u]) & mask)) : TfheComplex{0.0, 0.0};
    return s;
  }
};

// Complex values of one GGSW of the key: (k1, level, k1, M).
FT_HD int64_t tfhe_fourier_ggsw_values(const TfheTorusGgsw& g) {
  return static_cast<int64_t>(g.k1) * g.level * g.k1 << (g.f.log_n - 1);
}

// The bundle of group j, its subset rotations in rot.
FT_HD TfheFourierBundle tfhe_fourier_key_bundle(const FourierRotateArgs& a, int j, const int32_t* rot) {
  TfheFourierBundle k{};
  k.subsets = 1 << a.grouping;
  k.per_ggsw = tfhe_fourier_ggsw_values(a.g);
  k.ggsw = a.bsk + 2 * static_cast<int64_t>(j) * k.subsets * k.per_ggsw;
  k.roots = a.roots;
  k.exps = a.exps;
  k.rot = rot;
  k.cols = a.g.k1;
  k.m = 1u << (a.g.f.log_n - 1);
  return k;
}

// Group j of ciphertext b: acc := K x acc on the torus, in place (the digits of acc into the folded
// rows of s, the FFT product with the bundle, each output coefficient rounded into acc). rot: 2^G
// words of the team's memory. (The CUDA register kernel reads bundles made ahead instead: the same
// values, tfhe_fourier_bundle_slots.)
template <int MAXC = kTfheMaxK1, class T>
FT_HD void tfhe_team_fourier_multi_bit_step(const T& t, const FourierRotateArgs& a, int64_t b, int j, int64_t* acc,
                                            double* s, int32_t* rot) {
  const TfheTorusGgsw& g = a.g;
  const int log_n = g.f.log_n, log_m = log_n - 1;
  const uint32_t m = 1u << log_m, n = 2u * m;
  const int bits = g.base_log * g.level;
  const uint32_t k1n = static_cast<uint32_t>(g.k1) * n;
  tfhe_team_fourier_subset_rotations(t, a, b, j, rot);
  for (uint32_t e = static_cast<uint32_t>(t.rank); e < k1n; e += static_cast<uint32_t>(t.size)) {
    const uint32_t p = e >> log_n, c = e & (n - 1u);
    uint64_t v = tfhe_torus_round(acc[e], bits);
    const uint32_t slot = tfhe_fft_slot(c & (m - 1u)) + (c >= m ? m : 0u);
    for (int i = g.level - 1; i >= 0; --i) {
      const int32_t d = tfhe_next_digit(v, g.base_log);
      s[(static_cast<int64_t>(2 * (static_cast<int>(p) * g.level + i)) << log_m) + slot] = static_cast<double>(d);
    }
  }
  t.sync();  // the digits and rot are complete; every read of acc is done
  tfhe_team_fft_rows_product<MAXC>(t, g.f, tfhe_fourier_key_bundle(a, j, rot), g.k1 * g.level, g.k1, s);
  for (int p = 0; p < g.k1; ++p) tfhe_fft_store_row(t, g.f, s, p, acc + (static_cast<int64_t>(p) << log_n));
  t.sync();
}

// The whole multi-bit blind rotation of ciphertext b by one team (acc, s as
// tfhe_team_fourier_blind_rotate's; rot 2^G words).
template <int MAXC = kTfheMaxK1, class T>
FT_HD void tfhe_team_fourier_multi_bit_blind_rotate(const T& t, const FourierRotateArgs& a, int64_t b, int64_t* acc,
                                                    double* s, int32_t* rot) {
  tfhe_team_fourier_rotate_init(t, a, b, acc);
  for (int j = 0; j < a.n / a.grouping; ++j) tfhe_team_fourier_multi_bit_step<MAXC>(t, a, b, j, acc, s, rot);
  tfhe_team_fourier_rotate_finish(t, a, b, acc);
}

// Slots k0, k0 + stride, ... of the bundle of group j into out (k1, level, k1, M) complex: entry
// (r, c) at slot k is TfheFourierBundle's at(r, c) (rot: the group's subset rotations,
// tfhe_team_fourier_subset_rotations).
FT_HD void tfhe_fourier_bundle_slots(const FourierRotateArgs& a, int j, const int32_t* rot, int64_t k0, int64_t stride,
                                     double* out) {
  const TfheFourierBundle key = tfhe_fourier_key_bundle(a, j, rot);
  const int64_t m = key.m, entries = tfhe_fourier_ggsw_values(a.g) / m;
  for (int64_t k = k0; k < m; k += stride) {
    const TfheFourierBundle::Slot sl = key.slot(static_cast<uint32_t>(k));
    for (int64_t rc = 0; rc < entries; ++rc) {
      const TfheComplex v = sl.at(static_cast<int>(rc / key.cols), static_cast<int>(rc % key.cols));
      out[2 * (rc * m + k)] = v.re;
      out[2 * (rc * m + k) + 1] = v.im;
    }
  }
}

}  // namespace fhetorch
