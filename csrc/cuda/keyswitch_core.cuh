// Fused key-switching kernels (CUDA; CPU oracle: csrc/bind/cpu.cpp's compositions of the
// csrc/cpu kernels). Launchers: keyswitch.cu; semantics: csrc/bind/schema.cpp.
//
// Each kernel is a "program": a struct P with
//   Args       the launch parameters (passed by value, __grid_constant__; they hold the small
//              host tables: digit bounds, dropped / kept rows);
//   Blk        per-block state computed once by P::setup(args, block, smem);
//   State      per-thread registers that live across steps (the key-switching accumulators);
//   THREADS, SMEM (32-bit words of static shared memory), P::blocks(args);
//   num_steps(args, blk) and step(args, blk, s, tid, state): a __syncthreads() separates
//   consecutive steps. Everything is __host__ __device__, so the pipelines below run
//   unchanged under a host emulation (one thread after another, step by step), which is how
//   they are checked against the CPU kernels without a GPU.
//
// Pipelines (templates on an executor: the CUDA launcher or the emulation):
//  * mod_up: INTT of the level (one launch, per-limb BConv constants as the post factor;
//    csrc/cuda/ntt_core.cuh's phases), one BConv launch for every digit writing straight into
//    the lifted rows, then the forward NTT's two phases over exactly the converted rows (a row
//    map: (digit j, ext limb i) for i outside digit j); the last phase copies the digit's own
//    rows of a.
//  * mod_up_keyswitch: the same up to the first forward phase; then either (MuKsAll, beta <= 4,
//    FHETORCH_KS_KERNEL=tiles)
//    the last phase of the forward NTT runs per (ext limb i, tile) on every digit's tile at
//    once and, instead of storing the lifted digits, accumulates sum_j d_j[i] * key_j[c][i]
//    (Cheddar-style fusion), adds addend * c_add, and stores only the two output polynomials;
//    or (the default, see kKsSplitDefault) the last phase finishes the converted rows in place
//    and KsStream forms the same sums. Tensor-product mode (HMult) computes a1 * b1 in
//    the INTT's load and (a0 b0, a0 b1 + a1 b0) in the epilogue.
//  * switch_modulus: the inverse NTT's first phase gathers the dropped rows of x itself; BConv;
//    forward NTT whose last phase combines x[keep] * c_keep + ntt * c_sub (+ addend) in its
//    store.
// Values between phases are lazy ([0, 2q)) exactly as in ntt_core.cuh; every store of a
// result is canonical, so outputs equal the CPU's bit for bit.
#pragma once
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include "bconv_core.cuh"
#include "kernels.h"  // kMaxDigits, kMaxSwitchRows
#include "ntt_core.cuh"

