// Base conversion on int8 tensor cores (sm_80+ mma.sync m16n8k32, u8 x u8 -> s32), for the
// conversion maps of bconv_core.cuh with at most 16 inputs. Same result as Bconv (the
// canonical residue of sum_k centred(t_k) m_k), bit for bit.
//
// The product as a byte matrix product. Write X_k = centred(t_k) + 2^30 (in [0, 2^31), 4 bytes)
// and M'_k = m_k mod p; with W_j[k] = 2^(8j) M'_k mod p and byte i of W_j[k] written W_ji[k]:
//   sum_k M'_k X_k  ==  sum_i 2^(8i) C_i  (mod p),   C_i = sum_(k, j) W_ji[k] byte_j(X_k).
// So one mma row per (output o, byte i) and one K entry per (input k, byte j): the B operand
// is the 32-bit words X_k themselves (a B fragment register holds rows 4t..4t+3 of one
// column: limb t's four bytes), 8 inputs per k32 step, and the A operand a table of W's bytes
// each block makes for its chunk of outputs. C_i <= 64 * 255^2 < 2^22, so sum_i 2^(8i) C_i < 2^47; minus off = 2^30 sum_k M'_k
// mod p (the accumulators of byte i start at minus byte i of off) it is the Montgomery-form sum,
// which smr() ends as Bconv's finish() does. Per output coefficient and lane: 2 mma (16 inputs),
// two adds, a wide multiply-add and one reduction, instead of 12-16 wide multiplies and folds
// (bconv_core.cuh).
//
// m-tiles in pairs: tile 2u holds bytes 0 and 1, tile 2u + 1 bytes 2 and 3, of outputs 8u .. 8u + 7,
// row r being output 8u + (r & 7), byte r >> 3 (+ 2). A thread (group g = lane >> 2, t = lane & 3)
// so holds all four bytes of output 8u + g for columns 2t and 2t + 1: L = C_0 + 2^8 C_1 and
// H = C_2 + 2^8 C_3, each below 2^31, and L + 2^16 H with one wide multiply-add, no exchange.
//
// Fragment layouts (PTX ISA, mma.m16n8k32 with 8-bit A/B): A regs a0..a3 = (row g, cols 4t..+3),
// (g + 8, 4t..), (g, 16 + 4t..), (g + 8, 16 + 4t..); B regs b0, b1 = (rows 4t..+3, col g),
// (16 + 4t.., g); C c0..c3 = (g, 2t), (g, 2t + 1), (g + 8, 2t), (g + 8, 2t + 1); byte e of a
// register is element e. The host emulation (program.cuh's HostExec) computes each lane's C
// from these layouts element by element, so the byte tables and the epilogue are checked
// without a GPU; the layouts themselves by the CUDA parity tests.
#pragma once
#include <atomic>
#include <cstdint>

#include "program.cuh"
#include "util.cuh"

