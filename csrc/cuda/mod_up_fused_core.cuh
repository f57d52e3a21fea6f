// ModUp's pipeline (mod_up_core.cuh) with its middle fused: after the inverse NTT's first
// (small) phase into t, ONE block program runs, per (ciphertext bb, digit j, column group, chunk of
// output limbs), the inverse large phase of the digit's limbs (times pre[i]), the base
// conversion to each output limb of the chunk and that limb's forward large phase, storing the
// converted rows d; the forward small phase over d then runs as before. The large phases and
// the conversion all act on the same coefficient positions (a column group: C adjacent columns
// of every limb), so t is read once and neither t nor d makes a round trip through memory
// between them, and two launches go. FHETORCH_FUSED_MODUP=0 runs the unfused steps (A/B
// timing); digits of more than kFusedMaxAlpha limbs always do.
//
// Design (L = 48, K = 12, 4 digits of 12 limbs, N = 2^16):
//  * Tile T = 2^(P + 3) words, C = 8 columns (P = LOG_N / 2 top bits): 8 adjacent words are one
//    32-byte sector for the strided column accesses, and the digit's inputs fit twice per SM:
//    12 input tiles + 1 exchange tile of 8 KB + the chunk's constants = 108 KB of dynamic shared
//    memory. Where P + 3 < 10 (N < 2^14), T = 2^10 (deposit() spreads a warp over 10 tile bits).
//  * The inverse's last round and the forward's first round pair the same top j bits, so one
//    thread holds the same 2^RT positions in both (RT = 4 at N = 2^16, threads = T / 16 = 128):
//    the inverse writes its inputs, centred once, to a thread-private slice of shared memory
//    (16-byte words per thread: conflict-free, read back with 16-byte loads), and the
//    conversion of an output limb feeds the forward butterflies in registers. Only the other
//    round of each phase goes through the exchange tile: 2 steps per input and output limb. A
//    second exchange tile would save half the barriers but not fit 2 blocks per SM.
//  * Output chunks: base = B * beta * N / T blocks (128 at B = 1); the outputs of a digit are
//    split into round(264 / base) chunks (2 blocks on each of 132 SMs): B = 1 -> 2 chunks of
//    24 outputs, 256 blocks; B = 2 -> 1 chunk of 48, 256 blocks: one wave. Each further chunk
//    re-reads its inputs (from L2) and redoes their inverse phase.
//  * __launch_bounds__(threads, 2): shared memory caps the blocks per SM at 2 anyway, so the
//    16 values, 4 accumulators and twiddles of a thread get up to 255 registers.
// Arithmetic: exactly the unfused steps' (ntt_core.cuh's butterflies; bconv_core.cuh's centred
// products, folds and smr), except that a converted value enters the forward NTT lazy,
// smr + q in (0, 2q), instead of canonical: d after the large phase is lazy either way and the
// small phase's canonical outputs are equal.
#pragma once
#include <cstdint>

#include "mod_up_core.cuh"

namespace fhetorch::cuda {

constexpr int kFusedMaxAlpha = 16;       // digit limbs a block holds (input tiles)
constexpr int kFusedMaxOuts = 64;        // output limbs of a chunk (staged constants)
constexpr int kFusedTargetBlocks = 264;  // 2 resident blocks on each of an H100's 132 SMs

// log2 of the fused tile: C = 8 columns of P = log_n / 2 bits, at least 2^10 words.
constexpr int mu_fused_log_t(int log_n) { return log_n / 2 + 3 > 10 ? log_n / 2 + 3 : 10; }

template <int LOG_N, int LA4>
struct MuFused {
  using Args = MuArgs;
  using G = ntt_detail::Geo<LOG_N, true, ntt_detail::kCap, mu_fused_log_t(LOG_N)>;
  static_assert(G::NROUNDS == 2, "a bottom and a top round per phase");
  static constexpr int T = G::T, THREADS = G::THREADS, MIN_BLOCKS = 2, SMEM = 0;
  static constexpr int KP = 4 * LA4;  // input tiles: the widest digit, padded to groups of 4
  static constexpr int RB = G::chunk_r(0), LOB = G::JPOS, XLOB = G::XPOS;  // bottom round
  static constexpr int RT = G::chunk_r(1), LOT = G::JPOS + G::chunk_lo(1), XLOT = G::XPOS + G::chunk_lo(1);
  static constexpr int E = 1 << RT;  // positions a thread holds in the top round
  static_assert((T >> RT) == THREADS && E % 4 == 0, "one top-round item of 4k positions per thread");
  static constexpr int64_t N = int64_t(1) << LOG_N;
  struct State {};
  struct Blk {
    int64_t bb;
    int j, col, o0, nout, nin;
    int32_t* in;     // KP thread-private input tiles: [k][u / 4][thread][u % 4], centred
    uint32_t* ex;    // the exchange tile (swz layout)
    int32_t* mat;    // [o][k] (k < KP, zeros past the digit) of the chunk's outputs
    int32_t* p;      // per output: p, pinv, 2^32 mod p centred
    int32_t* pinv;
    int32_t* r;
  };