namespace fhetorch::cuda::ks_detail {

static_assert(kMaxSwitchRows <= ntt_detail::kMaxTwRows, "a switch's row maps fit a TwRows");

using ntt_detail::Ctx;
using ntt_detail::mont_lazy;
using ntt_detail::reduce_2q;
using ntt_detail::swz;

constexpr int kCap = 4;  // as ntt.cu: rounds of up to 4 stages

template <int LOG_N, bool LARGE>
using Geo = ntt_detail::Geo<LOG_N, LARGE, kCap>;

// Occupancy targets (__launch_bounds__'s second argument; without a target ptxas may take up
// to 255 registers): NTT phases 64 registers per thread, as ntt.cu's kernels get.
constexpr int phase_min_blocks(int threads) { return threads >= 1024 ? 1 : 1024 / threads; }



// limb: the row of mod; tw_row: the row of the twiddle table tw (the same unless the
// tables are the ring's, indexed through a row map).
FT_HD Ctx row_ctx(uint32_t* sm, const int32_t* in, int32_t* out, const int32_t* mod, const int32_t* tw, int limb,
                  int tw_row, int64_t n, uint32_t post, int blk) {
  Ctx c;
  c.sm = sm;
  c.in = in;
  c.out = out;
  c.tw = tw + static_cast<int64_t>(tw_row) * n;
  c.q = static_cast<uint32_t>(ldg(mod + 2 * limb));
  c.nqinv = 0u - static_cast<uint32_t>(ldg(mod + 2 * limb + 1));
  c.post = post;
  c.blk = blk;
  c.in_vec = c.out_vec = c.tw_vec = true;  // launchers pass 16-byte aligned rows, N % 4 == 0
  return c;
}

FT_HD uint32_t add_2q(uint32_t a, uint32_t b, uint32_t q) { return reduce_2q(a + b, q); }  // a, b < q

// ---- mod_up / mod_up_keyswitch ---------------------------------------------------------

struct MuArgs {
  const int32_t* a;     // (L, N) NTT domain; (2, L, N) when b is set
  const int32_t* b;     // tensor-product mode: (2, L, N); ModUp input a1 * b1, addend (a0 b0, a0 b1 + a1 b0)
  int32_t* t;           // (L, N) INTT outputs, standard form
  int32_t* d;           // lifted digits: (beta, Lext, N), or compact (the converted rows only)
  const int32_t* mod;   // ext (Lext, 2)
  const int32_t* psi;      // ext (Lext, N)
  const int32_t* psi_inv;  // ext (Lext, N)
  const int32_t* pre;      // (L,) INTT post-constants
  const int32_t* mats;     // (beta, Lext, amax)
  const int32_t* key_q;  // (digits, 2, Lq_key, N)
  const int32_t* key_p;  // (digits, 2, K, N)
  int32_t* out;          // (2, Lext, N)
  const int32_t* addend;  // (2, La, N) or null
  const int32_t* c_add;   // (La,)
  int L, Lext, amax, beta, Lq_key, q_start, digit_start, La;
  int compact;
  int ks_split;  // mod_up_keyswitch: finish the NTT, then KsStream (instead of MuKsAll)
  int bc_tiles, bc_chunks, bc_outs;  // BConv grid: coefficient tiles, output chunks, outputs per chunk
  int lo[kMaxDigits + 1];
  ntt_detail::TwRows psi_rows;  // the psi / psi_inv rows of the ext limbs
};

FT_HD int mu_tw(const MuArgs& a, int i) { return ntt_detail::tw_row(a.psi_rows, i); }

FT_HD int mu_size(const MuArgs& a, int j) { return a.lo[j + 1] - a.lo[j]; }
FT_HD bool mu_own(const MuArgs& a, int j, int i) { return i >= a.lo[j] && i < a.lo[j + 1]; }
// Converted rows are enumerated digit by digit, ext limbs in order, skipping the digit's own:
// digit j starts at j * Lext - lo[j].
FT_HD int64_t mu_conv_index(const MuArgs& a, int j, int i) {
  return static_cast<int64_t>(j) * a.Lext - a.lo[j] + (i < a.lo[j] ? i : i - mu_size(a, j));
}
FT_HD int64_t mu_drow(const MuArgs& a, int j, int i) {
  return a.compact ? mu_conv_index(a, j, i) : static_cast<int64_t>(j) * a.Lext + i;
}
FT_HD int64_t mu_conv_rows(const MuArgs& a) { return static_cast<int64_t>(a.beta) * a.Lext - a.L; }
// Inverse of mu_conv_index: converted row r -> (digit, ext limb i).
FT_HD int mu_conv_digit(const MuArgs& a, int64_t r, int& i) {
  int j = 0;
  while (j + 1 < a.beta && r >= static_cast<int64_t>(j + 1) * a.Lext - a.lo[j + 1]) ++j;
  const int k = static_cast<int>(r - (static_cast<int64_t>(j) * a.Lext - a.lo[j]));
  i = k < a.lo[j] ? k : k + mu_size(a, j);
  return j;
}
// Key row of digit j (global digit digit_start + j), component c, ext limb i.
FT_HD const int32_t* mu_key_row(const MuArgs& a, int j, int c, int i, int64_t n) {
  const int64_t dig = a.digit_start + j;
  if (i < a.L) return a.key_q + ((dig * 2 + c) * a.Lq_key + a.q_start + i) * n;
  const int K = a.Lext - a.L;
  return a.key_p + ((dig * 2 + c) * K + (i - a.L)) * n;
}

FT_HD uint32_t mmul(uint32_t x, uint32_t y, uint32_t q, uint32_t nqinv) {  // x, y < q: canonical
  return reduce_2q(mont_lazy(x, y, q, nqinv), q);
}
// x < 2q (a lazy NTT output), y < q: canonical x * y * 2^-32 mod q.
FT_HD uint32_t mmul_lazy_ok(uint32_t x, uint32_t y, uint32_t q, uint32_t nqinv) {
  return reduce_2q(mont_lazy(x, y, q, nqinv), q);
}

// 4 values of the ModUp input at limb i, coefficients x..x+3: a[i], or a1[i] * b1[i].
FT_HD int4 mu_input4(const MuArgs& a, int i, int x, int64_t n, uint32_t q, uint32_t nqinv) {
  if (!a.b) return ldg4(a.a + static_cast<int64_t>(i) * n + x);
  const int64_t off = (static_cast<int64_t>(a.L) + i) * n + x;
  int4 u = ldg4(a.a + off), v = ldg4(a.b + off), r;
#pragma unroll
  for (int m = 0; m < 4; ++m)
    elem(r, m) = static_cast<int32_t>(mmul(static_cast<uint32_t>(elem(u, m)), static_cast<uint32_t>(elem(v, m)), q, nqinv));
  return r;
}

// Component c of the addend at limb i < La, coefficients x..x+3 (before the c_add factor).
FT_HD int4 mu_addend4(const MuArgs& a, int c, int i, int x, int64_t n, uint32_t q, uint32_t nqinv) {
  if (!a.b) return ldg4(a.addend + (static_cast<int64_t>(c) * a.La + i) * n + x);
  const int64_t o0 = static_cast<int64_t>(i) * n + x, o1 = o0 + static_cast<int64_t>(a.L) * n;
  int4 a0 = ldg4(a.a + o0), b0 = ldg4(a.b + o0), r;
  if (c == 0) {
#pragma unroll
    for (int m = 0; m < 4; ++m)
      elem(r, m) = static_cast<int32_t>(mmul(static_cast<uint32_t>(elem(a0, m)), static_cast<uint32_t>(elem(b0, m)), q, nqinv));
    return r;
  }
  int4 a1 = ldg4(a.a + o1), b1 = ldg4(a.b + o1);
#pragma unroll
  for (int m = 0; m < 4; ++m)
    elem(r, m) = static_cast<int32_t>(
        add_2q(mmul(static_cast<uint32_t>(elem(a0, m)), static_cast<uint32_t>(elem(b1, m)), q, nqinv),
               mmul(static_cast<uint32_t>(elem(a1, m)), static_cast<uint32_t>(elem(b0, m)), q, nqinv), q));
  return r;
}

// A forward NTT phase (LARGE: the first) over the converted rows of d, in place.
template <int LOG_N, bool LARGE>
struct MuNttConv {
  using Args = MuArgs;
  using G = Geo<LOG_N, LARGE>;
  static constexpr int THREADS = G::THREADS, SMEM = G::T, MIN_BLOCKS = phase_min_blocks(G::THREADS);
  struct State {};
  struct Blk {
    Ctx c;
  };
  FT_HD static int64_t blocks(const Args& a) { return mu_conv_rows(a) * G::BLOCKS_PER_ROW; }
  FT_HD static Blk setup(const Args& a, int64_t block, uint32_t* sm) {
    const int64_t r = block / G::BLOCKS_PER_ROW;
    int i;
    const int j = mu_conv_digit(a, r, i);
    int32_t* row = a.d + mu_drow(a, j, i) * G::N;
    return Blk{row_ctx(sm, row, row, a.mod, a.psi, i, mu_tw(a, i), G::N, 0u,
                       static_cast<int>(block % G::BLOCKS_PER_ROW))};
  }
  FT_HD static int num_steps(const Args&, const Blk&) { return G::STEPS; }
  FT_HD static void step(const Args&, const Blk& b, int s, int tid, State&) {
    ntt_detail::ntt_step<LOG_N, LARGE, kCap, false>(s, b.c, tid);
  }
};

// Forward NTT, last (small) phase, for mod_up: every row (j, i) of the (beta, Lext, N)
// output; a digit's own rows are copied from a.
template <int LOG_N>
struct MuNtt2 {
  using Args = MuArgs;
  using G = Geo<LOG_N, false>;
  static constexpr int THREADS = G::THREADS, SMEM = G::T, MIN_BLOCKS = phase_min_blocks(G::THREADS);
  struct State {};
  struct Blk {
    Ctx c;
    bool own;
    const int32_t* src;
  };
  FT_HD static int64_t blocks(const Args& a) {
    return static_cast<int64_t>(a.beta) * a.Lext * G::BLOCKS_PER_ROW;
  }
  FT_HD static Blk setup(const Args& a, int64_t block, uint32_t* sm) {
    const int64_t r = block / G::BLOCKS_PER_ROW;
    const int j = static_cast<int>(r / a.Lext), i = static_cast<int>(r % a.Lext);
    int32_t* row = a.d + r * G::N;
    Blk b;
    b.c = row_ctx(sm, row, row, a.mod, a.psi, i, mu_tw(a, i), G::N, 0u, static_cast<int>(block % G::BLOCKS_PER_ROW));
    b.own = mu_own(a, j, i);
    b.src = a.a + static_cast<int64_t>(i) * G::N;
    return b;
  }
  FT_HD static int num_steps(const Args&, const Blk& b) { return b.own ? 1 : G::STEPS; }
  FT_HD static void step(const Args&, const Blk& b, int s, int tid, State&) {
    if (b.own) {
      for (int ch = tid; ch < G::T / 4; ch += THREADS) {
        const int x = G::x_of(4 * ch, b.c.blk);
        st4(b.c.out + x, ldg4(b.src + x));
      }
      return;
    }
    ntt_detail::ntt_step<LOG_N, false, kCap, false>(s, b.c, tid);
  }
};

// The key-switching inner product over finished (canonical) lifted digits: one thread per
// 4 coefficients of ext limb i, sum_j d_j[i] * key_j[c][i] for c = 0, 1, with a digit's own
// limb read from a (or a1 * b1) and the addend (or the tensor product's (d0, d1)) times
// c_add added. Used after MuNttConv<false> when beta > kKsTiles or FHETORCH_KS_KERNEL=split.
template <int LOG_N>
struct KsStream {
  using Args = MuArgs;
  static constexpr int THREADS = 256, SMEM = 4, MIN_BLOCKS = 4;  // <= 64 registers
  static constexpr int64_t N = int64_t(1) << LOG_N;
  static constexpr int PER_LIMB = static_cast<int>(N / (4 * THREADS));  // N >= 2^10
  struct State {};
  struct Blk {
    int i, x0, own;
    uint32_t q, nqinv;
  };
  FT_HD static int64_t blocks(const Args& a) { return static_cast<int64_t>(a.Lext) * PER_LIMB; }
  FT_HD static Blk setup(const Args& a, int64_t block, uint32_t*) {
    Blk b;
    b.i = static_cast<int>(block / PER_LIMB);
    b.x0 = static_cast<int>(block % PER_LIMB) * 4 * THREADS;
    b.own = -1;
    for (int j = 0; j < a.beta; ++j)
      if (mu_own(a, j, b.i)) b.own = j;
    b.q = static_cast<uint32_t>(ldg(a.mod + 2 * b.i));
    b.nqinv = 0u - static_cast<uint32_t>(ldg(a.mod + 2 * b.i + 1));
    return b;
  }
  FT_HD static int num_steps(const Args&, const Blk&) { return 1; }
  FT_HD static void step(const Args& a, const Blk& b, int, int tid, State&) {
    const int x = b.x0 + 4 * tid;
    const uint32_t q = b.q, nqinv = b.nqinv;
    uint32_t acc0[4] = {0, 0, 0, 0}, acc1[4] = {0, 0, 0, 0};
    for (int j = 0; j < a.beta; ++j) {
      int4 v = j == b.own ? mu_input4(a, b.i, x, N, q, nqinv) : ldg4(a.d + mu_drow(a, j, b.i) * N + x);
      int4 ka = ldg4(mu_key_row(a, j, 0, b.i, N) + x), kb = ldg4(mu_key_row(a, j, 1, b.i, N) + x);
#pragma unroll
      for (int m = 0; m < 4; ++m) {
        const uint32_t vm = static_cast<uint32_t>(elem(v, m));
        acc0[m] = add_2q(acc0[m], mmul(vm, static_cast<uint32_t>(elem(ka, m)), q, nqinv), q);
        acc1[m] = add_2q(acc1[m], mmul(vm, static_cast<uint32_t>(elem(kb, m)), q, nqinv), q);
      }
    }
    const bool add = b.i < a.La;
    const uint32_t ca = add ? static_cast<uint32_t>(ldg(a.c_add + b.i)) : 0u;
#pragma unroll
    for (int c = 0; c < 2; ++c) {
      uint32_t* acc = c == 0 ? acc0 : acc1;
      int4 r;
      if (add) {
        int4 ad = mu_addend4(a, c, b.i, x, N, q, nqinv);
#pragma unroll
        for (int m = 0; m < 4; ++m) acc[m] = add_2q(acc[m], mmul(static_cast<uint32_t>(elem(ad, m)), ca, q, nqinv), q);
      }
#pragma unroll
      for (int m = 0; m < 4; ++m) elem(r, m) = static_cast<int32_t>(acc[m]);
      st4(a.out + (static_cast<int64_t>(c) * a.Lext + b.i) * N + x, r);
    }
  }
};

// The forward NTT's last (small) phase fused with the key-switching inner product: block (ext
// limb i, tile) holds the tiles of every digit (beta <= kKsTiles) in shared memory at once
// (d_j[i], or nothing for the digit owning limb i, whose values are a[i] itself); the NTT
// steps run on all of them between two barriers and one final step accumulates
// sum_j d_j * key_j per chunk in registers, adds the addend and stores only the two outputs.
constexpr int kKsTiles = 4;
// Which inner product mod_up_keyswitch uses for beta <= kKsTiles by default: MuKsAll (false)
// or MuNttConv<false> + KsStream (true); FHETORCH_KS_KERNEL=tiles|split overrides it. Split
// measured faster on an H100 (N = 2^16, 48 x 12, graph medians): HMult+rescale 427 us against
// 445, HRot 416 against 435 -- MuKsAll holds 116 registers (2 blocks per SM) and its load,
// NTT and key phases barely overlap, while KsStream streams at ~2.4 TB/s.
constexpr bool kKsSplitDefault = true;

template <int LOG_N>
struct MuKsAll {
  using Args = MuArgs;
  using G = Geo<LOG_N, false>;
  // 64 KB of tiles: at most 3 blocks per SM; 2 (<= 128 registers at 256 threads) spill-free.
  static constexpr int THREADS = G::THREADS, SMEM = kKsTiles * G::T, MIN_BLOCKS = THREADS >= 512 ? 1 : 2;
  static constexpr int CH = G::T / 4 / THREADS;
  static constexpr int JSTEPS = G::STEPS - 1;
  struct State {};
  struct Blk {
    Ctx c;    // limb i's tables
    int i;
    int own;  // the digit holding limb i, or -1 (a special prime)
  };
  FT_HD static int64_t blocks(const Args& a) { return static_cast<int64_t>(a.Lext) * G::BLOCKS_PER_ROW; }
  FT_HD static Blk setup(const Args& a, int64_t block, uint32_t* sm) {
    Blk b;
    b.i = static_cast<int>(block / G::BLOCKS_PER_ROW);
    b.c = row_ctx(sm, nullptr, nullptr, a.mod, a.psi, b.i, mu_tw(a, b.i), G::N, 0u,
                  static_cast<int>(block % G::BLOCKS_PER_ROW));
    b.own = -1;
    for (int j = 0; j < a.beta; ++j)
      if (mu_own(a, j, b.i)) b.own = j;
    return b;
  }
  FT_HD static int num_steps(const Args&, const Blk&) { return JSTEPS + 1; }
  FT_HD static int slot(const Blk& b, int j) { return b.own >= 0 && j > b.own ? j - 1 : j; }
  FT_HD static void step(const Args& a, const Blk& b, int s, int tid, State&) {
    if (s < JSTEPS) {
#pragma unroll
      for (int j = 0; j < kKsTiles; ++j) {
        if (j >= a.beta || j == b.own) continue;
        Ctx c = b.c;
        c.sm = b.c.sm + slot(b, j) * G::T;
        c.in = a.d + mu_drow(a, j, b.i) * G::N;
        ntt_detail::ntt_step<LOG_N, false, kCap, false>(s, c, tid);  // load (s = 0) and rounds
      }
      return;
    }
    const uint32_t q = b.c.q, nqinv = b.c.nqinv;
    const bool add = b.i < a.La;
    const uint32_t ca = add ? static_cast<uint32_t>(ldg(a.c_add + b.i)) : 0u;
    const int32_t* k0[kKsTiles];
    const int32_t* k1[kKsTiles];
#pragma unroll
    for (int j = 0; j < kKsTiles; ++j) {
      k0[j] = j < a.beta ? mu_key_row(a, j, 0, b.i, G::N) : nullptr;
      k1[j] = j < a.beta ? mu_key_row(a, j, 1, b.i, G::N) : nullptr;
    }
#pragma unroll
    for (int k = 0; k < CH; ++k) {
      const int e = 4 * (tid + k * THREADS), x = G::x_of(e, b.c.blk);
      int4 ka[kKsTiles], kb[kKsTiles], w = make_int4(0, 0, 0, 0);
#pragma unroll
      for (int j = 0; j < kKsTiles; ++j) {
        if (j < a.beta) {
          ka[j] = ldg4(k0[j] + x);
          kb[j] = ldg4(k1[j] + x);
        }
      }
      if (b.own >= 0) w = mu_input4(a, b.i, x, G::N, q, nqinv);
      uint32_t acc0[4] = {0, 0, 0, 0}, acc1[4] = {0, 0, 0, 0};
#pragma unroll
      for (int j = 0; j < kKsTiles; ++j) {
        if (j >= a.beta) continue;
        const uint32_t* tile = b.c.sm + slot(b, j) * G::T;
#pragma unroll
        for (int m = 0; m < 4; ++m) {
          const uint32_t v = j == b.own ? static_cast<uint32_t>(elem(w, m)) : tile[swz(e + m)];
          acc0[m] = add_2q(acc0[m], mmul_lazy_ok(v, static_cast<uint32_t>(elem(ka[j], m)), q, nqinv), q);
          acc1[m] = add_2q(acc1[m], mmul_lazy_ok(v, static_cast<uint32_t>(elem(kb[j], m)), q, nqinv), q);
        }
      }
#pragma unroll
      for (int c = 0; c < 2; ++c) {
        uint32_t* acc = c == 0 ? acc0 : acc1;
        int4 r;
        if (add) {
          int4 ad = mu_addend4(a, c, b.i, x, G::N, q, nqinv);
#pragma unroll
          for (int m = 0; m < 4; ++m) acc[m] = add_2q(acc[m], mmul(static_cast<uint32_t>(elem(ad, m)), ca, q, nqinv), q);
        }
#pragma unroll
        for (int m = 0; m < 4; ++m) elem(r, m) = static_cast<int32_t>(acc[m]);
        st4(a.out + (static_cast<int64_t>(c) * a.Lext + b.i) * G::N + x, r);
      }
    }
  }
};

// ---- base conversion, register path (inputs held in registers, as bconv_core.cuh's small
// path) or, for more than 16 inputs, a plain loop reading inputs and matrix from memory --

constexpr int kBcThreads = 128;
constexpr int kBcCoefs = 4 * kBcThreads;
constexpr int kBcOuts = 64;

struct BcSmem {
  int32_t m[kBcOuts * 16];  // [o][k], k padded to 16 with zeros (register path)
  int32_t p[kBcOuts], pinv[kBcOuts], r[kBcOuts];
};

// A block of a conversion: group g (a digit, or a polynomial of the batch), outputs
// [o0, o0 + nout) of the group, coefficients [c0, c0 + kBcCoefs).
struct BcBlk {
  int g, o0, nout;
  int64_t c0;
  BcSmem* s;
};

// Map for ModUp: group = digit j; inputs t[lo_j + k] (limb lo_j + k); outputs o -> ext limb
// i = o < lo_j ? o : o + n_j, row mu_drow(j, i); matrix row mats[j][i], stride amax.
struct MuBcMap {
  using Args = MuArgs;
  FT_HD static int groups(const Args& a) { return a.beta; }
  FT_HD static int tiles(const Args& a) { return a.bc_tiles; }
  FT_HD static int chunks(const Args& a) { return a.bc_chunks; }
  FT_HD static int outs(const Args& a) { return a.bc_outs; }
  FT_HD static int n_in(const Args& a, int g) { return mu_size(a, g); }
  FT_HD static int n_out(const Args& a, int g) { return a.Lext - mu_size(a, g); }
  FT_HD static const int32_t* in_row(const Args& a, int g, int k, int64_t n) {
    return a.t + static_cast<int64_t>(a.lo[g] + k) * n;
  }
  FT_HD static const int32_t* in_mod(const Args& a, int g, int k) { return a.mod + 2 * (a.lo[g] + k); }
  FT_HD static int out_limb(const Args& a, int g, int o) { return o < a.lo[g] ? o : o + mu_size(a, g); }
  FT_HD static int32_t* out_row(const Args& a, int g, int o, int64_t n) {
    return a.d + mu_drow(a, g, out_limb(a, g, o)) * n;
  }
  FT_HD static const int32_t* out_mod(const Args& a, int g, int o) { return a.mod + 2 * out_limb(a, g, o); }
  FT_HD static const int32_t* mat_row(const Args& a, int g, int o) {
    return a.mats + (static_cast<int64_t>(g) * a.Lext + out_limb(a, g, o)) * a.amax;
  }
};

template <int LOG_N, int LA4, class Map>
struct Bconv {
  using Args = typename Map::Args;
  static constexpr int THREADS = kBcThreads, MIN_BLOCKS = 5;  // <= 102 registers
  static constexpr int SMEM = static_cast<int>(sizeof(BcSmem) / 4);
  static constexpr int64_t N = int64_t(1) << LOG_N;
  struct State {};
  using Blk = BcBlk;
  FT_HD static int64_t blocks(const Args& a) {
    return static_cast<int64_t>(Map::groups(a)) * Map::chunks(a) * Map::tiles(a);
  }
  FT_HD static Blk setup(const Args& a, int64_t block, uint32_t* sm) {
    const int tiles = Map::tiles(a);
    const int64_t rest = block / tiles;
    Blk b;
    b.c0 = (block % tiles) * kBcCoefs;
    b.g = static_cast<int>(rest / Map::chunks(a));
    b.o0 = static_cast<int>(rest % Map::chunks(a)) * Map::outs(a);
    const int left = Map::n_out(a, b.g) - b.o0;
    b.nout = left < Map::outs(a) ? left : Map::outs(a);
    b.s = reinterpret_cast<BcSmem*>(sm);
    return b;
  }
  FT_HD static int num_steps(const Args&, const Blk& b) { return b.nout > 0 ? 2 : 0; }
  FT_HD static void step(const Args& a, const Blk& b, int s, int tid, State&) {
    BcSmem& sm = *b.s;
    const int nin = Map::n_in(a, b.g);
    if (s == 0) {
      if (LA4 > 0) {
        for (int idx = tid; idx < kBcOuts * 16; idx += THREADS) {
          const int o = idx >> 4, k = idx & 15;
          sm.m[idx] = (o < b.nout && k < nin) ? ldg(Map::mat_row(a, b.g, b.o0 + o) + k) : 0;
        }
      }
      for (int o = tid; o < kBcOuts; o += THREADS) {
        if (o < b.nout) {
          const int32_t* pm = Map::out_mod(a, b.g, b.o0 + o);
          const int32_t p = ldg(pm);
          sm.p[o] = p;
          sm.pinv[o] = ldg(pm + 1);
          sm.r[o] = bconv_detail::two32_centred(p);
        } else {
          sm.p[o] = 1;
          sm.pinv[o] = 1;
          sm.r[o] = 0;
        }
      }
      return;
    }
    const int64_t c = b.c0 + 4 * tid;
    if (c >= N) return;
    if constexpr (LA4 > 0) {
      int32_t t[4 * LA4][4];
#pragma unroll
      for (int k = 0; k < 4 * LA4; ++k) {
        if (k < nin) {
          const int32_t q = ldg(Map::in_mod(a, b.g, k));
          const int4 v = ldg4(Map::in_row(a, b.g, k, N) + c);
          t[k][0] = centre(v.x, q);
          t[k][1] = centre(v.y, q);
          t[k][2] = centre(v.z, q);
          t[k][3] = centre(v.w, q);
        } else {
          t[k][0] = t[k][1] = t[k][2] = t[k][3] = 0;
        }
      }
#pragma unroll 1
      for (int o = 0; o < b.nout; ++o) {
        const int4* mrow = reinterpret_cast<const int4*>(sm.m + 16 * o);
        const int32_t r = sm.r[o];
        int64_t acc[4] = {0, 0, 0, 0};
#pragma unroll
        for (int g = 0; g < LA4; ++g) {
          const int4 m4 = mrow[g];
          const int32_t mv[4] = {m4.x, m4.y, m4.z, m4.w};
#pragma unroll
          for (int jj = 0; jj < 4; ++jj)
#pragma unroll
            for (int k = 0; k < 4; ++k) acc[k] = mad_wide(t[4 * g + jj][k], mv[jj], acc[k]);
#pragma unroll
          for (int k = 0; k < 4; ++k) acc[k] = bconv_detail::fold(acc[k], r);
        }
        const int32_t p = sm.p[o], pinv = sm.pinv[o];
        int4 v;
#pragma unroll
        for (int k = 0; k < 4; ++k) elem(v, k) = canon(smr(acc[k], p, pinv), p);
        st4(Map::out_row(a, b.g, b.o0 + o, N) + c, v);
      }
    } else {
      // More than 16 inputs: inputs and matrix re-read (cached) per output; a fold after
      // every 4 products keeps |acc| < 2^63 (bconv_core.cuh's register-path bound).
      for (int o = 0; o < b.nout; ++o) {
        const int32_t* mrow = Map::mat_row(a, b.g, b.o0 + o);
        const int32_t r = sm.r[o];
        int64_t acc[4] = {0, 0, 0, 0};
        for (int k = 0; k < nin; ++k) {
          const int32_t q = ldg(Map::in_mod(a, b.g, k)), m = ldg(mrow + k);
          int4 v = ldg4(Map::in_row(a, b.g, k, N) + c);
#pragma unroll
          for (int e = 0; e < 4; ++e) acc[e] = mad_wide(centre(elem(v, e), q), m, acc[e]);
          if ((k & 3) == 3) {
#pragma unroll
            for (int e = 0; e < 4; ++e) acc[e] = bconv_detail::fold(acc[e], r);
          }
        }
        const int32_t p = sm.p[o], pinv = sm.pinv[o];
        int4 v;
#pragma unroll
        for (int e = 0; e < 4; ++e) elem(v, e) = canon(smr(bconv_detail::fold(acc[e], r), p, pinv), p);
        st4(Map::out_row(a, b.g, b.o0 + o, N) + c, v);
      }
    }
  }
};

// ---- switch_modulus ----------------------------------------------------------------------

struct SwArgs {
  const int32_t* x;  // (B, Ls, N)
  int32_t* t;        // (B, D, N) scratch
  int32_t* y;        // (B, Ld, N) scratch
  int32_t* out;      // (B, Ld, N)
  const int32_t* pre;
  const int32_t* mod_drop;
  const int32_t* psi_inv_drop;
  const int32_t* mod_dst;
  const int32_t* psi_dst;
  const int32_t* mat;  // (Ld, D)
  const int32_t* c_keep;
  const int32_t* c_sub;
  const int32_t* addend;  // (Ba, Ld, N) or null
  int64_t B, Ba;
  int Ls, D, Ld;
  int bc_tiles, bc_chunks, bc_outs;
  int16_t drop[kMaxSwitchRows];
  int16_t keep[kMaxSwitchRows];
  ntt_detail::TwRows drop_tw, dst_tw;  // the psi_inv rows of the dropped limbs, the psi rows of dst's
};

FT_HD int sw_drop_tw(const SwArgs& a, int k) { return ntt_detail::tw_row(a.drop_tw, k); }
FT_HD int sw_dst_tw(const SwArgs& a, int i) { return ntt_detail::tw_row(a.dst_tw, i); }

// Inverse NTT, first (small) phase, reading the dropped rows of x directly.
template <int LOG_N>
struct SwIntt1 {
  using Args = SwArgs;
  using G = Geo<LOG_N, false>;
  static constexpr int THREADS = G::THREADS, SMEM = G::T, MIN_BLOCKS = phase_min_blocks(G::THREADS);
  struct State {};
  struct Blk {
    Ctx c;
  };
  FT_HD static int64_t blocks(const Args& a) { return a.B * a.D * G::BLOCKS_PER_ROW; }
  FT_HD static Blk setup(const Args& a, int64_t block, uint32_t* sm) {
    const int64_t r = block / G::BLOCKS_PER_ROW, bb = r / a.D;
    const int k = static_cast<int>(r % a.D);
    const int32_t* in = a.x + (bb * a.Ls + a.drop[k]) * G::N;
    return Blk{row_ctx(sm, in, a.t + r * G::N, a.mod_drop, a.psi_inv_drop, k, sw_drop_tw(a, k), G::N, 0u,
                       static_cast<int>(block % G::BLOCKS_PER_ROW))};
  }
  FT_HD static int num_steps(const Args&, const Blk&) { return G::STEPS; }
  FT_HD static void step(const Args&, const Blk& b, int s, int tid, State&) {
    ntt_detail::ntt_step<LOG_N, false, kCap, true>(s, b.c, tid);
  }
};

// Inverse NTT, last (large) phase, times pre: standard-form BConv inputs.
template <int LOG_N>
struct SwIntt2 {
  using Args = SwArgs;
  using G = Geo<LOG_N, true>;
  static constexpr int THREADS = G::THREADS, SMEM = G::T, MIN_BLOCKS = phase_min_blocks(G::THREADS);
  struct State {};
  struct Blk {
    Ctx c;
  };
  FT_HD static int64_t blocks(const Args& a) { return a.B * a.D * G::BLOCKS_PER_ROW; }
  FT_HD static Blk setup(const Args& a, int64_t block, uint32_t* sm) {
    const int64_t r = block / G::BLOCKS_PER_ROW;
    const int k = static_cast<int>(r % a.D);
    int32_t* row = a.t + r * G::N;
    return Blk{row_ctx(sm, row, row, a.mod_drop, a.psi_inv_drop, k, sw_drop_tw(a, k), G::N,
                       static_cast<uint32_t>(ldg(a.pre + k)),
                       static_cast<int>(block % G::BLOCKS_PER_ROW))};
  }
  FT_HD static int num_steps(const Args&, const Blk&) { return G::STEPS; }
  FT_HD static void step(const Args&, const Blk& b, int s, int tid, State&) {
    ntt_detail::ntt_step<LOG_N, true, kCap, true>(s, b.c, tid);
  }
};

// Map for switch_modulus's BConv: group = polynomial bb; inputs t[bb][k] (dropped limb k);
// outputs y[bb][o] (destination limb o), matrix row mat[o], stride D.
struct SwBcMap {
  using Args = SwArgs;
  FT_HD static int groups(const Args& a) { return static_cast<int>(a.B); }
  FT_HD static int tiles(const Args& a) { return a.bc_tiles; }
  FT_HD static int chunks(const Args& a) { return a.bc_chunks; }
  FT_HD static int outs(const Args& a) { return a.bc_outs; }
  FT_HD static int n_in(const Args& a, int) { return a.D; }
  FT_HD static int n_out(const Args& a, int) { return a.Ld; }
  FT_HD static const int32_t* in_row(const Args& a, int g, int k, int64_t n) {
    return a.t + (static_cast<int64_t>(g) * a.D + k) * n;
  }
  FT_HD static const int32_t* in_mod(const Args& a, int, int k) { return a.mod_drop + 2 * k; }
  FT_HD static int32_t* out_row(const Args& a, int g, int o, int64_t n) {
    return a.y + (static_cast<int64_t>(g) * a.Ld + o) * n;
  }
  FT_HD static const int32_t* out_mod(const Args& a, int, int o) { return a.mod_dst + 2 * o; }
  FT_HD static const int32_t* mat_row(const Args& a, int, int o) { return a.mat + static_cast<int64_t>(o) * a.D; }
};

// Forward NTT, first (large) phase over y, in place.
template <int LOG_N>
struct SwNtt1 {
  using Args = SwArgs;
  using G = Geo<LOG_N, true>;
  static constexpr int THREADS = G::THREADS, SMEM = G::T, MIN_BLOCKS = phase_min_blocks(G::THREADS);
  struct State {};
  struct Blk {
    Ctx c;
  };
  FT_HD static int64_t blocks(const Args& a) { return a.B * a.Ld * G::BLOCKS_PER_ROW; }
  FT_HD static Blk setup(const Args& a, int64_t block, uint32_t* sm) {
    const int64_t r = block / G::BLOCKS_PER_ROW;
    int32_t* row = a.y + r * G::N;
    const int i = static_cast<int>(r % a.Ld);
    return Blk{row_ctx(sm, row, row, a.mod_dst, a.psi_dst, i, sw_dst_tw(a, i), G::N, 0u,
                       static_cast<int>(block % G::BLOCKS_PER_ROW))};
  }
  FT_HD static int num_steps(const Args&, const Blk&) { return G::STEPS; }
  FT_HD static void step(const Args&, const Blk& b, int s, int tid, State&) {
    ntt_detail::ntt_step<LOG_N, true, kCap, false>(s, b.c, tid);
  }
};

// Forward NTT, last (small) phase; its store combines
// out = x[keep] * c_keep + ntt * c_sub (+ addend).
template <int LOG_N>
struct SwNtt2 {
  using Args = SwArgs;
  using G = Geo<LOG_N, false>;
  static constexpr int THREADS = G::THREADS, SMEM = G::T, MIN_BLOCKS = phase_min_blocks(G::THREADS) * 3 / 4 > 0 ? phase_min_blocks(G::THREADS) * 3 / 4 : 1;
  struct State {};
  struct Blk {
    Ctx c;
    const int32_t* keep;  // x's kept row, or null
    const int32_t* add;   // the addend's row, or null
    uint32_t ck, cs;
  };
  FT_HD static int64_t blocks(const Args& a) { return a.B * a.Ld * G::BLOCKS_PER_ROW; }
  FT_HD static Blk setup(const Args& a, int64_t block, uint32_t* sm) {
    const int64_t r = block / G::BLOCKS_PER_ROW, bb = r / a.Ld;
    const int i = static_cast<int>(r % a.Ld);
    Blk b;
    b.c = row_ctx(sm, a.y + r * G::N, a.out + r * G::N, a.mod_dst, a.psi_dst, i, sw_dst_tw(a, i), G::N, 0u,
                  static_cast<int>(block % G::BLOCKS_PER_ROW));
    const int kr = a.keep[i];
    b.keep = kr >= 0 ? a.x + (bb * a.Ls + kr) * G::N : nullptr;
    b.add = bb < a.Ba ? a.addend + r * G::N : nullptr;
    b.ck = static_cast<uint32_t>(ldg(a.c_keep + i));
    b.cs = static_cast<uint32_t>(ldg(a.c_sub + i));
    return b;
  }
  FT_HD static int num_steps(const Args&, const Blk&) { return G::STEPS; }
  FT_HD static void step(const Args&, const Blk& b, int s, int tid, State&) {
    if (s < G::STEPS - 1) {
      ntt_detail::ntt_step<LOG_N, false, kCap, false>(s, b.c, tid);
      return;
    }
    const uint32_t q = b.c.q, nqinv = b.c.nqinv;
    constexpr int CH = G::T / 4 / THREADS;
    int4 kvs[CH], avs[CH];  // every load of this step issued first
#pragma unroll
    for (int k = 0; k < CH; ++k) {
      const int x = G::x_of(4 * (tid + k * THREADS), b.c.blk);
      kvs[k] = b.keep ? ldg4(b.keep + x) : make_int4(0, 0, 0, 0);
      avs[k] = b.add ? ldg4(b.add + x) : make_int4(0, 0, 0, 0);
    }
#pragma unroll
    for (int k = 0; k < CH; ++k) {
      const int e = 4 * (tid + k * THREADS), x = G::x_of(e, b.c.blk);
      int4 kv = kvs[k], av = avs[k], r;
#pragma unroll
      for (int m = 0; m < 4; ++m) {
        uint32_t v = reduce_2q(mont_lazy(b.c.sm[swz(e + m)], b.cs, q, nqinv), q);
        if (b.keep) v = add_2q(reduce_2q(mont_lazy(static_cast<uint32_t>(elem(kv, m)), b.ck, q, nqinv), q), v, q);
        if (b.add) v = add_2q(v, static_cast<uint32_t>(elem(av, m)), q);
        elem(r, m) = static_cast<int32_t>(v);
      }
      st4(b.c.out + x, r);
    }
  }
};

// ---- INTT of the level for mod_up (the standard inverse phases, post = pre) --------------

template <int LOG_N, bool LARGE>
struct MuIntt {
  using Args = MuArgs;
  using G = Geo<LOG_N, LARGE>;
  static constexpr int THREADS = G::THREADS, SMEM = G::T, MIN_BLOCKS = phase_min_blocks(G::THREADS);
  struct State {};
  struct Blk {
    Ctx c;
    int i;
  };
  FT_HD static int64_t blocks(const Args& a) { return static_cast<int64_t>(a.L) * G::BLOCKS_PER_ROW; }
  FT_HD static Blk setup(const Args& a, int64_t block, uint32_t* sm) {
    const int64_t r = block / G::BLOCKS_PER_ROW;
    const int i = static_cast<int>(r);
    int32_t* row = a.t + r * G::N;
    const int32_t* in = LARGE ? row : a.a + r * G::N;  // (unused in tensor-product mode)
    return Blk{row_ctx(sm, in, row, a.mod, a.psi_inv, i, mu_tw(a, i), G::N,
                       LARGE ? static_cast<uint32_t>(ldg(a.pre + i)) : 0u,
                       static_cast<int>(block % G::BLOCKS_PER_ROW)),
               i};
  }
  FT_HD static int num_steps(const Args&, const Blk&) { return G::STEPS; }
  FT_HD static void step(const Args& a, const Blk& b, int s, int tid, State&) {
    if (!LARGE && s == 0 && a.b) {  // tensor-product mode: load a1 * b1
      for (int ch = tid; ch < G::T / 4; ch += THREADS) {
        const int e = 4 * ch;
        const int4 v = mu_input4(a, b.i, G::x_of(e, b.c.blk), G::N, b.c.q, b.c.nqinv);
        b.c.sm[swz(e)] = static_cast<uint32_t>(v.x);
        b.c.sm[swz(e + 1)] = static_cast<uint32_t>(v.y);
        b.c.sm[swz(e + 2)] = static_cast<uint32_t>(v.z);
        b.c.sm[swz(e + 3)] = static_cast<uint32_t>(v.w);
      }
      return;
    }
    ntt_detail::ntt_step<LOG_N, LARGE, kCap, true>(s, b.c, tid);
  }
};

// ---- launch parameters from the host API (kernels.h); false on invalid arguments --------

inline bool mu_fill(MuArgs& a, const int32_t* x, int32_t* t, int32_t* d, int L, int K, const ModUpTables& tb,
                    const int* bounds, int beta, const KeyTables* key, int32_t* out) {
  if (L <= 0 || K < 0 || beta <= 0 || beta > kMaxDigits || tb.alpha_max <= 0) return false;
  a = MuArgs{};
  a.a = x;
  a.t = t;
  a.d = d;
  a.mod = tb.mod_ext;
  a.psi = tb.psi_ext;
  a.psi_inv = tb.psi_inv_ext;
  a.pre = tb.pre;
  a.mats = tb.mats;
  a.L = L;
  a.Lext = L + K;
  a.amax = tb.alpha_max;
  a.beta = beta;
  for (int j = 0; j <= beta; ++j) a.lo[j] = bounds[j];
  if (a.lo[0] != 0 || a.lo[beta] != L) return false;
  for (int j = 0; j < beta; ++j)
    if (a.lo[j + 1] <= a.lo[j] || a.lo[j + 1] - a.lo[j] > tb.alpha_max) return false;
  if (tb.psi_rows && a.Lext > ntt_detail::kMaxTwRows) return false;
  a.psi_rows = ntt_detail::tw_rows(tb.psi_rows, a.Lext);
  if (key) {
    a.key_q = key->key_q;
    a.key_p = key->key_p;
    a.Lq_key = key->Lq_key;
    a.q_start = key->q_start;
    a.digit_start = key->digit_start;
    a.out = out;
    a.addend = key->addend;
    a.c_add = key->c_add;
    a.La = key->addend ? key->La : 0;
    a.b = key->b;
    // FHETORCH_KS_KERNEL=tiles|split overrides the default inner-product variant (beta <= 4).
    const char* kind = std::getenv("FHETORCH_KS_KERNEL");
    a.ks_split = kind && std::strcmp(kind, "split") == 0 ? 1 : kind && std::strcmp(kind, "tiles") == 0 ? 0
                                                                                                    : kKsSplitDefault;
    if (key->b) {  // tensor-product mode: x and b are (2, L, N); the addend is computed
      if (key->addend || !key->c_add) return false;
      a.La = L;
    }
    if (a.La < 0 || a.La > a.Lext) return false;
  }
  return true;
}

inline bool sw_fill(SwArgs& a, const int32_t* x, int32_t* out, int32_t* t, int32_t* y, int64_t B, int Ls,
                    const int* drop, int D, const int* keep, int Ld, const SwitchTables& tb, const int32_t* addend,
                    int64_t Ba) {
  if (D <= 0 || D > kMaxSwitchRows || Ld <= 0 || Ld > kMaxSwitchRows || Ls <= 0 || Ls > 32767) return false;
  a = SwArgs{};
  a.x = x;
  a.t = t;
  a.y = y;
  a.out = out;
  a.pre = tb.pre;
  a.mod_drop = tb.mod_drop;
  a.psi_inv_drop = tb.psi_inv_drop;
  a.mod_dst = tb.mod_dst;
  a.psi_dst = tb.psi_dst;
  a.mat = tb.mat;
  a.c_keep = tb.c_keep;
  a.c_sub = tb.c_sub;
  a.addend = addend;
  a.B = B;
  a.Ba = addend ? Ba : 0;
  if (a.Ba < 0 || a.Ba > B) return false;
  a.Ls = Ls;
  a.D = D;
  a.Ld = Ld;
  for (int k = 0; k < D; ++k) {
    if (drop[k] < 0 || drop[k] >= Ls) return false;
    a.drop[k] = static_cast<int16_t>(drop[k]);
  }
  for (int i = 0; i < Ld; ++i) {
    if (keep[i] < -1 || keep[i] >= Ls) return false;
    a.keep[i] = static_cast<int16_t>(keep[i]);
  }
  a.drop_tw = ntt_detail::tw_rows(tb.psi_inv_drop_rows, D);  // D, Ld <= kMaxSwitchRows = kMaxTwRows
  a.dst_tw = ntt_detail::tw_rows(tb.psi_dst_rows, Ld);
  return true;
}

// ---- pipelines ---------------------------------------------------------------------------
// Exec::run<P>(args, blocks) launches (or emulates) program P over `blocks` blocks.

// BConv grid: enough blocks to fill the GPU (about 132 SMs x 1024 threads), at least 4
// outputs per chunk (each chunk reloads its inputs), at most kBcOuts.
inline void bconv_grid(int64_t groups, int64_t n, int max_out, int& tiles, int& chunks, int& outs) {
  tiles = static_cast<int>((n + kBcCoefs - 1) / kBcCoefs);
  const int64_t base = groups * tiles * kBcThreads;
  int64_t ch = base > 0 ? (135168 + base - 1) / base : 1;
  const int64_t lo = (max_out + kBcOuts - 1) / kBcOuts, hi = (max_out + 3) / 4;
  ch = ch < lo ? lo : ch > hi ? hi : ch;
  if (ch < 1) ch = 1;
  outs = static_cast<int>((max_out + ch - 1) / ch);
  if (outs < 1) outs = 1;
  chunks = (max_out + outs - 1) / outs;
  if (chunks < 1) chunks = 1;
}

template <int LOG_N, class Map, class Exec>
cudaError_t run_bconv(Exec& ex, const typename Map::Args& a, int max_in) {
  if (max_in <= 4) return ex.template run<Bconv<LOG_N, 1, Map>>(a);
  if (max_in <= 8) return ex.template run<Bconv<LOG_N, 2, Map>>(a);
  if (max_in <= 12) return ex.template run<Bconv<LOG_N, 3, Map>>(a);
  if (max_in <= 16) return ex.template run<Bconv<LOG_N, 4, Map>>(a);
  return ex.template run<Bconv<LOG_N, 0, Map>>(a);
}

#define FT_TRY(expr)                               \
  do {                                             \
    cudaError_t ft_e_ = (expr);                    \
    if (ft_e_ != cudaSuccess) return ft_e_;        \
  } while (0)

// mod_up (fused_ks = false; d = out, full layout) or mod_up_keyswitch (fused_ks = true;
// d = compact scratch). a.t must hold L * N words.
template <int LOG_N, class Exec>
cudaError_t mod_up_pipeline(Exec& ex, MuArgs a, bool fused_ks) {
  a.compact = fused_ks ? 1 : 0;
  int widest = 0, narrowest = a.L;
  for (int j = 0; j < a.beta; ++j) {
    widest = mu_size(a, j) > widest ? mu_size(a, j) : widest;
    narrowest = mu_size(a, j) < narrowest ? mu_size(a, j) : narrowest;
  }
  bconv_grid(a.beta, int64_t(1) << LOG_N, a.Lext - narrowest, a.bc_tiles, a.bc_chunks, a.bc_outs);
  FT_TRY((ex.template run<MuIntt<LOG_N, false>>(a)));
  FT_TRY((ex.template run<MuIntt<LOG_N, true>>(a)));
  if (mu_conv_rows(a) > 0) {
    FT_TRY((run_bconv<LOG_N, MuBcMap>(ex, a, widest)));
    FT_TRY((ex.template run<MuNttConv<LOG_N, true>>(a)));
  }
  if (fused_ks) {
    if (a.beta <= kKsTiles && !a.ks_split) return ex.template run<MuKsAll<LOG_N>>(a);
    if (mu_conv_rows(a) > 0) FT_TRY((ex.template run<MuNttConv<LOG_N, false>>(a)));
    return ex.template run<KsStream<LOG_N>>(a);
  }
  return ex.template run<MuNtt2<LOG_N>>(a);
}

template <int LOG_N, class Exec>
cudaError_t switch_pipeline(Exec& ex, SwArgs a) {
  bconv_grid(a.B, int64_t(1) << LOG_N, a.Ld, a.bc_tiles, a.bc_chunks, a.bc_outs);
  FT_TRY(ex.template run<SwIntt1<LOG_N>>(a));
  FT_TRY(ex.template run<SwIntt2<LOG_N>>(a));
  FT_TRY((run_bconv<LOG_N, SwBcMap>(ex, a, a.D)));
  FT_TRY(ex.template run<SwNtt1<LOG_N>>(a));
  return ex.template run<SwNtt2<LOG_N>>(a);
}

// Calls f.template operator()<LOG_N>() for the supported sizes.
template <class F>
cudaError_t dispatch_log_n(int log_n, F&& f) {
  switch (log_n) {
    case 10: return f.template operator()<10>();
    case 11: return f.template operator()<11>();
    case 12: return f.template operator()<12>();
    case 13: return f.template operator()<13>();
    case 14: return f.template operator()<14>();
    case 15: return f.template operator()<15>();
    case 16: return f.template operator()<16>();
    case 17: return f.template operator()<17>();
    default: return cudaErrorInvalidValue;
  }
}

}  // namespace fhetorch::cuda::ks_detail