namespace fhetorch::cuda {

constexpr int kTcThreads = 256;          // 8 warps
constexpr int kTcWarpCoefs = 64;         // columns a warp (8 n8 tiles)
constexpr int kTcCoefs = kTcThreads / 32 * kTcWarpCoefs;  // 512 coefficients a block
constexpr int kTcMaxOuts = 64;           // outputs a block (8 pairs of m-tiles, 8 outputs a pair)
constexpr int kTcMaxIn = 16;             // inputs (2 k32 steps of 8)
constexpr int kTcTargetBlocks = 3 * 132; // the blocks resident at once on an H100 (3 an SM)

struct TcGrid {
  int tiles, chunks, outs;  // coefficient tiles of kTcCoefs, output chunks per group, outputs per chunk
};

// FHETORCH_BCONV_TC_BLOCKS (read once) overrides the launch's target block count (tuning).
inline int64_t bconv_tc_target_blocks() {
  static const int64_t v = [] {
    const char* e = std::getenv("FHETORCH_BCONV_TC_BLOCKS");
    const long long x = e ? std::atoll(e) : 0;
    return x > 0 ? static_cast<int64_t>(x) : static_cast<int64_t>(kTcTargetBlocks);
  }();
  return v;
}

// Chunks so that the launch about fills the GPU once; outputs a chunk a multiple of 8, at most 64.
inline TcGrid bconv_tc_grid(int64_t groups, int64_t n, int max_out) {
  TcGrid g;
  g.tiles = static_cast<int>((n + kTcCoefs - 1) / kTcCoefs);
  const int64_t base = groups * g.tiles, target = bconv_tc_target_blocks();
  int64_t ch = base > 0 ? (2 * target + base) / (2 * base) : 1;  // target / base, rounded
  const int64_t lo = (max_out + kTcMaxOuts - 1) / kTcMaxOuts, hi = (max_out + 7) / 8;
  ch = ch < lo ? lo : ch > hi ? hi : ch;
  if (ch < 1) ch = 1;
  const int per = static_cast<int>((max_out + ch - 1) / ch);
  g.outs = (per + 7) / 8 * 8;
  if (g.outs < 8) g.outs = 8;
  g.chunks = (max_out + g.outs - 1) / g.outs;
  if (g.chunks < 1) g.chunks = 1;
  return g;
}

// The fewest inputs a conversion takes to the tensor cores by default: with 9-16 inputs (ModUp's
// digits, ModDown's special limbs) they measured ~5 % faster than the integer pipes at 48 x 12 on
// an H200, with 2-4 (a rescale's dropped limbs) ~3 % slower (docs/benchmarks.md, session 25).
constexpr int kTcMinIn = 9;

// Whether a conversion of max_in inputs runs on the tensor cores: FHETORCH_BCONV_TC=0 never
// (bconv_core.cuh's Bconv on the integer pipes), =1 for every max_in <= 16, unset for kTcMinIn
// .. 16; bconv_tc_override() (0 or 1) wins over the environment (the host emulation's tests).
inline int& bconv_tc_override() {
  static int v = -1;
  return v;
}
inline bool bconv_tc_takes(int max_in) {
  static const int mode = [] {
    const char* e = std::getenv("FHETORCH_BCONV_TC");
    return e && e[0] == '0' ? 0 : e && e[0] == '1' ? 1 : -1;
  }();
  const int m = bconv_tc_override() >= 0 ? bconv_tc_override() : mode;
  if (max_in > kTcMaxIn || m == 0) return false;
  return m == 1 || max_in >= kTcMinIn;
}

template <class M>
struct TcArgs {
  typename M::Args m;
  TcGrid grid;
};

struct TcSmem {
  uint32_t afrag[kTcMaxOuts / 4][2][32][4];  // [m-tile][k step][lane][register]
  unsigned long long msum[kTcMaxOuts];       // sum_k m'_ok (the offset's sum)
  int32_t* out[kTcMaxOuts];
  const int32_t* in[kTcMaxIn];
  int32_t q_in[kTcMaxIn];
  int32_t p[kTcMaxOuts], pinv[kTcMaxOuts];
  int32_t neg_off[kTcMaxOuts][4];           // minus byte i of the offset: the accumulators' start
  uint32_t c8[kTcMaxOuts];                   // 2^40 mod p: a Montgomery step multiplies by 2^8
};

// D += A B on one warp's fragments.
FT_HD void tc_mma(int32_t (&d)[4], const uint32_t* a, const uint32_t* b) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("mma.sync.aligned.m16n8k32.row.col.s32.u8.u8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
               "{%0,%1,%2,%3};\n"
               : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#elif defined(__CUDA_ARCH__)
  (void)d, (void)a, (void)b;
  __trap();  // no int8 mma before sm_80: run_bconv never launches this there (tc_device_ok)
#else
  (void)d, (void)a, (void)b;  // the host emulation models the mma instead (emulate_mma)
#endif
}

// Whether the current device has the int8 mma.sync (compute capability 8.0 or later), per device.
inline bool tc_device_ok() {
  constexpr int kDevices = 64;
  static std::atomic<int> known[kDevices];  // 0: not asked yet, 1: no, 2: yes
  int dev = 0;
  if (cudaGetDevice(&dev) != cudaSuccess) return false;
  if (dev < kDevices && known[dev].load() != 0) return known[dev].load() == 2;
  int major = 0;
  const bool ok = cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) == cudaSuccess && major >= 8;
  if (dev < kDevices) known[dev].store(ok ? 2 : 1);
  return ok;
}

