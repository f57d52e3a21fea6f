// ModUp on the GPU, for mod_up and mod_up_keyswitch_inner (CPU oracle: csrc/cpu/keyswitch.cpp;
// semantics: csrc/bind/schema.cpp), as a pipeline of block programs (program.cuh) over the
// whole batch:
//  1. the inverse NTT of the level, first phase: its load reads the input (a, or a1 * b1 in
//     tensor-product mode) and, for mod_up, also copies it to the digits' own rows of the
//     output; last phase with the per-limb BConv constants as post factor;
//  2. one BConv launch for every (ciphertext, digit), writing straight into the lifted rows;
//  3. the forward NTT's two phases over exactly the converted rows: a row map enumerates
//     (ciphertext, digit j, ext limb i) for i outside digit j, in an order that reads first what
//     the launch before wrote last (L2).
// mod_up writes the lifted digits in full (B, beta, Lext, N); mod_up_keyswitch_inner keeps
// only the converted rows (compact) and ends with the inner product (keyswitch_inner.cuh).
// Values between phases are lazy ([0, 2q)) exactly as in ntt_core.cuh; every store of a
// result is canonical, so outputs equal the CPU's bit for bit. Ext limb i reads row
// table_row(psi_rows, i) of psi_ext / psi_inv_ext (csrc/table_rows.h).
#pragma once
#include <cstdint>

#include "../keyswitch.h"
#include "bconv_core.cuh"
#include "ntt_core.cuh"
#include "program.cuh"