  FT_HD static int64_t smem_words(int outs) { return int64_t(KP + 1) * T + int64_t(outs) * (KP + 3); }
  FT_HD static int64_t dyn_smem_bytes(const Args& a) { return 4 * smem_words(a.fgrid.outs); }
  FT_HD static int64_t blocks(const Args& a) {
    return a.g.B * a.g.beta * a.fgrid.cols * static_cast<int64_t>(a.fgrid.chunks);
  }
  // Block -> (group, column group, chunk), chunks adjacent: they read the same input tiles.
  FT_HD static Blk setup(const Args& a, int64_t block, uint32_t* sm) {
    const MuFusedGrid& f = a.fgrid;
    Blk b;
    const int64_t grp = block / (static_cast<int64_t>(f.cols) * f.chunks);
    const int rest = static_cast<int>(block - grp * f.cols * f.chunks);
    b.bb = grp / a.g.beta;
    b.j = static_cast<int>(grp % a.g.beta);
    b.col = rest / f.chunks;
    b.o0 = (rest % f.chunks) * f.outs;
    b.nin = mod_up_size(a.g, b.j);
    const int left = a.Lext - b.nin - b.o0;
    b.nout = left < f.outs ? left : f.outs;
    b.in = reinterpret_cast<int32_t*>(sm);
    b.ex = sm + KP * T;
    b.mat = reinterpret_cast<int32_t*>(b.ex + T);
    b.p = b.mat + f.outs * KP;
    b.pinv = b.p + f.outs;
    b.r = b.pinv + f.outs;
    return b;
  }
  // Per input limb k: bottom round (t -> exchange), top round (-> private tile k); per
  // output: conversion + top round (-> exchange), bottom round (-> d).
  FT_HD static int num_steps(const Args&, const Blk& b) { return b.nout > 0 ? 2 * (b.nin + b.nout) : 0; }
  FT_HD static void step(const Args& a, const Blk& b, int s, int tid, State&) {
    if (s < 2 * b.nin) {
      if (s == 0) stage(a, b, tid);
      const ntt_detail::Ctx c = in_ctx(a, b, s / 2);
      if (s & 1) invert_top(b, c, s / 2, tid);
      else invert_bottom(b, c, tid);
      return;
    }
    const int o = (s - 2 * b.nin) / 2;
    const ntt_detail::Ctx c = out_ctx(a, b, o);
    if (s & 1) forward_bottom(b, c, tid);
    else convert_top(b, c, o, tid);
  }

 private:
  FT_HD static int out_limb(const Blk& b, const Args& a, int o) {
    const int og = b.o0 + o;
    return og < a.g.lo[b.j] ? og : og + b.nin;
  }
  // Input k: limb lo_j + k of t, inverse tables, post factor pre.
  FT_HD static ntt_detail::Ctx in_ctx(const Args& a, const Blk& b, int k) {
    const int i = a.g.lo[b.j] + k;
    int32_t* t = a.t + (b.bb * a.g.L + i) * N;
    return ntt_detail::row_ctx(b.ex, t, t, a.g.mod_ext, a.g.psi_inv_ext, i, table_row(a.g.psi_rows, i), N,
                               static_cast<uint32_t>(ldg(a.g.pre + i)), b.col);
  }
  // Output o of the chunk: its converted row of d, forward tables.
  FT_HD static ntt_detail::Ctx out_ctx(const Args& a, const Blk& b, int o) {
    const int i = out_limb(b, a, o);
    int32_t* d = a.d + mu_drow(a, b.bb, b.j, i) * N;
    return ntt_detail::row_ctx(b.ex, d, d, a.g.mod_ext, a.g.psi_ext, i, table_row(a.g.psi_rows, i), N, 0u, b.col);
  }
  FT_HD static int32_t* in_slot(const Blk& b, int k, int ug, int it) { return b.in + k * T + (ug * THREADS + it) * 4; }

  // The chunk's matrix rows and output constants (read from step 2 on, after a barrier).
  FT_HD static void stage(const Args& a, const Blk& b, int tid) {
    const int outs = a.fgrid.outs;
    for (int idx = tid; idx < outs * KP; idx += THREADS) {
      const int o = idx / KP, k = idx % KP;
      const int64_t row = static_cast<int64_t>(b.j) * a.Lext + (o < b.nout ? out_limb(b, a, o) : 0);
      b.mat[idx] = o < b.nout && k < b.nin ? ldg(a.g.mats + row * a.g.alpha_max + k) : 0;
    }
    for (int o = tid; o < outs; o += THREADS) {
      const int32_t* pm = o < b.nout ? a.g.mod_ext + 2 * out_limb(b, a, o) : nullptr;
      b.p[o] = pm ? ldg(pm) : 1;
      b.pinv[o] = pm ? ldg(pm + 1) : 1;
      b.r[o] = pm ? two32_centred(b.p[o]) : 0;
    }
  }

