// Two-phase shared-memory negacyclic NTT (CUDA; CPU oracle: csrc/cpu/ntt.cpp).
//
// A row of N = 2^LOG_N coefficients is transformed by two kernels. Write x for a
// coefficient's index in the row; a radix-2 stage pairs x with x ^ 2^b for one bit b, and
// its twiddle is tw[(N + x_lo) >> (b + 1)] (x_lo: the member with bit b clear), which is
// the CPU's table[m + i] for the stage with m = N / 2^(b+1) groups.
//  * The "large" phase does the stages on the top P1 = LOG_N/2 bits of x: for a fixed
//    value of the low bits (a column), the 2^P1 coefficients of the column form an
//    independent sub-transform. A block takes C adjacent columns.
//  * The "small" phase does the stages on the low P2 = LOG_N - P1 bits: contiguous chunks
//    of 2^P2 coefficients are independent. A block takes C adjacent chunks.
// Either way a block owns a tile of T = min(2^12, N) coefficients and runs its stages in
// rounds of up to 4 stages, each thread holding 2^r coefficients in registers and doing r
// stages of butterflies on them: the first round reads them straight from the input row, the
// last writes them straight to the output row, and the tile in shared memory only carries
// the exchanges between rounds. The forward transform runs large then small (Cooley-Tukey,
// bit b from high to low); the inverse runs small then large (Gentleman-Sande, b from low
// to high) and multiplies by post[l] when storing.
//
// Arithmetic is lazy: between butterflies (and between the two kernels) values are kept
// in [0, 2q) as unsigned words (2q < 2^32 since q < 2^31), multiplications use the
// unsigned Montgomery reduction mont_lazy() (3 multiplies and an add, result in (0, 2q)),
// and a value is brought to [0, q) with one min() only where a sum could overflow. Only
// the final store makes outputs canonical; canonical outputs of exact mod-q arithmetic
// are unique, so they equal the CPU kernels' bit for bit. A CT butterfly costs 8 integer
// instructions, a GS butterfly 8.
//
// Tile coordinates: tile element e holds row index x_of(e). Bits of e that index the
// sub-transform are "j" bits; a round works on r adjacent j bits. The shared-memory slot
// of e is swz(e) = e ^ ((e >> 5) & 31): the bank of e is the XOR of its bit groups [0, 5)
// and [5, 10), and deposit() hands each lane of a warp an item whose varying bits hit
// distinct banks, so the rounds' exchanges are free of bank conflicts.
// Addresses are made once per item and thread: swz is linear over XOR, so an item's 2^R
// slots are swz(e0) ^ constants, and its row accesses are immediate offsets from one pointer
// (pin_ptr); per element, only the butterflies' arithmetic is left.
//
// The steps are __host__ __device__ functions of (step, thread id) so that a host-side
// emulation can run the exact index logic of the kernel.
#pragma once
#include <cstdint>
#include "program.cuh"
#include "util.cuh"

namespace fhetorch::cuda::ntt_detail {

constexpr int kMinLogN = 10;  // two-phase kernels for kMinLogN <= log_n <= kMaxLogN
constexpr int kMaxLogN = 17;
constexpr int kCap = 4;  // rounds of up to 4 stages (16 coefficients per thread); 3 measured slower

FT_HD int swz(int e) { return e ^ ((e >> 5) & 31); }

template <int LOG_N, bool LARGE, int CAP>
struct Geo {
  static constexpr int N = 1 << LOG_N;
  static constexpr int P = LARGE ? LOG_N / 2 : LOG_N - LOG_N / 2;  // log2 sub-transform size
  static constexpr int LOG_T = LOG_N < 12 ? LOG_N : 12;
  static constexpr int T = 1 << LOG_T;
  static constexpr int LOG_C = LOG_T - P;                 // log2 columns / chunks per tile
  static constexpr int JPOS = LARGE ? LOG_C : 0;          // tile bit of j bit 0
  static constexpr int XPOS = LARGE ? LOG_N - P : 0;      // row-index bit of j bit 0
  static constexpr int BLOCKS_PER_ROW = N / T;
  // Rounds split the P j bits into NROUNDS chunks of at most CAP bits (CAP = log2 of the
  // registers per thread), as even as possible, listed from j bit 0 upwards, larger on top.
  static constexpr int NROUNDS = (P + CAP - 1) / CAP;
  __host__ __device__ static constexpr int chunk_r(int i) {
    return P / NROUNDS + (i >= NROUNDS - P % NROUNDS ? 1 : 0);
  }
  __host__ __device__ static constexpr int chunk_lo(int i) { return i == 0 ? 0 : chunk_lo(i - 1) + chunk_r(i - 1); }
  static constexpr int RMAX = chunk_r(NROUNDS - 1);
  static constexpr int THREADS = T >> RMAX;
  static constexpr int STEPS = NROUNDS + 2;  // load, rounds, store
  static_assert(P >= 5 && P <= 9 && LOG_C >= 2, "unsupported transform size");
  static_assert(NROUNDS <= 3 && RMAX <= 4 && chunk_lo(NROUNDS) == P, "unsupported round split");

