// The whole key switch in one op (keyswitch; CPU: csrc/cpu/keyswitch.cpp; semantics:
// csrc/bind/schema.cpp): ModUp (mod_up_core.cuh), the key product (keyswitch_inner_core.cuh) into
// u (B, 2, Lext, N), then switch_modulus (switch_modulus_core.cuh) of u.
//
// Why one op: ModDown's first launches (two INTT phases of the dropped rows, the conversion, the
// first NTT phase: small grids, latency-bound) read only u's dropped rows, the special primes
// (and with a rescale the level's top prime), which are the top ext limbs. The key product is
// therefore run in two parts: first the dropped rows, then, beside ModDown's first launches on a
// second stream (`side`), the kept rows, a DRAM-bound launch of ~4/5 of the bytes. Only ModDown's
// last phase, which reads the kept rows, waits for both. The kept rows' key product runs on a grid
// of kKeptProductBlocksPerSm blocks an SM, each striding over its work, so that it leaves room on
// every SM for ModDown's blocks: uncapped, its 4 blocks an SM took the SMs and ModDown waited
// behind it (no gain); with 2 an SM, HRot and HMult at 48 x 12 take ~10 us less on an H200
// (docs/benchmarks.md, session 37: 1, 1.5, 1.75, 2.25, 2.5 and a high-priority side stream were
// slower).
#pragma once
#include <cstdint>

#include "keyswitch_inner_core.cuh"
#include "switch_modulus_core.cuh"

namespace fhetorch::cuda {

constexpr int kKeptProductBlocksPerSm = 2;

// A second stream for run_keyswitch on the host executor: the same one (the launches in the order
// they are enqueued, which is a valid order of the two streams' work).
template <class Exec>
struct SameStream {
  Exec& ex;
  cudaError_t begin() { return cudaSuccess; }
  cudaError_t end() { return cudaSuccess; }
  template <class P>
  cudaError_t run(const typename P::Args& a) {
    return ex.template run<P>(a);
  }
};

// The first ext limb of the dropped rows when they are the top ones ([lo, Lext)), else 0 (no split).
inline int keyswitch_split(const SwitchArgs& s) {
  int lo = s.Ls;
  for (int k = 0; k < s.D; ++k) lo = s.drop[k] < lo ? s.drop[k] : lo;
  return s.Ls - lo == s.D ? lo : 0;
}

// u = mod_up_keyswitch_inner(g, key), out = switch_modulus(s) with s.x = u. side: begin() makes it
// wait for what ex has enqueued, end() makes ex wait for what it has; split: whether the key
// product runs in two parts beside ModDown (false: one launch, then ModDown, all on ex); cap > 0:
// the grid of the kept rows' key product.
template <class Exec, class Side>
cudaError_t run_keyswitch(Exec& ex, Side& side, const ModUpArgs& g, const KeyArgs& key, const SwitchArgs& s,
                          int32_t* u, int32_t* out, int32_t* t, int32_t* d, int32_t* st, int32_t* sy, bool split,
                          int64_t cap = 0) {
  if (g.B <= 0) return cudaSuccess;
  const int Lext = g.L + g.K;
  if (!table_rows_fit(g.psi_rows, Lext) || !sw_tables_fit(s) || s.x != u || s.B != 2 * g.B || s.Ls != Lext ||
      s.log_n != g.log_n)
    return cudaErrorInvalidValue;
  const MuArgs a = mu_args(g, &key, u, t, d);
  const SwArgs sa = sw_args(s, out, st, sy);
  const int lo = split ? keyswitch_split(s) : 0;
  return dispatch_log_n(g.log_n, [&](auto log_n) {
    constexpr int LOG_N = decltype(log_n)::value;
    MuArgs m = a;
    FT_TRY((mod_up_pipeline<LOG_N>(ex, m)));
    if (lo == 0) {
      FT_TRY((run_key_product<LOG_N>(ex, m)));
      FT_TRY((run_switch_front<LOG_N>(ex, sa)));
      return run_switch_back<LOG_N>(ex, sa);
    }
    MuArgs top = m, rest = m;
    top.ks_lo = lo;
    rest.ks_hi = lo;
    rest.ks_cap = cap;
    FT_TRY(side.begin());
    FT_TRY((run_key_product<LOG_N>(side, top)));
    FT_TRY((run_switch_front<LOG_N>(side, sa)));
    FT_TRY((run_key_product<LOG_N>(ex, rest)));
    FT_TRY(side.end());
    return run_switch_back<LOG_N>(ex, sa);
  });
}

}  // namespace fhetorch::cuda