template <int KS, class M>
struct BconvTc {
  using Args = TcArgs<M>;
  static_assert(KS == 1 || KS == 2, "8 or 16 inputs");
  static constexpr int THREADS = kTcThreads, MIN_BLOCKS = 3;  // <= 80 registers (64 spill with 16 inputs)
  static constexpr int SMEM = static_cast<int>(sizeof(TcSmem) / 4);
  static constexpr int NT = kTcWarpCoefs / 8;  // n8 tiles a warp
  struct State {};
  struct Blk {
    int g, o0, nout, nin;
    int64_t c0;
    TcSmem* s;
  };
  FT_HD static int64_t blocks(const Args& a) {
    return static_cast<int64_t>(M::groups(a.m)) * a.grid.chunks * a.grid.tiles;
  }
  FT_HD static Blk setup(const Args& a, int64_t block, uint32_t* sm) {
    const int64_t rest = block / a.grid.tiles;
    Blk b;
    b.c0 = (block % a.grid.tiles) * kTcCoefs;
    b.g = static_cast<int>(rest / a.grid.chunks);
    b.o0 = static_cast<int>(rest % a.grid.chunks) * a.grid.outs;
    const int left = M::n_out(a.m, b.g) - b.o0;
    b.nout = left < a.grid.outs ? left : a.grid.outs;
    b.nin = M::n_in(a.m, b.g);
    b.s = reinterpret_cast<TcSmem*>(sm);
    return b;
  }
  // constants, A fragments, offsets, products
  FT_HD static int num_steps(const Args&, const Blk& b) { return b.nout > 0 ? 4 : 0; }
  FT_HD static void step(const Args& a, const Blk& b, int s, int tid, State&) {
    if (s == 0) return constants(a, b, tid);
    if (s == 1) return a_fragments(a, b, tid);
    if (s == 2) return offsets(b, tid);
    products(a, b, tid);
  }

 private:
  FT_HD static int m_pairs(const Blk& b) { return (b.nout + 7) / 8; }

  // The outputs the m-tiles hold (a multiple of 8).
  FT_HD static int rows_used(const Blk& b) { return 8 * m_pairs(b); }

  // Per output of the chunk: p, p^-1, 2^40 mod p, its row; per input: its row and modulus.
  FT_HD static void constants(const Args& a, const Blk& b, int tid) {
    TcSmem& sm = *b.s;
    for (int o = tid; o < rows_used(b); o += THREADS) {
      const bool on = o < b.nout;
      const int32_t* pm = on ? M::out_mod(a.m, b.g, b.o0 + o) : nullptr;
      const int32_t p = on ? ldg(pm) : 1;
      sm.p[o] = p;
      sm.pinv[o] = on ? ldg(pm + 1) : 1;
      sm.out[o] = on ? M::out_row(a.m, b.g, b.o0 + o) : nullptr;
      sm.c8[o] = on ? static_cast<uint32_t>((uint64_t(1) << 40) % static_cast<uint32_t>(p)) : 0u;
      sm.msum[o] = 0;
    }
    for (int k = tid; k < kTcMaxIn; k += THREADS) {
      const bool on = k < b.nin;
      sm.in[k] = on ? M::in_row(a.m, b.g, k) : nullptr;
      sm.q_in[k] = on ? ldg(M::in_mod(a.m, b.g, k)) : 1;
    }
  }