namespace fhetorch::cuda {

using ntt_detail::Ctx;
using ntt_detail::mont_lazy;
using ntt_detail::NttPhase;
using ntt_detail::reduce_2q;
using ntt_detail::row_ctx;

struct MuArgs {
  ModUpArgs g;
  int32_t* t;         // (B, L, N) INTT outputs, standard form
  int32_t* d;         // lifted digits: full (B, beta, Lext, N), or compact (B, conv rows, N)
  int32_t* copy_own;  // mod_up: the full output, whose digits' own rows are the input's; else null
  int Lext, compact;
  BcGrid grid;
  KeyArgs key;        // mod_up_keyswitch_inner: the key and addend
  int32_t* out;       // mod_up_keyswitch_inner: (B, 2, Lext, N); else null
  int ks_lo, ks_hi;   // the key product's ext limbs [ks_lo, ks_hi) (a key switch runs it in two parts)
  int64_t ks_cap;     // > 0: the key product's grid, its blocks striding over the work
  // The row maps' divisors (mu_set_divisors): B, beta, beta - 1, the converted rows per level
  // limb ((beta - 1) B) and per special limb (beta B), and per ciphertext.
  Divisor by_B, by_beta, by_beta_m1, by_level_rows, by_special_rows, by_conv_rows;
};

inline void mu_set_divisors(MuArgs& a) {
  const int64_t B = a.g.B, beta = a.g.beta;
  a.by_B = Divisor(B);
  a.by_beta = Divisor(beta);
  a.by_beta_m1 = Divisor(beta > 1 ? beta - 1 : 1);
  a.by_level_rows = Divisor(beta > 1 ? (beta - 1) * B : 1);
  a.by_special_rows = Divisor(beta * B);
  a.by_conv_rows = Divisor(beta * a.Lext - a.g.L > 0 ? beta * a.Lext - a.g.L : 1);
}

FT_HD int mu_own_digit(const MuArgs& a, int i) {
  int j = 0;
  while (j + 1 < a.g.beta && i >= a.g.lo[j + 1]) ++j;
  return j;
}
FT_HD int64_t mu_conv_rows(const MuArgs& a) { return static_cast<int64_t>(a.g.beta) * a.Lext - a.g.L; }
// Converted rows are enumerated digit by digit, ext limbs in order, skipping the digit's own:
// digit j starts at j * Lext - lo[j], and limb i outside it is row j Lext + i - lo[j] below the
// digit, - lo[j + 1] above it (a select, no branch: the key product's loads stay together).
FT_HD int64_t mu_conv_index(const MuArgs& a, int j, int i) {
  const int lo = a.g.lo[j], hi = a.g.lo[j + 1];
  return static_cast<int64_t>(j) * a.Lext + i - (i >= hi ? hi : lo);
}
// The NTT of the converted rows visits them limb by limb (every ciphertext and digit of ext
// limb i together), so that the blocks in flight share limb i's twiddle table in L2: launch
// row r -> (ciphertext bb, digit j, ext limb i). A level limb has a row in every digit but its
// own, a special limb in every digit.
FT_HD void mu_conv_row(const MuArgs& a, int64_t r, int64_t& bb, int& j, int& i) {
  const int64_t B = a.g.B, beta = a.g.beta, L = a.g.L, level_rows = L * (beta - 1) * B;
  if (r < level_rows) {
    i = static_cast<int>(a.by_level_rows.div(r));
    const int64_t rem = r - i * (beta - 1) * B;
    bb = a.by_beta_m1.div(rem);
    const int jj = static_cast<int>(rem - bb * (beta - 1)), own = mu_own_digit(a, i);
    j = jj < own ? jj : jj + 1;
  } else {
    const int64_t rest = r - level_rows, k = a.by_special_rows.div(rest), rem = rest - k * beta * B;
    i = static_cast<int>(L + k);
    bb = a.by_beta.div(rem);
    j = static_cast<int>(rem - bb * beta);
  }
}
// Row of d holding digit j, ext limb i of ciphertext bb.
FT_HD int64_t mu_drow(const MuArgs& a, int64_t bb, int j, int i) {
  if (a.compact) return bb * mu_conv_rows(a) + mu_conv_index(a, j, i);
  return (bb * a.g.beta + j) * a.Lext + i;
}

// 4 values at x..x+3 of a row read through the automorphism X -> X^galois: row[src(x + m)].
FT_HD int4 rotated4(const int32_t* row, int x, uint32_t galois, int log_n) {
  int4 r;
#pragma unroll
  for (int m = 0; m < 4; ++m) elem(r, m) = ldg_rotated(row, static_cast<uint32_t>(x + m), galois, log_n);
  return r;
}

// 4 values of ciphertext bb's ModUp input at limb i, coefficients x..x+3: a[i] (ROT: read through
// the fused rotation), or a1[i] * b1[i].
template <bool ROT>
FT_HD int4 mu_input4(const MuArgs& a, int64_t bb, int i, int x, int64_t n, uint32_t q, uint32_t qinv) {
  const int64_t L = a.g.L;
  if (!a.g.b) {
    const int32_t* row = a.g.a + bb * a.g.a_stride + i * n;
    if constexpr (ROT) return rotated4(row, x, a.g.galois, a.g.log_n);
    return ldg4(row + x);
  }
  const int4 u = ldg4(a.g.a + ((2 * bb + 1) * L + i) * n + x), v = ldg4(a.g.b + bb * a.g.b_stride + (L + i) * n + x);
  int4 r;
#pragma unroll
  for (int m = 0; m < 4; ++m)
    elem(r, m) = static_cast<int32_t>(
        reduce_2q(mont_lazy(static_cast<uint32_t>(elem(u, m)), static_cast<uint32_t>(elem(v, m)), q, qinv), q));
  return r;
}

// INTT rows: (ciphertext, level limb), row r = bb * L + i. The first (small) phase reads the
// input itself (a[i], through the fused rotation with ROT, or a1[i] * b1[i] in tensor-product
// mode; for mod_up also copied to the digit's own row of the output); the last (large) phase
// multiplies by pre[i].
template <int LOG_N, bool LARGE, bool ROTATED = false>
struct MuInttRows {
  using Args = MuArgs;
  static constexpr bool LOAD = !LARGE, STORE = false, ROT = ROTATED && !LARGE;
  static constexpr int64_t N = int64_t(1) << LOG_N;
  FT_HD static int64_t rows(const Args& a) { return a.g.B * a.g.L; }
  FT_HD static Ctx row(const Args& a, int64_t r_launch, uint32_t* sm, int blk) {
    // limb-major launch order (every ciphertext's limb i together: one twiddle table in L2)
    const int64_t L = a.g.L, i64 = a.by_B.div(r_launch), bb = r_launch - i64 * a.g.B, r = bb * L + i64;
    const int i = static_cast<int>(i64);
    int32_t* t = a.t + r * N;
    Ctx c = row_ctx(sm, t, t, a.g.mod_ext, a.g.psi_inv_ext, i, table_row(a.g.psi_rows, i), N,
                    LARGE ? static_cast<uint32_t>(ldg(a.g.pre + i)) : 0u, blk);
    if (!LARGE) {
      if (!a.g.b) {
        c.in = a.g.a + bb * a.g.a_stride + i * N;
        c.gal = a.g.galois;
      } else {
        c.in = a.g.a + ((2 * bb + 1) * L + i) * N;
        c.in2 = a.g.b + bb * a.g.b_stride + (L + i) * N;
      }
      c.copy = a.copy_own ? a.copy_own + mu_drow(a, bb, mu_own_digit(a, i), i) * N : nullptr;
    }
    return c;
  }
};

// The converted rows of d, in place: (ciphertext, digit j, ext limb i outside digit j), limb by
// limb (mu_conv_row), or with DIGITS in the compact rows' own order (digit by digit, as the base
// conversion writes them; the first phase's twiddles are few, so it loses no table sharing).
template <int LOG_N, bool DIGITS = false>
struct MuConvRows {
  using Args = MuArgs;
  static constexpr bool LOAD = false, STORE = false, ROT = false;
  static constexpr int64_t N = int64_t(1) << LOG_N;
  FT_HD static int64_t rows(const Args& a) { return a.g.B * mu_conv_rows(a); }
  FT_HD static Ctx row(const Args& a, int64_t r, uint32_t* sm, int blk) {
    int64_t bb;
    int i, j;
    if (DIGITS) {
      bb = a.by_conv_rows.div(r);
      const int idx = static_cast<int>(r - bb * mu_conv_rows(a));
      j = 0;
      while (j + 1 < a.g.beta && idx >= (j + 1) * a.Lext - a.g.lo[j + 1]) ++j;
      i = idx - (j * a.Lext - a.g.lo[j]);
      if (i >= a.g.lo[j]) i += mod_up_size(a.g, j);
    } else {
      mu_conv_row(a, r, bb, j, i);
    }
    int32_t* row = a.d + mu_drow(a, bb, j, i) * N;
    return row_ctx(sm, row, row, a.g.mod_ext, a.g.psi_ext, i, table_row(a.g.psi_rows, i), N, 0u, blk);
  }
};

// ModUp's base conversion: group = (ciphertext bb, digit j); inputs t[bb][lo_j + k]; outputs
// o -> ext limb i = o < lo_j ? o : o + size_j, row mu_drow(bb, j, i); matrix row mats[j][i].
struct MuBcMap {
  using Args = MuArgs;
  static constexpr bool kConstTables = true;  // the context's ModUp matrices and moduli
  FT_HD static BcGrid grid(const Args& a) { return a.grid; }
  FT_HD static int groups(const Args& a) { return static_cast<int>(a.g.B * a.g.beta); }
  FT_HD static int64_t n(const Args& a) { return int64_t(1) << a.g.log_n; }
  FT_HD static bool vec(const Args&) { return true; }
  FT_HD static int digit(const Args& a, int g) { return static_cast<int>(a.by_beta.mod(g)); }
  FT_HD static int n_in(const Args& a, int g) { return mod_up_size(a.g, digit(a, g)); }
  FT_HD static int n_out(const Args& a, int g) { return a.Lext - n_in(a, g); }
  FT_HD static int out_limb(const Args& a, int g, int o) { return o < a.g.lo[digit(a, g)] ? o : o + n_in(a, g); }
  FT_HD static const int32_t* in_row(const Args& a, int g, int k) {
    return a.t + (a.by_beta.div(g) * a.g.L + a.g.lo[digit(a, g)] + k) * n(a);
  }
  FT_HD static const int32_t* in_mod(const Args& a, int g, int k) { return a.g.mod_ext + 2 * (a.g.lo[digit(a, g)] + k); }
  FT_HD static int32_t* out_row(const Args& a, int g, int o) {
    return a.d + mu_drow(a, a.by_beta.div(g), digit(a, g), out_limb(a, g, o)) * n(a);
  }
  FT_HD static const int32_t* out_mod(const Args& a, int g, int o) { return a.g.mod_ext + 2 * out_limb(a, g, o); }
  FT_HD static const int32_t* mat_row(const Args& a, int g, int o) {
    return a.g.mats + (static_cast<int64_t>(digit(a, g)) * a.Lext + out_limb(a, g, o)) * a.g.alpha_max;
  }
};

// Steps 1-3 for every ciphertext of the batch (a.t, a.d set by the caller).
template <int LOG_N, class Exec>
cudaError_t mod_up_pipeline(Exec& ex, MuArgs& a) {
  int widest = 0, narrowest = a.g.L;
  for (int j = 0; j < a.g.beta; ++j) {
    widest = mod_up_size(a.g, j) > widest ? mod_up_size(a.g, j) : widest;
    narrowest = mod_up_size(a.g, j) < narrowest ? mod_up_size(a.g, j) : narrowest;
  }
  a.grid = bconv_grid(a.g.B * a.g.beta, int64_t(1) << LOG_N, a.Lext - narrowest);
  // the first phase reads the input: through the fused rotation in a build of its own
  if (a.g.galois) FT_TRY((ex.template run<NttPhase<LOG_N, false, true, MuInttRows<LOG_N, false, true>>>(a)));
  else FT_TRY((ex.template run<NttPhase<LOG_N, false, true, MuInttRows<LOG_N, false>>>(a)));
  FT_TRY((ex.template run<NttPhase<LOG_N, true, true, MuInttRows<LOG_N, true>>>(a)));
  if (mu_conv_rows(a) == 0) return cudaSuccess;
  FT_TRY((run_bconv<MuBcMap>(ex, a, widest, a.Lext - narrowest)));
  // The converted rows (~50 MB at 48 x 12, the L2's size) go through three launches in orders that
  // read first what the launch before wrote last: the first phase in the reverse of the compact order
  // (the conversion's block order; the best of the orders measured), the second limb by limb from the
  // top, the key product from limb 0 (docs/benchmarks.md, session 36: ~10 % fewer DRAM bytes a key switch).
  FT_TRY((ex.template run<NttPhase<LOG_N, true, false, MuConvRows<LOG_N, true>, true>>(a)));
  return ex.template run<NttPhase<LOG_N, false, false, MuConvRows<LOG_N>, true>>(a);
}

// Scratch words run_mod_up needs: t, then (with a key) the compact converted rows.
inline int64_t mod_up_scratch_t(const ModUpArgs& g) { return g.B * g.L << g.log_n; }
inline int64_t mod_up_scratch_d(const ModUpArgs& g) {
  return g.B * (static_cast<int64_t>(g.beta) * (g.L + g.K) - g.L) << g.log_n;
}

}  // namespace fhetorch::cuda