  // One round of the large phase (I = 0: the bottom j bits, 1: the top) over the tile:
  // load(it, e0, x0, v) fills an item's 2^R values, the butterflies run in registers,
  // store(it, e0, x0, v) puts them away.
  template <bool INV, int I, class Load, class Store>
  FT_HD static void large_round(const ntt_detail::Ctx& c, int tid, Load&& load, Store&& store) {
    constexpr int R = G::chunk_r(I), LO = G::JPOS + G::chunk_lo(I), XLO = G::XPOS + G::chunk_lo(I);
    for (int it = tid; it < (T >> R); it += THREADS) {
      const int e0 = ntt_detail::deposit<G::LOG_T, LO, R>(it), x0 = G::x_of(e0, c.blk);
      uint32_t v[1 << R];
      load(it, e0, x0, v);
      ntt_detail::round_stage<LOG_N, INV, R, XLO, 0>(v, c, G::N + x0);
      store(it, e0, x0, v);
    }
  }

  // Input: t (lazy, after the small phase) -> bottom round -> exchange tile.
  FT_HD static void invert_bottom(const Blk& b, const ntt_detail::Ctx& c, int tid) {
    large_round<true, 0>(
        c, tid,
        [&](int, int, int x0, uint32_t* v) {
#pragma unroll
          for (int u = 0; u < (1 << RB); ++u) v[u] = static_cast<uint32_t>(ldg(c.in + x0 + (u << XLOB)));
        },
        [&](int, int e0, int, const uint32_t* v) {
#pragma unroll
          for (int u = 0; u < (1 << RB); ++u) b.ex[ntt_detail::swz(e0 | (u << LOB))] = v[u];
        });
  }
  // Input k: exchange -> top round -> times pre, canonical (t's value unfused), centred into
  // the thread's private tile k.
  FT_HD static void invert_top(const Blk& b, const ntt_detail::Ctx& c, int k, int tid) {
    large_round<true, 1>(
        c, tid,
        [&](int, int e0, int, uint32_t* v) {
#pragma unroll
          for (int u = 0; u < E; ++u) v[u] = b.ex[ntt_detail::swz(e0 | (u << LOT))];
        },
        [&](int it, int, int, const uint32_t* v) {
#pragma unroll
          for (int ug = 0; ug < E / 4; ++ug) {
            int4 w;
#pragma unroll
            for (int m = 0; m < 4; ++m) {
              const uint32_t y = ntt_detail::output_value<true, true, false>(c, v[4 * ug + m], 0, 0);
              elem(w, m) = centre(static_cast<int32_t>(y), static_cast<int32_t>(c.q));
            }
            st4(in_slot(b, k, ug, it), w);
          }
        });
  }
  // Output o: its conversion of the thread's positions -> top round -> exchange tile.
  FT_HD static void convert_top(const Blk& b, const ntt_detail::Ctx& c, int o, int tid) {
    large_round<false, 1>(
        c, tid, [&](int it, int, int, uint32_t* v) { convert(b, o, it, v); },
        [&](int, int e0, int, const uint32_t* v) {
#pragma unroll
          for (int u = 0; u < E; ++u) b.ex[ntt_detail::swz(e0 | (u << LOT))] = v[u];
        });
  }
  // Output: exchange -> bottom round -> d, lazy (as the unfused large phase stores it).
  FT_HD static void forward_bottom(const Blk& b, const ntt_detail::Ctx& c, int tid) {
    large_round<false, 0>(
        c, tid,
        [&](int, int e0, int, uint32_t* v) {
#pragma unroll
          for (int u = 0; u < (1 << RB); ++u) v[u] = b.ex[ntt_detail::swz(e0 | (u << LOB))];
        },
        [&](int, int, int x0, const uint32_t* v) {
#pragma unroll
          for (int u = 0; u < (1 << RB); ++u) c.out[x0 + (u << XLOB)] = static_cast<int32_t>(v[u]);
        });
  }