  // Per (output o, input k): W_j = 2^(8j) m'_ok mod p_o (j = 0..3, Montgomery steps with 2^40 mod
  // p; 0 outside the chunk and the digit), and its four A-fragment words: word i packs byte i of
  // W_0..W_3 (K entries 4k' .. 4k' + 3) and sits in row (o & 7) + 8 (i & 1) of m-tile 2 (o / 8) +
  // (i >> 1), i.e. lane (o & 7) * 4 + (k' & 3), register (i & 1) + 2 (k' >> 2), k step k / 8
  // (k' = k % 8). Also m'_ok into the output's sum.
  FT_HD static void a_fragments(const Args& a, const Blk& b, int tid) {
    TcSmem& sm = *b.s;
    const int ks = 8 * KS;
    for (int idx = tid; idx < rows_used(b) * ks; idx += THREADS) {
      const int o = idx / ks, k = idx - o * ks;
      const uint32_t p = static_cast<uint32_t>(sm.p[o]), nqinv = 0u - static_cast<uint32_t>(sm.pinv[o]);
      uint32_t w[4] = {0, 0, 0, 0};
      if (o < b.nout && k < b.nin) {
        const int32_t m = ldg(M::mat_row(a.m, b.g, b.o0 + o) + k);
        w[0] = static_cast<uint32_t>(m < 0 ? m + static_cast<int32_t>(p) : m);
        smem_add(sm.msum[o], w[0]);
        for (int j = 1; j < 4; ++j) {  // w * 2^40 * 2^-32 mod p, in [0, 2p) then [0, p)
          const uint64_t prod = static_cast<uint64_t>(w[j - 1]) * sm.c8[o];
          const uint32_t tq = static_cast<uint32_t>(prod) * nqinv;
          const uint32_t r = static_cast<uint32_t>((prod + static_cast<uint64_t>(tq) * p) >> 32);
          w[j] = r >= p ? r - p : r;
        }
      }
      const int o8 = o & 7, s = k >> 3, kp = k & 7;
      for (int i = 0; i < 4; ++i) {
        uint32_t v = 0;
        for (int e = 0; e < 4; ++e) v |= ((w[e] >> (8 * i)) & 0xffu) << (8 * e);
        sm.afrag[2 * (o >> 3) + (i >> 1)][s][o8 * 4 + (kp & 3)][(i & 1) + 2 * (kp >> 2)] = v;
      }
    }
  }
  FT_HD static void smem_add(unsigned long long& x, uint32_t v) {
#if defined(__CUDA_ARCH__)
    atomicAdd(&x, static_cast<unsigned long long>(v));
#else
    x += v;  // the host runs a step's threads one after another
#endif
  }
  // Each output's offset 2^30 sum_k m'_ok mod p, as the negated bytes the accumulators start at.
  FT_HD static void offsets(const Blk& b, int tid) {
    TcSmem& sm = *b.s;
    for (int o = tid; o < rows_used(b); o += THREADS) {
      const uint64_t p = static_cast<uint32_t>(sm.p[o]);
      const uint32_t off = static_cast<uint32_t>(((sm.msum[o] % p) << 30) % p);
      for (int i = 0; i < 4; ++i) sm.neg_off[o][i] = -static_cast<int32_t>((off >> (8 * i)) & 0xffu);
    }
  }

  // X of an input value v mod q: centred(v) + 2^30, in [0, 2^31).
  FT_HD static uint32_t x_value(int32_t v, int32_t q) { return static_cast<uint32_t>(centre(v, q) + (int32_t(1) << 30)); }
  // X_k at coefficient c (0 past the digit or the row).
  FT_HD static uint32_t x_word(const Args& a, const Blk& b, int k, int64_t c) {
    if (k >= b.nin || c >= M::n(a.m)) return 0u;
    return x_value(ldg(b.s->in[k] + c), b.s->q_in[k]);
  }

#if !defined(__CUDA_ARCH__)
  // The host's model of one lane's C fragment for m-tile mt and the n8 tile at column col8.
  static void emulate_mma(const Args& a, const Blk& b, int mt, int64_t col8, int lane, int32_t (&d)[4]) {
    const TcSmem& sm = *b.s;
    const int g = lane >> 2, t = lane & 3;
    for (int e = 0; e < 4; ++e) {
      const int r = g + 8 * (e >> 1), col = 2 * t + (e & 1);
      int64_t acc = d[e];
      for (int s = 0; s < KS; ++s)
        for (int kk = 0; kk < 32; ++kk) {
          // A[r][kk] from the fragment table: lane (r & 7) * 4 + (kk & 15) / 4, register
          // (r >> 3) + 2 (kk >> 4), byte kk & 3
          const uint32_t aw = sm.afrag[mt][s][(r & 7) * 4 + (kk & 15) / 4][(r >> 3) + 2 * (kk >> 4)];
          const uint32_t bw = x_word(a, b, 8 * s + kk / 4, col8 + col);
          acc += static_cast<int64_t>((aw >> (8 * (kk & 3))) & 0xffu) * ((bw >> (8 * (kk & 3))) & 0xffu);
        }
      d[e] = static_cast<int32_t>(acc);
    }
  }
#endif