  FT_HD static int x_of(int e, int blk) {
    if (LARGE) return ((e >> LOG_C) << XPOS) | (blk << LOG_C) | (e & ((1 << LOG_C) - 1));
    return (blk << LOG_T) | e;
  }
};

// Maps work item `item` (item bits 0..4 = lane) to a tile element with the R round bits
// [LO, LO + R) clear. Lane bit i goes to tile bit i, or to bit i + 5 when bit i is a round
// bit; all other item bits fill the remaining tile bits in increasing order.
template <int LOG_T, int LO, int R>
FT_HD int deposit(int item) {
  int e = 0;
#pragma unroll
  for (int i = 0; i < 5; ++i) {
    const int pos = (i >= LO && i < LO + R) ? i + 5 : i;
    e |= ((item >> i) & 1) << pos;
  }
  int k = 5;
#pragma unroll
  for (int pos = 0; pos < LOG_T; ++pos) {
    const bool in_round = pos >= LO && pos < LO + R;
    const bool lane_low = pos < 5 && !in_round;
    const bool lane_high = pos >= 5 && pos < 10 && (pos - 5 >= LO && pos - 5 < LO + R);
    if (!in_round && !lane_low && !lane_high) {
      e |= ((item >> k) & 1) << pos;
      ++k;
    }
  }
  return e;
}

// COUNT consecutive twiddles tw[tb .. tb + COUNT); tb is a multiple of COUNT and the table
// 16-byte aligned (two_phase checks), so COUNT >= 4 loads 16 bytes at a time.
template <int COUNT>
FT_HD void load_tw(const int32_t* tw, int tb, int32_t* w) {
  if constexpr (COUNT >= 4) {
#pragma unroll
    for (int g = 0; g < COUNT / 4; ++g) {
      const int4 t = ldg4(tw + tb + 4 * g);
      w[4 * g] = t.x;
      w[4 * g + 1] = t.y;
      w[4 * g + 2] = t.z;
      w[4 * g + 3] = t.w;
    }
  } else {
#pragma unroll
    for (int g = 0; g < COUNT; ++g) w[g] = ldg(tw + tb + g);
  }
}

// [0, 2q) -> [0, q): x - q wraps around to a large value when x < q.
FT_HD uint32_t reduce_2q(uint32_t x, uint32_t q) {
  const uint32_t y = x - q;
  return y < x ? y : x;
}

// a * w * 2^-32 mod q in (0, 2q), for any a < 2^32 and w < q; qinv = q^-1 mod 2^32. With
// t = lo(a w) * qinv, a w - t q is divisible by 2^32 and the low words cancel exactly, so
// (a w - t q) / 2^32 = hi(a w) - hi(t q): no carry to propagate (4 instructions instead of
// the 5 of a w + (-t) q, whose 64-bit sum needs one). hi(a w) < q since a w < 2^32 q, and
// hi(t q) < q, so the difference lies in (-q, q), and + q makes it lazy.
FT_HD uint32_t mont_lazy(uint32_t a, uint32_t w, uint32_t q, uint32_t qinv) {
  const uint64_t p = static_cast<uint64_t>(a) * w;
  const uint32_t t = static_cast<uint32_t>(p) * qinv;
  return static_cast<uint32_t>(p >> 32) - umulhi32(t, q) + q;
}

// Cooley-Tukey: (a, b) -> (a + w b, a - w b); inputs and outputs in [0, 2q).
FT_HD void butterfly_ct(uint32_t& a, uint32_t& b, uint32_t w, uint32_t q, uint32_t qinv) {
  const uint32_t u = reduce_2q(a, q), t = reduce_2q(mont_lazy(b, w, q, qinv), q);
  a = u + t;
  b = u - t + q;
}

// Gentleman-Sande: (a, b) -> (a + b, (a - b) w); inputs and outputs in [0, 2q).
FT_HD void butterfly_gs(uint32_t& a, uint32_t& b, uint32_t w, uint32_t q, uint32_t qinv) {
  const uint32_t u = reduce_2q(a, q), v = reduce_2q(b, q);
  a = u + v;
  b = mont_lazy(u - v + q, w, q, qinv);
}

struct Ctx {
  uint32_t* sm;         // the tile, T words
  const int32_t* in;    // this row of the input
  int32_t* out;         // this row of the output
  const int32_t* tw;    // this limb's twiddle table (N words)
  uint32_t q, qinv;     // q and q^-1 mod 2^32
  uint32_t post;        // Montgomery factor applied on store (final inverse phase only)
  int blk;              // tile index within the row
  bool in_vec, out_vec;  // rows 16-byte aligned
  // A fused input (maps with LOAD): the phase reads in[x] * in2[x] (Montgomery) where in2 is
  // set, and also copies what it read to copy[x] where that is set.
  const int32_t* in2;
  int32_t* copy;
  // A fused epilogue (maps with STORE): out = y * cs + keep[x] * ck (keep set) + add[x] (add set).
  const int32_t* keep;
  const int32_t* add;
  uint32_t cs, ck;
  // A rotation fused in (maps with ROT): the fused input (LOAD) reads in[src(x)] for in[x], the
  // fused epilogue (STORE) add[src(x)] for add[x], src = automorphism_source(x, gal) (arith.h).
  uint32_t gal;
};

// Input value x0 + k of a phase's row, in [0, 2q); in = c.in + x0 made once per item (pin_ptr),
// so that the item's 2^R reads are immediate offsets from one address where the compiler would
// otherwise redo a 64-bit address sum for each. The fused input's optional rows keep plain
// addressing (they may be null).
template <bool FUSED>
FT_HD uint32_t input1(const Ctx& c, const int32_t* in, int x0, int k) {
  uint32_t v = static_cast<uint32_t>(ldg(in + k));
  if constexpr (FUSED) {
    if (c.in2) v = reduce_2q(mont_lazy(v, static_cast<uint32_t>(ldg(c.in2 + x0 + k)), c.q, c.qinv), c.q);
    if (c.copy) c.copy[x0 + k] = static_cast<int32_t>(v);
  }
  return v;
}

// Inputs x0 + k .. x0 + k + 3 (x0 + k a multiple of 4, rows 16-byte aligned).
template <bool FUSED>
FT_HD void input4(const Ctx& c, const int32_t* in, int x0, int k, uint32_t* v) {
  const int4 a = ldg4(in + k);
  int4 r = a;
  if constexpr (FUSED) {
    if (c.in2) {
      const int4 b = ldg4(c.in2 + x0 + k);
#pragma unroll
      for (int m = 0; m < 4; ++m)
        elem(r, m) = static_cast<int32_t>(reduce_2q(
            mont_lazy(static_cast<uint32_t>(elem(a, m)), static_cast<uint32_t>(elem(b, m)), c.q, c.qinv), c.q));
    }
    if (c.copy) st4(c.copy + x0 + k, r);
  }
#pragma unroll
  for (int m = 0; m < 4; ++m) v[m] = static_cast<uint32_t>(elem(r, m));
}

// Input value x of a row read through the automorphism X -> X^gal: in[src(x)] (c.in is the row;
// no tensor product then). A 2^k-aligned run of outputs reads a 2^k-aligned run of inputs in some
// order (src permutes the low bits within a run), so a warp's gathers stay within the lines a
// plain read of the run would touch.
template <int LOG_N>
FT_HD uint32_t input_rotated(const Ctx& c, int x) {
  const uint32_t v = static_cast<uint32_t>(ldg_rotated(c.in, static_cast<uint32_t>(x), c.gal, LOG_N));
  if (c.copy) c.copy[x] = static_cast<int32_t>(v);
  return v;
}

// The fused epilogue's addend at x under a fused rotation: add[src(x)].
template <int LOG_N>
FT_HD int32_t addend_rotated(const Ctx& c, int x) {
  return ldg_rotated(c.add, static_cast<uint32_t>(x), c.gal, LOG_N);
}

// The stored value of a phase's output y (in [0, 2q)) at x: lazy between phases, canonical
// after the last (times post for the inverse), or the fused epilogue's combination.
template <bool FINAL, bool POST, bool FUSED>
FT_HD uint32_t output_value(const Ctx& c, uint32_t y, int32_t keep, int32_t add) {
  if constexpr (FUSED) {
    uint32_t v = reduce_2q(mont_lazy(y, c.cs, c.q, c.qinv), c.q);
    if (c.keep) v = reduce_2q(reduce_2q(mont_lazy(static_cast<uint32_t>(keep), c.ck, c.q, c.qinv), c.q) + v, c.q);
    if (c.add) v = reduce_2q(v + static_cast<uint32_t>(add), c.q);
    return v;
  }
  if (POST) y = mont_lazy(y, c.post, c.q, c.qinv);
  if (FINAL) y = reduce_2q(y, c.q);
  return y;
}

// Output x0 + k through out = c.out + x0 (pinned, as input1's in); ROT: the addend read rotated.
template <int LOG_N, bool FINAL, bool POST, bool FUSED, bool ROT>
FT_HD void output1(const Ctx& c, int32_t* out, int x0, int k, uint32_t y) {
  const int32_t keep = FUSED && c.keep ? ldg(c.keep + x0 + k) : 0;
  int32_t add = 0;
  if (FUSED && c.add) add = ROT ? addend_rotated<LOG_N>(c, x0 + k) : ldg(c.add + x0 + k);
  stg(out + k, static_cast<int32_t>(output_value<FINAL, POST, FUSED>(c, y, keep, add)));
}

template <int LOG_N, bool FINAL, bool POST, bool FUSED, bool ROT>
FT_HD void output4(const Ctx& c, int32_t* out, int x0, int k, const uint32_t* y) {
  const int4 keep = FUSED && c.keep ? ldg4(c.keep + x0 + k) : make_int4(0, 0, 0, 0);
  int4 add = make_int4(0, 0, 0, 0);
  if (FUSED && c.add) {
    if constexpr (ROT) {
#pragma unroll
      for (int m = 0; m < 4; ++m) elem(add, m) = addend_rotated<LOG_N>(c, x0 + k + m);
    } else {
      add = ldg4(c.add + x0 + k);
    }
  }
  int4 r;
#pragma unroll
  for (int m = 0; m < 4; ++m)
    elem(r, m) = static_cast<int32_t>(output_value<FINAL, POST, FUSED>(c, y[m], elem(keep, m), elem(add, m)));
  stg4(out + k, r);
}

// One stage of the forward (CT) or inverse (GS) transform, unrolled over K = 0..R-1: the
// forward stages pair the u bits from the top down, the inverse ones from the bottom up.
template <int LOG_N, bool INV, int R, int XLO, int K>
FT_HD void round_stage(uint32_t* v, const Ctx& c, int xn) {
  if constexpr (K < R) {
    constexpr int E = 1 << R;
    constexpr int BIT = INV ? K : R - 1 - K;          // u bit paired in this stage
    constexpr int COUNT = 1 << (INV ? R - 1 - K : K);  // distinct twiddles
    int32_t w[COUNT];
    load_tw<COUNT>(c.tw, xn >> (XLO + BIT + 1), w);
#pragma unroll
    for (int u0 = 0; u0 < E; ++u0) {
      if ((u0 >> BIT) & 1) continue;
      const uint32_t tw = static_cast<uint32_t>(w[u0 >> (BIT + 1)]);
      if constexpr (INV) butterfly_gs(v[u0], v[u0 | (1 << BIT)], tw, c.q, c.qinv);
      else butterfly_ct(v[u0], v[u0 | (1 << BIT)], tw, c.q, c.qinv);
    }
    round_stage<LOG_N, INV, R, XLO, K + 1>(v, c, xn);
  }
}

// A round over the j bits [JLO, JLO + R): every item is 2^R tile elements that differ in
// exactly those bits (row indices x0 + (u << XLO)); R stages of butterflies on them in
// registers. The first round of a phase reads its items straight from the input row (FL: the
// fused input), the last writes them straight to the output row (FS: the fused epilogue);
// the others, and the exchanges between rounds, go through the tile in shared memory. Where
// an item's elements are consecutive in the row (the small phase's bottom round) the global
// accesses are 16 bytes wide. FR: the fused input / epilogue reads its row through the rotation
// (Ctx::gal), a build of its own so that the phases without one keep their code.
template <int LOG_N, bool LARGE, int CAP, bool INV, int R, int JLO, bool FIRST, bool LAST, bool FL, bool FS, bool FR>
FT_HD void ntt_round(const Ctx& c, int tid) {
  using G = Geo<LOG_N, LARGE, CAP>;
  constexpr int LO = G::JPOS + JLO, XLO = G::XPOS + JLO, E = 1 << R, ITEMS = G::T >> R;
  constexpr bool FINAL = INV == LARGE;  // forward: large then small; inverse: small then large
  constexpr bool POST = INV && LARGE;   // the last phase of the inverse
  constexpr bool VEC = XLO == 0 && R >= 2;
  for (int it = tid; it < ITEMS; it += G::THREADS) {
    const int e0 = deposit<G::LOG_T, LO, R>(it);
    const int x0 = G::x_of(e0, c.blk);
    // swz is linear over XOR and e0's round bits are clear: swz(e0 | (u << LO)) = s0 ^ swz(u << LO)
    const int s0 = swz(e0);
    uint32_t v[E];
    if constexpr (FIRST && FL && FR) {
#pragma unroll
      for (int u = 0; u < E; ++u) v[u] = input_rotated<LOG_N>(c, x0 + (u << XLO));
    } else if constexpr (FIRST) {
      const int32_t* in = pin_ptr(c.in + x0);
      if (VEC && c.in_vec) {
#pragma unroll
        for (int u = 0; u < E; u += 4) input4<FL>(c, in, x0, u, v + u);
      } else {
#pragma unroll
        for (int u = 0; u < E; ++u) v[u] = input1<FL>(c, in, x0, u << XLO);
      }
    } else {
#pragma unroll
      for (int u = 0; u < E; ++u) v[u] = c.sm[s0 ^ swz(u << LO)];
    }
    round_stage<LOG_N, INV, R, XLO, 0>(v, c, G::N + x0);
    if constexpr (LAST) {
      int32_t* out = pin_ptr(c.out + x0);
      if (VEC && c.out_vec) {
#pragma unroll
        for (int u = 0; u < E; u += 4) output4<LOG_N, FINAL, POST, FS, FR>(c, out, x0, u, v + u);
      } else {
#pragma unroll
        for (int u = 0; u < E; ++u) output1<LOG_N, FINAL, POST, FS, FR>(c, out, x0, u << XLO, v[u]);
      }
    } else {
#pragma unroll
      for (int u = 0; u < E; ++u) c.sm[s0 ^ swz(u << LO)] = v[u];
    }
  }
}

// The K-th round in execution order: forward from the top j bits down, inverse upwards.
template <int LOG_N, bool LARGE, int CAP, bool INV, int K, bool FL, bool FS, bool FR>
FT_HD void ntt_round_k(const Ctx& c, int tid) {
  using G = Geo<LOG_N, LARGE, CAP>;
  constexpr int I = INV ? K : G::NROUNDS - 1 - K;
  ntt_round<LOG_N, LARGE, CAP, INV, G::chunk_r(I), G::chunk_lo(I), K == 0, K == G::NROUNDS - 1, FL, FS, FR>(c, tid);
}

// Step s (= round s in execution order) of a phase for thread tid; a __syncthreads()
// separates consecutive steps.
template <int LOG_N, bool LARGE, int CAP, bool INV, bool FL, bool FS, bool FR = false>
FT_HD void ntt_step(int s, const Ctx& c, int tid) {
  using G = Geo<LOG_N, LARGE, CAP>;
  static_assert(G::NROUNDS >= 2, "the first round reads the input and the last writes the output");
  if (s == 0) {
    ntt_round_k<LOG_N, LARGE, CAP, INV, 0, FL, FS, FR>(c, tid);
  } else if (s == 1) {
    ntt_round_k<LOG_N, LARGE, CAP, INV, 1, FL, FS, FR>(c, tid);
  } else {
    if constexpr (G::NROUNDS >= 3) ntt_round_k<LOG_N, LARGE, CAP, INV, 2, FL, FS, FR>(c, tid);
  }
}

// The tables and rows of one row of a phase: limb `limb` of mod, row `tw_row` of the twiddle
// table tw (N words per row; tw_row = limb unless a row map says otherwise, csrc/table_rows.h).
FT_HD Ctx row_ctx(uint32_t* sm, const int32_t* in, int32_t* out, const int32_t* mod, const int32_t* tw, int limb,
                  int tw_row, int64_t n, uint32_t post, int blk, bool vec = true) {
  Ctx c;
  c.sm = sm;
  c.in = in;
  c.out = out;
  c.tw = tw + static_cast<int64_t>(tw_row) * n;
  c.q = static_cast<uint32_t>(ldg(mod + 2 * limb));
  c.qinv = static_cast<uint32_t>(ldg(mod + 2 * limb + 1));
  c.post = post;
  c.blk = blk;
  c.in_vec = c.out_vec = vec;
  c.in2 = nullptr;
  c.copy = nullptr;
  c.keep = nullptr;
  c.add = nullptr;
  c.cs = c.ck = 0;
  c.gal = 0;
  return c;
}

// Occupancy targets (__launch_bounds__'s second argument; without a target ptxas may take up
// to 255 registers): 64 registers per thread.
constexpr int phase_min_blocks(int threads) { return threads >= 1024 ? 1 : 1024 / threads; }

// A phase (LARGE: the one on the top bits) of the forward (INV = false) or inverse NTT over
// the rows a row map M names, as a block program (program.cuh). M provides
//   Args; static int64_t rows(const Args&);
//   static Ctx row(const Args&, int64_t r, uint32_t* sm, int blk): row r's input, output,
//     tables and post factor (blk: the tile of the row);
//   LOAD / STORE: whether the phase applies the Ctx's fused input (in2, copy) / fused
//     epilogue (keep, add, cs, ck) that row() sets;
//   ROT: whether that input / epilogue reads its row through the rotation Ctx::gal.
// REV: the rows in reverse launch order (for L2 reuse: where the launch before wrote its rows
// in order, the last ones written, most likely still in L2, are read first).
template <int LOG_N, bool LARGE, bool INV, class M, bool REV = false>
struct NttPhase {
  using Args = typename M::Args;
  using G = Geo<LOG_N, LARGE, kCap>;
  static constexpr int THREADS = G::THREADS, SMEM = G::T;
  // An epilogue holds more registers: 3/4 of the plain phase's blocks per SM.
  static constexpr int MIN_BLOCKS =
      M::STORE && phase_min_blocks(THREADS) * 3 / 4 > 0 ? phase_min_blocks(THREADS) * 3 / 4 : phase_min_blocks(THREADS);
  struct State {};
  using Blk = Ctx;
  FT_HD static int64_t blocks(const Args& a) { return M::rows(a) * G::BLOCKS_PER_ROW; }
  FT_HD static Blk setup(const Args& a, int64_t block_launch, uint32_t* sm) {
    const int64_t block = REV ? blocks(a) - 1 - block_launch : block_launch;
    return M::row(a, block / G::BLOCKS_PER_ROW, sm, static_cast<int>(block % G::BLOCKS_PER_ROW));
  }
  FT_HD static int num_steps(const Args&, const Blk&) { return G::NROUNDS; }
  FT_HD static void step(const Args&, const Blk& c, int s, int tid, State&) {
    ntt_step<LOG_N, LARGE, kCap, INV, M::LOAD, M::STORE, M::ROT>(s, c, tid);
  }
};

struct RowsArgs {
  const int32_t* in;
  int32_t* out;
  const int32_t* mod;
  const int32_t* tw;    // (L, N), or any (R, N) through tw_rows
  const int32_t* post;  // (L,), the inverse's last phase only
  int64_t rows;
  int L;
  bool in_vec, out_vec;
  TableRows tw_rows;    // the twiddle row of each limb (count 0: row l)
  bool whole;           // rows = polys * L: launched limb-major
  Divisor by_polys, by_L;
};

// Every row r of the input, with limb r % L.
template <int LOG_N>
struct AllRows {
  using Args = RowsArgs;
  static constexpr bool LOAD = false, STORE = false, ROT = false;
  FT_HD static int64_t rows(const Args& a) { return a.rows; }
  FT_HD static Ctx row(const Args& a, int64_t r_launch, uint32_t* sm, int blk) {
    constexpr int64_t N = int64_t(1) << LOG_N;
    // limb-major launch order where the rows are whole polynomials: one twiddle table in L2
    int64_t r = r_launch;
    int l;
    if (a.whole) {
      const int64_t q = a.by_polys.div(r_launch);  // the limb (r_launch < polys * L)
      r = (r_launch - q * a.by_polys.d) * a.L + q;
      l = static_cast<int>(q);
    } else {
      l = static_cast<int>(a.by_L.mod(r_launch));
    }
    Ctx c = row_ctx(sm, a.in + r * N, a.out + r * N, a.mod, a.tw, l, table_row(a.tw_rows, l), N,
                    a.post ? static_cast<uint32_t>(ldg(a.post + l)) : 0u, blk);
    c.in_vec = a.in_vec;
    c.out_vec = a.out_vec;
    return c;
  }
};

// The transform of every row (x -> y, y may equal x) for kMinLogN <= log_n <= kMaxLogN, on
// any executor (program.cuh). The twiddle table must be 16-byte aligned (the callers fall back
// to the stage-wise kernels where it is not).
template <bool INV, class Exec>
cudaError_t two_phase(Exec& ex, int log_n, const int32_t* x, int32_t* y, int64_t rows, int L, const int32_t* mod,
                      const int32_t* tw, const int32_t* post, const TableRows& tw_rows) {
  if (!table_rows_fit(tw_rows, L) || !aligned16(tw)) return cudaErrorInvalidValue;
  const int64_t polys = rows / L;
  const bool whole = polys * L == rows;
  const Divisor by_polys(whole ? polys : 1), by_L(L);
  const RowsArgs first{x, y, mod, tw, nullptr, rows, L, aligned16(x), aligned16(y), tw_rows, whole, by_polys, by_L};
  const RowsArgs second{y, y, mod, tw, post, rows, L, aligned16(y), aligned16(y), tw_rows, whole, by_polys, by_L};
  return dispatch_log_n(log_n, [&](auto tag) {
    constexpr int LOG_N = decltype(tag)::value;
    // forward: the large phase (top bits) first; inverse: the small one first
    FT_TRY((ex.template run<NttPhase<LOG_N, !INV, INV, AllRows<LOG_N>>>(first)));
    return ex.template run<NttPhase<LOG_N, INV, INV, AllRows<LOG_N>>>(second);
  });
}

// ---- fallback for other sizes: one radix-2 stage per launch, one butterfly per thread ----
// Values between stages are lazy ([0, 2q)); the last stage makes them canonical (and
// multiplies by post for the inverse).
struct StageArgs {
  const int32_t* in;
  int32_t* out;
  int64_t pairs;  // rows * N / 2
  int L, log_n, bit;
  bool last;
  const int32_t* mod;
  const int32_t* tw;
  const int32_t* post;  // inverse, last stage only
  TableRows tw_rows;    // the twiddle row of each limb (count 0: row l)
};

template <bool INV>
FT_HD void ntt_stage_thread(const StageArgs& a, int64_t idx) {
  if (idx >= a.pairs) return;
  const int64_t n = int64_t(1) << a.log_n, half = n >> 1;
  const int64_t row = idx >> (a.log_n - 1), k = idx & (half - 1);
  const int l = static_cast<int>(row % a.L);
  const uint32_t q = static_cast<uint32_t>(a.mod[2 * l]), qinv = static_cast<uint32_t>(a.mod[2 * l + 1]);
  const int bit = a.bit;
  const int64_t lo = ((k >> bit) << (bit + 1)) | (k & ((int64_t(1) << bit) - 1)), hi = lo + (int64_t(1) << bit);
  const uint32_t w = static_cast<uint32_t>(ldg(a.tw + table_row(a.tw_rows, l) * n + ((n + lo) >> (bit + 1))));
  uint32_t x = static_cast<uint32_t>(a.in[row * n + lo]), y = static_cast<uint32_t>(a.in[row * n + hi]);
  if (!INV) butterfly_ct(x, y, w, q, qinv);
  else butterfly_gs(x, y, w, q, qinv);
  if (a.last) {
    if (a.post) {
      const uint32_t c = static_cast<uint32_t>(a.post[l]);
      x = mont_lazy(x, c, q, qinv);
      y = mont_lazy(y, c, q, qinv);
    }
    x = reduce_2q(x, q);
    y = reduce_2q(y, q);
  }
  a.out[row * n + lo] = static_cast<int32_t>(x);
  a.out[row * n + hi] = static_cast<int32_t>(y);
}

}  // namespace fhetorch::cuda::ntt_detail
