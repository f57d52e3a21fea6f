// Base conversion on int8 tensor cores (sm_80+ mma.sync m16n8k32, u8 x u8 -> s32), for the
// conversion maps of bconv_core.cuh with at most 16 inputs. Same result as Bconv (the
// canonical residue of sum_k centred(t_k) m_k), bit for bit.
//
// The product as a byte matrix product. Write X_k = centred(t_k) + 2^30 (in [0, 2^31), 4 bytes)
// and M'_k = m_k mod p; with W_j[k] = 2^(8j) M'_k mod p and byte i of W_j[k] written W_ji[k]:
//   sum_k M'_k X_k  ==  sum_i 2^(8i) C_i  (mod p),   C_i = sum_(k, j) W_ji[k] byte_j(X_k).
// So one mma row per (output o, byte i) and one K entry per (input k, byte j): the B operand
// is the 32-bit words X_k themselves (a B fragment register holds rows 4t..4t+3 of one
// column: limb t's four bytes), 8 inputs per k32 step, and the A operand is a per-block table
// of W's bytes. C_i <= 64 * 255^2 < 2^22, so sum_i 2^(8i) C_i < 2^47; minus off = 2^30 sum_k M'_k
// mod p (the accumulators of byte i start at minus byte i of off) it is the Montgomery-form sum,
// which smr() ends as Bconv's finish() does. Per output coefficient: 2 mma over 32 values, a
// few adds and one reduction, instead of 12-16 wide multiplies and folds (bconv_core.cuh).
//
// The m-tiles come in pairs, 8 outputs a pair: in tile h (0 or 1) of pair P, row r is output
// 8 P + (r & 7), byte 2 h + (r >> 3). A lane (group g = lane >> 2, t = lane & 3) then holds, for
// output 8 P + g and columns 2t and 2t + 1, C_2h and C_2h+1 in tile h: L = C_0 + 2^8 C_1 from tile
// 0 and H = C_2 + 2^8 C_3 from tile 1, each below 2^31, and its two values L + 2^16 H with no
// exchange between lanes (4 mma for 2 values, as a single tile with an exchange would take).
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
constexpr int kTcWarpCoefs = 64;         // 8 columns (n8 tiles) a warp
constexpr int kTcCoefs = kTcThreads / 32 * kTcWarpCoefs;  // 512 coefficients a block
constexpr int kTcMaxOuts = 64;           // outputs a block (8 pairs of m-tiles, 8 outputs a pair)
constexpr int kTcMaxIn = 16;             // inputs (2 k32 steps of 8)
constexpr int kTcTargetBlocks = 3 * 132; // the launch size measured best (H200, 48 x 12; docs/benchmarks.md)

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

// Chunks so that the launch fills the GPU; outputs a chunk a multiple of 8, at most 64.
inline TcGrid bconv_tc_grid(int64_t groups, int64_t n, int max_out) {
  TcGrid g;
  g.tiles = static_cast<int>((n + kTcCoefs - 1) / kTcCoefs);
  const int64_t base = groups * g.tiles, target = bconv_tc_target_blocks();
  int64_t ch = base > 0 ? (target + base - 1) / base : 1;
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
  uint32_t afrag[kTcMaxOuts / 8][2][2][32][4];  // [pair][tile][k step][lane][register]
  int32_t* out[kTcMaxOuts];
  int32_t p[kTcMaxOuts], pinv[kTcMaxOuts];
  int32_t neg_off[kTcMaxOuts][4];  // minus byte i of the offset: the accumulators' start
};