  // Every pair of m-tiles of the chunk times the warp's 64 columns.
  FT_HD static void products(const Args& a, const Blk& b, int tid) {
    const TcSmem& sm = *b.s;
    const int lane = tid & 31, g = lane >> 2, t = lane & 3;
    const int64_t cw = b.c0 + static_cast<int64_t>(tid >> 5) * kTcWarpCoefs, n = M::n(a.m);
    if (cw >= n) return;  // a whole warp past the row (the mma is warp-wide)
    const bool full = cw + kTcWarpCoefs <= n;  // warp-uniform: no column past the row
    // B fragments: limbs 8 s + 4 h + t (h = 0, 1) at columns cw + 8 nt + g
    uint32_t bf[NT][KS][2];
#pragma unroll
    for (int s = 0; s < KS; ++s)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int k = 8 * s + 4 * h + t;
        const int32_t* row = k < b.nin ? sm.in[k] + cw + g : nullptr;
        const int32_t q = sm.q_in[k];
#pragma unroll
        for (int nt = 0; nt < NT; ++nt)
          bf[nt][s][h] = row && (full || cw + 8 * nt + g < n) ? x_value(ldg(row + 8 * nt), q) : 0u;
      }
    const int pairs = m_pairs(b);
    for (int u = 0; u < pairs; ++u) {
      uint32_t af[2][KS][4];  // the pair's tiles: bytes (0, 1), (2, 3)
#pragma unroll
      for (int h = 0; h < 2; ++h)
#pragma unroll
        for (int s = 0; s < KS; ++s)
#pragma unroll
          for (int r = 0; r < 4; ++r) af[h][s][r] = sm.afrag[2 * u + h][s][lane][r];
      const int o = 8 * u + g;
      const bool on = o < b.nout;
      const int32_t p = sm.p[o], pinv = sm.pinv[o];
      int32_t* out = on ? sm.out[o] + cw + 2 * t : nullptr;  // columns 2t, 2t + 1 of the warp's first tile
#pragma unroll
      for (int nt = 0; nt < NT; ++nt) {
        int32_t y0, y1;
        columns(a, b, u, nt, cw, lane, af, bf, sm.neg_off[o], p, pinv, y0, y1);
        const int64_t c = cw + 8 * nt + 2 * t;
        if (on && (full || c < n)) out[8 * nt] = y0;
        if (on && (full || c + 1 < n)) out[8 * nt + 1] = y1;
      }
    }
  }

  // The lane's output values of m-tile pair u at its columns of n8 tile nt (every lane of the warp
  // calls it together: the mma is warp-wide).
  FT_HD static void columns(const Args& a, const Blk& b, int u, int nt, int64_t cw, int lane,
                            const uint32_t (&af)[2][KS][4], const uint32_t (&bf)[NT][KS][2], const int32_t (&neg)[4],
                            int32_t p, int32_t pinv, int32_t& y0, int32_t& y1) {
    // the accumulators start at minus the offset's bytes: rows g, g + 8 of tile h are bytes 2h, 2h + 1
    int32_t lo[4] = {neg[0], neg[0], neg[1], neg[1]}, hi[4] = {neg[2], neg[2], neg[3], neg[3]};
#if defined(__CUDA_ARCH__)
    (void)a, (void)b, (void)u, (void)cw, (void)lane;
#pragma unroll
    for (int s = 0; s < KS; ++s) {
      tc_mma(lo, af[0][s], bf[nt][s]);
      tc_mma(hi, af[1][s], bf[nt][s]);
    }
#else
    (void)af, (void)bf;
    emulate_mma(a, b, 2 * u, cw + 8 * nt, lane, lo);
    emulate_mma(a, b, 2 * u + 1, cw + 8 * nt, lane, hi);
#endif
    // columns 2t (elements 0, 2) and 2t + 1 (1, 3): L = C_0 + 2^8 C_1, H = C_2 + 2^8 C_3
    const int64_t t0 = mad_wide(hi[0] + hi[2] * 256, 65536, static_cast<int64_t>(lo[0] + lo[2] * 256));
    const int64_t t1 = mad_wide(hi[1] + hi[3] * 256, 65536, static_cast<int64_t>(lo[1] + lo[3] * 256));
    y0 = canon(smr(t0, p, pinv), p);
    y1 = canon(smr(t1, p, pinv), p);
  }
};

}  // namespace fhetorch::cuda