  // bconv_core.cuh's register path for output o at the thread's E positions: centred inputs
  // times the centred matrix row, a fold after every 4 products, smr; lazy result smr + p.
  FT_HD static void convert(const Blk& b, int o, int it, uint32_t* v) {
    int32_t m[KP];
#pragma unroll
    for (int g = 0; g < LA4; ++g) {
      const int4 m4 = *reinterpret_cast<const int4*>(b.mat + o * KP + 4 * g);
#pragma unroll
      for (int jj = 0; jj < 4; ++jj) m[4 * g + jj] = elem(m4, jj);
    }
    const int32_t p = b.p[o], pinv = b.pinv[o], r = b.r[o];
#pragma unroll
    for (int ug = 0; ug < E / 4; ++ug) {
      int64_t acc[4] = {0, 0, 0, 0};
#pragma unroll
      for (int g = 0; g < LA4; ++g) {
#pragma unroll
        for (int jj = 0; jj < 4; ++jj) {
          const int4 t = *reinterpret_cast<const int4*>(in_slot(b, 4 * g + jj, ug, it));
#pragma unroll
          for (int e = 0; e < 4; ++e) acc[e] = mad_wide(elem(t, e), m[4 * g + jj], acc[e]);
        }
#pragma unroll
        for (int e = 0; e < 4; ++e) acc[e] = fold(acc[e], r);
      }
#pragma unroll
      for (int e = 0; e < 4; ++e) v[4 * ug + e] = static_cast<uint32_t>(smr(acc[e], p, pinv)) + static_cast<uint32_t>(p);
    }
  }
};

// Whether the fused program takes this ModUp: digits of at most kFusedMaxAlpha limbs.
inline bool mu_fused_fits(int widest) { return widest >= 1 && widest <= kFusedMaxAlpha; }

// round(kFusedTargetBlocks / base) output chunks per digit, at most kFusedMaxOuts and at
// least 4 outputs each (every chunk redoes its inputs' inverse phase).
inline MuFusedGrid mu_fused_grid(const MuArgs& a, int max_out) {
  MuFusedGrid f;
  f.cols = 1 << (a.g.log_n - mu_fused_log_t(a.g.log_n));
  const int64_t base = a.g.B * a.g.beta * f.cols;
  int64_t ch = (2 * kFusedTargetBlocks + base) / (2 * base);
  const int64_t lo = (max_out + kFusedMaxOuts - 1) / kFusedMaxOuts, hi = (max_out + 3) / 4;
  ch = ch > hi ? hi : ch;
  ch = ch < lo ? lo : ch;
  if (ch < 1) ch = 1;
  f.outs = static_cast<int>((max_out + ch - 1) / ch);
  f.chunks = (max_out + f.outs - 1) / f.outs;
  return f;
}

// The fused program sized for digits of up to `widest` limbs.
template <int LOG_N, class Exec>
cudaError_t run_mu_fused(Exec& ex, const MuArgs& a, int widest) {
  if (widest <= 4) return ex.template run<MuFused<LOG_N, 1>>(a);
  if (widest <= 8) return ex.template run<MuFused<LOG_N, 2>>(a);
  if (widest <= 12) return ex.template run<MuFused<LOG_N, 3>>(a);
  return ex.template run<MuFused<LOG_N, 4>>(a);
}

// FHETORCH_FUSED_MODUP=0 runs the unfused steps (read once).
inline bool fused_mod_up_enabled() {
  static const bool on = env_switch_on("FHETORCH_FUSED_MODUP");
  return on;
}

// ModUp of every ciphertext of the batch (a.t, a.d set by the caller): step 1, then either the
// fused program or steps 2 and 3's first phase, then 3's second phase.
template <int LOG_N, class Exec>
cudaError_t mod_up_pipeline(Exec& ex, MuArgs& a) {
  int widest = 0, narrowest = a.g.L;
  for (int j = 0; j < a.g.beta; ++j) {
    widest = mod_up_size(a.g, j) > widest ? mod_up_size(a.g, j) : widest;
    narrowest = mod_up_size(a.g, j) < narrowest ? mod_up_size(a.g, j) : narrowest;
  }
  FT_TRY((ex.template run<NttPhase<LOG_N, false, true, MuInttRows<LOG_N, false>>>(a)));
  if (a.fused && mu_fused_fits(widest)) {
    if (mu_conv_rows(a) == 0) return cudaSuccess;
    a.fgrid = mu_fused_grid(a, a.Lext - narrowest);
    FT_TRY((run_mu_fused<LOG_N>(ex, a, widest)));
  } else {
    FT_TRY((ex.template run<NttPhase<LOG_N, true, true, MuInttRows<LOG_N, true>>>(a)));
    if (mu_conv_rows(a) == 0) return cudaSuccess;
    a.grid = bconv_grid(a.g.B * a.g.beta, int64_t(1) << LOG_N, a.Lext - narrowest);
    FT_TRY((run_bconv<MuBcMap>(ex, a, widest)));
    FT_TRY((ex.template run<NttPhase<LOG_N, true, false, MuConvRows<LOG_N>>>(a)));
  }
  return ex.template run<NttPhase<LOG_N, false, false, MuConvRows<LOG_N>>>(a);
}

}  // namespace fhetorch::cuda