// D = A B + C on one warp's fragments.
FT_HD void tc_mma(int32_t (&d)[4], const uint32_t* a, const uint32_t* b, const int32_t (&c)[4]) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("mma.sync.aligned.m16n8k32.row.col.s32.u8.u8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
               "{%10,%11,%12,%13};\n"
               : "=r"(d[0]), "=r"(d[1]), "=r"(d[2]), "=r"(d[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "r"(c[0]), "r"(c[1]), "r"(c[2]),
                 "r"(c[3]));
#elif defined(__CUDA_ARCH__)
  (void)d, (void)a, (void)b, (void)c;
  __trap();  // no int8 mma before sm_80: run_bconv never launches this there (tc_device_ok)
#else
  (void)d, (void)a, (void)b, (void)c;  // the host emulation models the mma instead (emulate_mma)
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
  // 4 blocks an SM (<= 64 registers; 36 bytes spilled) and 4 n8 tiles a pass measured fastest
  // against 3 blocks (78 registers, no spill) and 8 or 2 tiles a pass (docs/benchmarks.md, session 32).
  static constexpr int THREADS = kTcThreads, MIN_BLOCKS = 4;
  static constexpr int SMEM = static_cast<int>(sizeof(TcSmem) / 4);
  static constexpr int NT = kTcWarpCoefs / 8;  // n8 tiles a warp
  static constexpr int PT = 4;                  // n8 tiles a pass
  // The tables (A fragments, constants) while the kernel before still runs, where the map's
  // matrix and moduli are a context's constant tables (program.cuh).
  static constexpr bool EARLY = M::kConstTables;
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
  // the tables (early where EARLY, else step 0), then the products
  FT_HD static void early(const Args& a, const Blk& b, int tid, State&) {
    if (b.nout > 0) tables(a, b, tid);
  }
  FT_HD static int num_steps(const Args&, const Blk& b) { return b.nout > 0 ? (EARLY ? 1 : 2) : 0; }
  FT_HD static void step(const Args& a, const Blk& b, int s, int tid, State&) {
    if (!EARLY && s == 0) return tables(a, b, tid);
    products(a, b, tid);
  }

 private:
  FT_HD static int pairs(const Blk& b) { return (b.nout + 7) / 8; }

  // The rows of the m-tiles in use: the chunk's outputs rounded up to a multiple of 8.
  FT_HD static int rows_used(const Blk& b) { return 8 * pairs(b); }

  // 2^40 mod p (p < 2^31): 2^32 mod p, then eight doublings.
  FT_HD static uint32_t two40_mod(uint32_t p) {
    uint32_t r = two32_mod(p);
    for (int i = 0; i < 8; ++i) {
      r <<= 1;
      r = r >= p ? r - p : r;
    }
    return r;
  }

  // W_0..W_3 of a matrix entry m: W_j = 2^(8j) m mod p, by Montgomery steps with c8 = 2^40 mod p.
  FT_HD static void w_powers(int32_t m, uint32_t p, uint32_t pinv, uint32_t c8, uint32_t (&w)[4]) {
    const uint32_t nqinv = 0u - pinv;
    w[0] = static_cast<uint32_t>(m < 0 ? m + static_cast<int32_t>(p) : m);
    for (int j = 1; j < 4; ++j) {
      // w * 2^40 * 2^-32 mod p, in [0, 2p) then [0, p)
      const uint64_t prod = static_cast<uint64_t>(w[j - 1]) * c8;
      const uint32_t tq = static_cast<uint32_t>(prod) * nqinv;
      const uint32_t r = static_cast<uint32_t>((prod + static_cast<uint64_t>(tq) * p) >> 32);
      w[j] = r >= p ? r - p : r;
    }
  }

  // Byte i of each of w[0..3], packed: byte e of the result is byte i of w[e].
  FT_HD static uint32_t bytes_of(const uint32_t (&w)[4], int i) {
#if defined(__CUDA_ARCH__)
    const uint32_t sel = static_cast<uint32_t>(i | ((i + 4) << 4));  // byte i of x, of y
    return __byte_perm(__byte_perm(w[0], w[1], sel), __byte_perm(w[2], w[3], sel), 0x5410);
#else
    uint32_t v = 0;
    for (int e = 0; e < 4; ++e) v |= ((w[e] >> (8 * i)) & 0xffu) << (8 * e);
    return v;
#endif
  }

  // The A fragments and, per output, its modulus, row and the accumulators' start. A lane's
  // registers of tile h, k step s are rows g (byte 2h) and g + 8 (byte 2h + 1) of output 8 P + g,
  // at K columns 4t.. (bytes 0-3 of input 8s + t: W_0..W_3) and 16 + 4t.. (input 8s + 4 + t).
  FT_HD static void tables(const Args& a, const Blk& b, int tid) {
    TcSmem& sm = *b.s;
    const int entries = pairs(b) * KS * 32;
    for (int idx = tid; idx < entries; idx += THREADS) {
      const int lane = idx & 31, s = (idx >> 5) % KS, pr = (idx >> 5) / KS;
      const int o = 8 * pr + (lane >> 2), k = 8 * s + (lane & 3);
      uint32_t w0[4] = {0, 0, 0, 0}, w1[4] = {0, 0, 0, 0};
      if (o < b.nout) {
        const int32_t* pm = M::out_mod(a.m, b.g, b.o0 + o);
        const int32_t* mrow = M::mat_row(a.m, b.g, b.o0 + o);
        const uint32_t p = static_cast<uint32_t>(ldg(pm)), pinv = static_cast<uint32_t>(ldg(pm + 1));
        const uint32_t c8 = two40_mod(p);
        if (k < b.nin) w_powers(ldg(mrow + k), p, pinv, c8, w0);
        if (k + 4 < b.nin) w_powers(ldg(mrow + k + 4), p, pinv, c8, w1);
      }
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        uint32_t* f = sm.afrag[pr][h][s][lane];
        f[0] = bytes_of(w0, 2 * h);
        f[1] = bytes_of(w0, 2 * h + 1);
        f[2] = bytes_of(w1, 2 * h);
        f[3] = bytes_of(w1, 2 * h + 1);
      }
    }
    // The offset 2^30 sum_k m'_k mod p, from the block's last threads (idle above when few entries).
    // It reads the matrix row again rather than the entries' W_0 through shared memory: no barrier.
    for (int o = THREADS - 1 - tid; o < rows_used(b); o += THREADS) {
      const bool on = o < b.nout;
      const int32_t* pm = on ? M::out_mod(a.m, b.g, b.o0 + o) : nullptr;
      const int32_t p = on ? ldg(pm) : 1;
      sm.p[o] = p;
      sm.pinv[o] = on ? ldg(pm + 1) : 1;
      sm.out[o] = on ? M::out_row(a.m, b.g, b.o0 + o) : nullptr;
      uint32_t sum = 0;
      if (on) {
        const int32_t* mrow = M::mat_row(a.m, b.g, b.o0 + o);
        for (int k = 0; k < b.nin; ++k) {
          const int32_t m = ldg(mrow + k);
          sum = static_cast<uint32_t>(add_mod(static_cast<int32_t>(sum), m < 0 ? m + p : m, p));
        }
      }
      const uint32_t off = static_cast<uint32_t>((static_cast<uint64_t>(sum) << 30) % static_cast<uint32_t>(p));
      for (int i = 0; i < 4; ++i) sm.neg_off[o][i] = -static_cast<int32_t>((off >> (8 * i)) & 0xffu);
    }
  }

  // X_k for a residue v of input k: centred(v) + 2^30.
  FT_HD static uint32_t x_of(int32_t v, int32_t q) { return static_cast<uint32_t>(centre(v, q) + (int32_t(1) << 30)); }
  // X_k at coefficient c (0 past the digit or the row).
  FT_HD static uint32_t x_word(const Args& a, const Blk& b, int k, int64_t c) {
    if (k >= b.nin || c >= M::n(a.m)) return 0u;
    return x_of(ldg(M::in_row(a.m, b.g, k) + c), ldg(M::in_mod(a.m, b.g, k)));
  }

  // The B fragments of a pass's PT n8 tiles from column cw: register j of k step s and tile nt is
  // X_(8s + 4j + t) at column cw + 8 nt + g. Each input's row is read at one address plus
  // constant offsets where every column is in the row.
  FT_HD static void b_fragments(const Args& a, const Blk& b, int64_t cw, int lane, bool full,
                                uint32_t (&bf)[PT][KS][2]) {
    const int g = lane >> 2, t = lane & 3;
#pragma unroll
    for (int s = 0; s < KS; ++s)
#pragma unroll
      for (int j = 0; j < 2; ++j) {
        const int k = 8 * s + 4 * j + t;
        if (full) {
          const bool on = k < b.nin;
          const int32_t* row = on ? M::in_row(a.m, b.g, k) + cw + g : nullptr;
          const int32_t q = on ? ldg(M::in_mod(a.m, b.g, k)) : 1;
#pragma unroll
          for (int nt = 0; nt < PT; ++nt) bf[nt][s][j] = on ? x_of(ldg(row + 8 * nt), q) : 0u;
        } else {
#pragma unroll
          for (int nt = 0; nt < PT; ++nt) bf[nt][s][j] = x_word(a, b, k, cw + 8 * nt + g);
        }
      }
  }

#if !defined(__CUDA_ARCH__)
  // The host's model of one lane's C fragment of tile h of pair pr at the n8 tile at column col8,
  // from the accumulators' start c.
  static void emulate_mma(const Args& a, const Blk& b, int pr, int h, int64_t col8, int lane, const int32_t (&c)[4],
                          int32_t (&d)[4]) {
    const TcSmem& sm = *b.s;
    const int g = lane >> 2, t = lane & 3;
    for (int e = 0; e < 4; ++e) {
      const int r = g + 8 * (e >> 1), col = 2 * t + (e & 1);
      int64_t acc = c[e];
      for (int s = 0; s < KS; ++s)
        for (int kk = 0; kk < 32; ++kk) {
          // A[r][kk] from the fragment table: lane (r & 7) * 4 + (kk & 15) / 4, register
          // (r >> 3) + 2 (kk >> 4), byte kk & 3
          const uint32_t aw = sm.afrag[pr][h][s][(r & 7) * 4 + (kk & 15) / 4][(r >> 3) + 2 * (kk >> 4)];
          const uint32_t bw = x_word(a, b, 8 * s + kk / 4, col8 + col);
          acc += static_cast<int64_t>((aw >> (8 * (kk & 3))) & 0xffu) * ((bw >> (8 * (kk & 3))) & 0xffu);
        }
      d[e] = static_cast<int32_t>(acc);
    }
  }
#endif

  // Every pair of m-tiles of the chunk times the warp's 64 columns, PT n8 tiles a pass (fewer
  // B registers, more warps an SM).
  FT_HD static void products(const Args& a, const Blk& b, int tid) {
    const TcSmem& sm = *b.s;
    const int lane = tid & 31, g = lane >> 2, t = lane & 3;
    const int64_t cw0 = b.c0 + static_cast<int64_t>(tid >> 5) * kTcWarpCoefs, n = M::n(a.m);
    const int prs = pairs(b);
#pragma unroll 1
    for (int pass = 0; pass < NT / PT; ++pass) {
      const int64_t cw = cw0 + 8 * PT * pass;
      if (cw >= n) return;  // a whole warp past the row (before any mma)
      const bool full = cw + 8 * PT <= n;    // warp-uniform: no column past the row
      const bool two = full && M::vec(a.m);  // the rows 8-byte aligned: a lane's two values in one store
      uint32_t bf[PT][KS][2];
      b_fragments(a, b, cw, lane, full, bf);
#pragma unroll 1
      for (int pr = 0; pr < prs; ++pr) {
        uint32_t af[2][KS][4];
#pragma unroll
        for (int h = 0; h < 2; ++h)
#pragma unroll
          for (int s = 0; s < KS; ++s)
#pragma unroll
            for (int r = 0; r < 4; ++r) af[h][s][r] = sm.afrag[pr][h][s][lane][r];
        const int o = 8 * pr + g;
        const bool on = o < b.nout;
        const int32_t p = sm.p[o], pinv = sm.pinv[o];
        // tile 0's rows g, g + 8 start at minus the offset's bytes 0, 1; tile 1's at minus 2, 3
        const int32_t c0[4] = {sm.neg_off[o][0], sm.neg_off[o][0], sm.neg_off[o][1], sm.neg_off[o][1]};
        const int32_t c1[4] = {sm.neg_off[o][2], sm.neg_off[o][2], sm.neg_off[o][3], sm.neg_off[o][3]};
        int32_t* out = on ? sm.out[o] + cw + 2 * t : nullptr;  // columns 2t, 2t + 1 of the pass's first tile
#pragma unroll
        for (int nt = 0; nt < PT; ++nt) {
          int32_t y0, y1;
          values(a, b, pr, cw + 8 * nt, lane, af, bf[nt], c0, c1, p, pinv, y0, y1);
          if (!on) continue;
          if (two) {
            stg2(out + 8 * nt, y0, y1);
          } else {
            if (cw + 8 * nt + 2 * t < n) out[8 * nt] = y0;
            if (cw + 8 * nt + 2 * t + 1 < n) out[8 * nt + 1] = y1;
          }
        }
      }
    }
  }

  // The lane's two values (output 8 pr + g, columns col8 + 2t and col8 + 2t + 1) of one n8 tile
  // (every lane of the warp calls it together: the mma is warp-wide).
  FT_HD static void values(const Args& a, const Blk& b, int pr, int64_t col8, int lane, const uint32_t (&af)[2][KS][4],
                           const uint32_t (&bfn)[KS][2], const int32_t (&c0)[4], const int32_t (&c1)[4], int32_t p,
                           int32_t pinv, int32_t& y0, int32_t& y1) {
    int32_t d0[4], d1[4];
#if defined(__CUDA_ARCH__)
    (void)a, (void)b, (void)pr, (void)col8, (void)lane;
    tc_mma(d0, af[0][0], bfn[0], c0);
    tc_mma(d1, af[1][0], bfn[0], c1);
    if constexpr (KS == 2) {
      tc_mma(d0, af[0][1], bfn[1], d0);
      tc_mma(d1, af[1][1], bfn[1], d1);
    }
#else
    (void)af, (void)bfn;
    emulate_mma(a, b, pr, 0, col8, lane, c0, d0);
    emulate_mma(a, b, pr, 1, col8, lane, c1, d1);
#endif
    // L = C_0 + 2^8 C_1 and H = C_2 + 2^8 C_3 per column; the value is L + 2^16 H.
    const int32_t lo0 = d0[0] + d0[2] * 256, lo1 = d0[1] + d0[3] * 256;
    const int32_t hi0 = d1[0] + d1[2] * 256, hi1 = d1[1] + d1[3] * 256;
    y0 = canon(smr(mad_wide(hi0, 65536, static_cast<int64_t>(lo0)), p, pinv), p);
    y1 = canon(smr(mad_wide(hi1, 65536, static_cast<int64_t>(lo1)), p, pinv), p);
  }
};

}  // namespace fhetorch::cuda
