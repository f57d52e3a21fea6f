// switch_modulus on the GPU (rescale, ModDown, both; CPU oracle: csrc/cpu/keyswitch.cpp;
// semantics: csrc/bind/schema.cpp) as a pipeline of block programs (program.cuh) over all B
// polynomials: the inverse NTT's first phase reads the dropped rows of x itself, its last
// phase multiplies by pre; one BConv launch; the forward NTT, whose last phase combines
// x[keep] * c_keep + ntt * c_sub (+ addend) in its store and runs over the rows in reverse
// order (the rows the first phase wrote last are read first, while they are still in L2). Values between phases are lazy
// ([0, 2q)) as in ntt_core.cuh; the stored results are canonical. Dropped limb k and
// destination limb i read the twiddle rows table_row(psi_inv_drop_rows, k) and
// table_row(psi_dst_rows, i) (csrc/table_rows.h).
#pragma once
#include <cstdint>

#include "../keyswitch.h"
#include "bconv_core.cuh"
#include "ntt_core.cuh"
#include "program.cuh"

namespace fhetorch::cuda {

struct SwArgs {
  SwitchArgs g;
  int32_t* t;    // (B, D, N) scratch
  int32_t* y;    // (B, Ld, N) scratch
  int32_t* out;  // (B, Ld, N)
  BcGrid grid;
  Divisor by_B, by_K;  // g.B, g.K
};

// The dropped rows (polynomial p, dropped limb k), row r = p * D + k, into t: the first
// (small) inverse phase reads them from x, the last (large) one multiplies by pre[k].
template <int LOG_N, bool LARGE>
struct SwDropRows {
  using Args = SwArgs;
  static constexpr bool LOAD = false, STORE = false, ROT = false;
  static constexpr int64_t N = int64_t(1) << LOG_N;
  FT_HD static int64_t rows(const Args& a) { return a.g.B * a.g.D; }
  FT_HD static ntt_detail::Ctx row(const Args& a, int64_t r_launch, uint32_t* sm, int blk) {
    // limb-major launch order (every polynomial's limb k together: one twiddle table in L2)
    const int64_t k64 = a.by_B.div(r_launch), p = r_launch - k64 * a.g.B, r = p * a.g.D + k64;
    const int k = static_cast<int>(k64);
    int32_t* t = a.t + r * N;
    const int32_t* in = LARGE ? t : a.g.x + (p * a.g.Ls + a.g.drop[k]) * N;
    return ntt_detail::row_ctx(sm, in, t, a.g.mod_drop, a.g.psi_inv_drop, k, table_row(a.g.psi_inv_drop_rows, k), N,
                               LARGE ? static_cast<uint32_t>(ldg(a.g.pre + k)) : 0u, blk);
  }
};

// The converted rows y (polynomial p, destination limb i), row r = p * Ld + i, forward: the
// last (small) phase stores out = x[keep] * c_keep + ntt * c_sub (+ addend, or the addend
// rotated with ROTATED: automorphism(addend, galois), a build of its own).
template <int LOG_N, bool LARGE, bool ROTATED = false>
struct SwDstRows {
  using Args = SwArgs;
  static constexpr bool LOAD = false, STORE = !LARGE, ROT = ROTATED && !LARGE;
  static constexpr int64_t N = int64_t(1) << LOG_N;
  FT_HD static int64_t rows(const Args& a) { return a.g.B * a.g.Ld; }
  FT_HD static ntt_detail::Ctx row(const Args& a, int64_t r_launch, uint32_t* sm, int blk) {
    // limb-major, as SwDropRows
    const int64_t i64 = a.by_B.div(r_launch), p = r_launch - i64 * a.g.B, r = p * a.g.Ld + i64;
    const int i = static_cast<int>(i64);
    ntt_detail::Ctx c = ntt_detail::row_ctx(sm, a.y + r * N, (LARGE ? a.y : a.out) + r * N, a.g.mod_dst, a.g.psi_dst,
                                            i, table_row(a.g.psi_dst_rows, i), N, 0u, blk);
    if (!LARGE) {
      const int64_t pk = a.by_K.div(p), k = p - pk * a.g.K;
      const int kr = a.g.keep[i];
      c.keep = kr >= 0 ? a.g.x + (p * a.g.Ls + kr) * N : nullptr;
      c.add = a.g.addend && k < a.g.Ka ? a.g.addend + ((pk * a.g.Ka + k) * a.g.Ld + i) * N : nullptr;
      c.gal = a.g.galois;  // ROT: the addend read through the fused rotation
      c.ck = static_cast<uint32_t>(ldg(a.g.c_keep + i));
      c.cs = static_cast<uint32_t>(ldg(a.g.c_sub + i));
    }
    return c;
  }
};

// switch_modulus's base conversion: group = polynomial p; inputs t[p][k]; outputs y[p][o].
struct SwBcMap {
  using Args = SwArgs;
  static constexpr bool kConstTables = true;  // the context's switch matrix and moduli
  FT_HD static BcGrid grid(const Args& a) { return a.grid; }
  FT_HD static int groups(const Args& a) { return static_cast<int>(a.g.B); }
  FT_HD static int64_t n(const Args& a) { return int64_t(1) << a.g.log_n; }
  FT_HD static bool vec(const Args&) { return true; }
  FT_HD static int n_in(const Args& a, int) { return a.g.D; }
  FT_HD static int n_out(const Args& a, int) { return a.g.Ld; }
  FT_HD static const int32_t* in_row(const Args& a, int p, int k) { return a.t + (static_cast<int64_t>(p) * a.g.D + k) * n(a); }
  FT_HD static const int32_t* in_mod(const Args& a, int, int k) { return a.g.mod_drop + 2 * k; }
  FT_HD static int32_t* out_row(const Args& a, int p, int o) { return a.y + (static_cast<int64_t>(p) * a.g.Ld + o) * n(a); }
  FT_HD static const int32_t* out_mod(const Args& a, int, int o) { return a.g.mod_dst + 2 * o; }
  FT_HD static const int32_t* mat_row(const Args& a, int, int o) { return a.g.mat + static_cast<int64_t>(o) * a.g.D; }
};

// Scratch words run_switch_modulus needs: t, then y.
inline int64_t switch_scratch_t(const SwitchArgs& g) { return g.B * g.D << g.log_n; }
inline int64_t switch_scratch_y(const SwitchArgs& g) { return g.B * g.Ld << g.log_n; }

inline SwArgs sw_args(const SwitchArgs& g, int32_t* out, int32_t* t, int32_t* y) {
  return SwArgs{g, t, y, out, bconv_grid(g.B, int64_t(1) << g.log_n, g.Ld), Divisor(g.B), Divisor(g.K > 0 ? g.K : 1)};
}
inline bool sw_tables_fit(const SwitchArgs& g) {
  return table_rows_fit(g.psi_inv_drop_rows, g.D) && table_rows_fit(g.psi_dst_rows, g.Ld);
}

// Every launch but the last: they read only the dropped rows of x (a key switch runs them beside
// the key product of the kept rows: csrc/cuda/keyswitch_core.cuh).
template <int LOG_N, class Exec>
cudaError_t run_switch_front(Exec& ex, const SwArgs& a) {
  using ntt_detail::NttPhase;
  FT_TRY((ex.template run<NttPhase<LOG_N, false, true, SwDropRows<LOG_N, false>>>(a)));
  FT_TRY((ex.template run<NttPhase<LOG_N, true, true, SwDropRows<LOG_N, true>>>(a)));
  FT_TRY((run_bconv<SwBcMap>(ex, a, a.g.D, a.g.Ld)));
  return ex.template run<NttPhase<LOG_N, true, false, SwDstRows<LOG_N, true>>>(a);
}

// The last launch, which reads the kept rows of x: in reverse order, it reads first the rows the
// phase before wrote last (L2).
template <int LOG_N, class Exec>
cudaError_t run_switch_back(Exec& ex, const SwArgs& a) {
  using ntt_detail::NttPhase;
  if (a.g.galois && a.g.addend)
    return ex.template run<NttPhase<LOG_N, false, false, SwDstRows<LOG_N, false, true>, true>>(a);
  return ex.template run<NttPhase<LOG_N, false, false, SwDstRows<LOG_N, false>, true>>(a);
}

template <class Exec>
cudaError_t run_switch_modulus(Exec& ex, const SwitchArgs& g, int32_t* out, int32_t* t, int32_t* y) {
  if (g.B <= 0) return cudaSuccess;
  if (!sw_tables_fit(g)) return cudaErrorInvalidValue;
  const SwArgs a = sw_args(g, out, t, y);
  return dispatch_log_n(g.log_n, [&](auto log_n) {
    constexpr int LOG_N = decltype(log_n)::value;
    FT_TRY((run_switch_front<LOG_N>(ex, a)));
    return run_switch_back<LOG_N>(ex, a);
  });
}

}  // namespace fhetorch::cuda
