// The Fourier blind rotation for rings too large for one block (N >= 2^12: one ciphertext's torus
// accumulator and digit rows outgrow a block's shared memory; tfhe-6bit's and tfhe-8bit's rings), as
// block programs (program.cuh) over the whole batch, three per key bit. The transform of the M = N/2
// folded values is cut at bit L, Cooley-Tukey's four-step order of the same radix-2 stages: the
// stages on bits [L, log M) pair values of one column (equal low L bits), those on bits [0, L) values
// of one chunk (equal high bits). Per key bit i:
//   DigitsForward  (ciphertext, row p, tile of columns): the digits of every level of
//                  (X^(a_i) - 1) acc, the forward stages on bits [L, log M), to the spectra in memory;
//   RowsProduct    (two ciphertexts, 2^lh chunks of 2^L values): the forward stages on bits [0, L) of
//                  every digit row, the product with the key bit's GGSW, the inverse stages on bits
//                  [0, L) of the k + 1 outputs, back to the spectra;
//   ColumnsInverse (ciphertext, row p, tile): the inverse stages on bits [L, log M), each value
//                  rounded to the torus and added to the accumulator.
// Every value goes through tfhe_fft_stages, tfhe_cmac and the digit and rounding functions of
// csrc/tfhe_fft.h in the order of the CPU's team step (tfhe_team_fourier_rotate_step), so the results
// equal the CPU's bit for bit; only the schedule differs (docs/tfhe.md, "Large rings"). Per key bit
// and ciphertext the spectra cross memory twice: 16 (k + 1) level M bytes written and read, then
// 16 (k + 1) M; the key bit's GGSW is read by every ciphertext of a chunk at about the same time (the
// grid runs the ciphertexts of one chunk of values side by side), so it comes from DRAM about once.
#pragma once
#include <type_traits>

#include "program.cuh"
#include "../tfhe_fft.h"

namespace fhetorch::cuda {
namespace fourier_split {

constexpr int kThreads = 256;
constexpr int kTile = 3072;     // complex values of a block's shared memory: 48 KiB, the static limit
constexpr int kMaxCols = 4;     // k + 1
static_assert(4 * kTile <= kStaticSmemWords, "a tile must fit the static shared-memory limit");

// How the transform of one ring is cut: M = 2^log_m values, the low L bits (RowsProduct's chunks), the
// high H = log_m - L (the columns); 2^lcd columns per DigitsForward tile (all levels of one row p),
// 2^lci per ColumnsInverse tile; ct ciphertexts and 2^lh chunks per RowsProduct block (the
// ciphertexts share the key's reads); rows = k1 level digit rows, cols = k1.
struct Geometry {
  int log_m, L, H, lcd, lci, ct, lh, rows, cols, level;
};

FT_HD int tile_columns(int L, int H, int rows, int cap = 4) {  // log2 columns of a tile of `rows` rows
  int lc = L < cap ? L : cap;
  while (lc > 0 && (rows << (lc + H)) > kTile) --lc;
  return lc;
}

// Blocks of a round with fewer than 256 items of 8 values leave threads idle (tfhe-6bit's product
// blocks: 64 of 256 busy with one chunk). Larger blocks, more chunks a product block and more columns an
// inverse tile, fill them, but only where the grid keeps min_blocks blocks (2 per SM): at small batches
// more, smaller blocks are faster. nb: the ciphertexts in flight.
constexpr int kFullBlock = 8 * kThreads;  // values of a round that occupy every thread
FT_HD Geometry geometry(const TfheTorusGgsw& g, int64_t nb = 1, int64_t min_blocks = 1 << 30) {
  Geometry o{};
  o.log_m = g.f.log_n - 1;
  o.L = (o.log_m + 1) / 2 < 8 ? (o.log_m + 1) / 2 : 8;
  o.H = o.log_m - o.L;
  o.level = g.level;
  o.rows = g.k1 * g.level;
  o.cols = g.k1;
  o.lcd = tile_columns(o.L, o.H, o.level);
  o.lci = tile_columns(o.L, o.H, 1);
  o.ct = (2 * o.rows << o.L) <= kTile ? 2 : 1;
  const int64_t pairs = (nb + o.ct - 1) / o.ct;
  o.lh = 0;
  while (o.lh < o.H && (o.ct * o.rows << (o.L + o.lh + 1)) <= kTile &&
         (o.ct * o.cols << (o.L + o.lh)) < kFullBlock && (pairs << (o.H - o.lh - 1)) >= min_blocks)
    ++o.lh;
  const int lci = tile_columns(o.L, o.H, 1, o.L);
  while (o.lci < lci && (1 << (o.lci + o.H)) < kFullBlock && (nb * o.cols << (o.L - o.lci - 1)) >= min_blocks)
    ++o.lci;
  return o;
}

// The launch parameters of every program: the rotation, its cut, the chunk of ciphertexts
// [b0, b0 + nb) in flight, the key bit, and the chunk's memory: the spectra (nb, rows, M) complex and
// the torus accumulators (nb, k1, N).
struct Args {
  FourierRotateArgs a;
  Geometry o;
  int64_t b0, nb;
  int i;
  double* spec;
  int64_t* torus;
};

// Rounds of at most `cap` stages over `bits` bits (as tfhe_team_fft splits them): how many, the
// size of round r, and the bits before it.
FT_HD int rounds(int bits, int cap) { return (bits + cap - 1) / cap; }
FT_HD int round_bits(int bits, int cap, int r) {
  const int n = rounds(bits, cap);
  return bits / n + (r < bits % n ? 1 : 0);
}
FT_HD int bits_before(int bits, int cap, int r) {
  int s = 0;
  for (int k = 0; k < r; ++k) s += round_bits(bits, cap, k);
  return s;
}
// Rounds of at most 3 stages: 8 values a thread, within the 64 registers of four 256-thread blocks per SM.
constexpr int kCap = 3;

// Whether this path takes the rotation: classical keys, k + 1 <= kMaxCols, 2^12 <= N <= 2^16, and
// tiles of at least 8 columns (64-byte runs) and one chunk of every row within a block's shared memory.
FT_HD bool fits(const TfheTorusGgsw& g, int grouping) {
  if (grouping > 1 || g.k1 > kMaxCols || g.f.log_n < 12 || g.f.log_n > 16) return false;
  const Geometry o = geometry(g);
  // (tile_columns keeps every column tile within kTile)
  return o.lcd >= 3 && o.lci >= 3 && (o.rows << o.L) <= kTile && rounds(o.H, kCap) >= 2;
}

// f(std::integral_constant<int, R>{}) for a round of R in [1, 3] stages.
template <class F>
FT_HD void with_round(int r, F&& f) {
  switch (r) {
    case 1: f(std::integral_constant<int, 1>{}); break;
    case 2: f(std::integral_constant<int, 2>{}); break;
    default: f(std::integral_constant<int, 3>{}); break;
  }
}

// One item of a round: its 2^R values loaded (load(u)), the R stages on global bits [lo, lo + R) of
// the values x0 | u 2^lo, stored (store(u, v)).
template <bool INV, int R, class Load, class Store>
FT_HD void round_item(const Args& s, uint32_t x0, int lo, Load&& load, Store&& store) {
  TfheComplex v[1 << R];
#pragma unroll
  for (int u = 0; u < (1 << R); ++u) v[u] = load(u);
  tfhe_fft_stages<INV, R>(v, 1u << s.o.log_m, x0, lo, s.a.g.f.twiddles);
#pragma unroll
  for (int u = 0; u < (1 << R); ++u) store(u, v[u]);
}

FT_HD TfheComplex* tile_of(uint32_t* sm) { return reinterpret_cast<TfheComplex*>(sm); }
FT_HD TfheComplex* spectrum(const Args& s, int64_t b, int row) {
  return reinterpret_cast<TfheComplex*>(s.spec) + ((b * s.o.rows + row) << s.o.log_m);
}
FT_HD int64_t* torus_row(const Args& s, int64_t b, int p) { return s.torus + ((b * s.o.cols + p) << (s.o.log_m + 1)); }

// A column tile: 2^lc consecutive columns c0 + c (low bits of a value) and every high part h, for
// `rows` rows; value (h, c) of tile row j at position (j 2^H + h) 2^lc + c (consecutive columns in
// consecutive words: the warps' accesses are conflict-free). Item it of a round on the high bits
// [hl, hl + R): column it mod 2^lc, then the other high bits, then the tile row.
struct ColumnItem {
  uint32_t c, h0;
  int row;
};
FT_HD ColumnItem column_item(const Geometry& o, int lc, int it, int hl, int r) {
  const uint32_t c = static_cast<uint32_t>(it) & ((1u << lc) - 1u), w = static_cast<uint32_t>(it) >> lc;
  const uint32_t hw = w & ((1u << (o.H - r)) - 1u);
  return ColumnItem{c, (hw & ((1u << hl) - 1u)) | ((hw >> hl) << (hl + r)), static_cast<int>(w >> (o.H - r))};
}
FT_HD uint32_t column_at(const Geometry& o, int lc, int row, uint32_t h, uint32_t c) {
  return (((static_cast<uint32_t>(row) << o.H) | h) << lc) | c;
}

// Shared by the column programs: the block's ciphertext, row p, first column and rotation a_i.
struct ColumnBlk {
  int64_t b;
  int p;
  uint32_t c0;
  int64_t rot;
  TfheComplex* t;
};
FT_HD int64_t column_blocks(const Args& s, int lc) { return s.nb * s.o.cols << (s.o.L - lc); }  // tiles of 2^lc columns
FT_HD ColumnBlk column_blk(const Args& s, int64_t block, int lc, uint32_t* sm) {
  ColumnBlk k{};
  k.c0 = static_cast<uint32_t>(block & ((int64_t(1) << (s.o.L - lc)) - 1)) << lc;
  block >>= s.o.L - lc;
  k.p = static_cast<int>(block % s.o.cols);
  k.b = block / s.o.cols;
  k.rot = tfhe_fourier_rotation(s.a, s.b0 + k.b, s.i);
  k.t = tile_of(sm);
  return k;
}

// DigitsForward: block (b, p, tile). Step 0: the digits of every level of (X^(a_i) - 1) acc at the
// tile's values (coefficients x and x + M of row p: the loads of two values first, then their
// digits, tfhe_team_fourier_rotate_step's operations). Then one step per round of the forward stages
// on the high bits, from the top, the last writing the spectra of rows (p, j).
struct DigitsForward {
  using Args = fourier_split::Args;
  using Blk = ColumnBlk;
  struct State {};
  static constexpr int THREADS = kThreads, MIN_BLOCKS = 4, SMEM = 4 * kTile;
  FT_HD static int64_t blocks(const Args& s) { return column_blocks(s, s.o.lcd); }
  FT_HD static Blk setup(const Args& s, int64_t block, uint32_t* sm) { return column_blk(s, block, s.o.lcd, sm); }
  FT_HD static int num_steps(const Args& s, const Blk& k) { return k.rot == 0 ? 0 : 1 + rounds(s.o.H, kCap); }
  FT_HD static void digits(const Args& s, const Blk& k, int tid) {
    const Geometry& o = s.o;
    const TfheTorusGgsw& g = s.a.g;
    const uint32_t m = 1u << o.log_m, values = 1u << (o.lcd + o.H);
    const int64_t* acc = torus_row(s, k.b, k.p);
    constexpr int U = 2;
    for (uint32_t v0 = static_cast<uint32_t>(tid); v0 < values; v0 += U * THREADS) {
      int64_t x[U][2];
#pragma unroll
      for (int u = 0; u < U; ++u) {
        const uint32_t idx = v0 + u * THREADS;
        if (idx >= values) continue;
        const uint32_t c = (idx >> o.lcd << o.L) | (k.c0 + (idx & ((1u << o.lcd) - 1u)));
#pragma unroll
        for (int h = 0; h < 2; ++h)
          x[u][h] = tfhe_torus_sub(tfhe_torus_rotated(acc, c + h * m, k.rot, g.f.log_n), acc[c + h * m]);
      }
#pragma unroll
      for (int u = 0; u < U; ++u) {
        const uint32_t idx = v0 + u * THREADS;
        if (idx >= values) continue;
        uint64_t re = tfhe_torus_round(x[u][0], g.base_log * g.level), im = tfhe_torus_round(x[u][1], g.base_log * g.level);
        for (int j = g.level - 1; j >= 0; --j) {
          const int32_t dr = tfhe_next_digit(re, g.base_log), di = tfhe_next_digit(im, g.base_log);
          k.t[(static_cast<uint32_t>(j) << (o.H + o.lcd)) | idx] =
              TfheComplex{static_cast<double>(dr), static_cast<double>(di)};
        }
      }
    }
  }
  FT_HD static void step(const Args& s, const Blk& k, int st, int tid, State&) {
    if (st == 0) return digits(s, k, tid);
    const Geometry& o = s.o;
    const int lc = o.lcd, ri = st - 1;
    const int r = round_bits(o.H, kCap, ri), hl = o.H - bits_before(o.H, kCap, ri) - r;
    const bool last = ri == rounds(o.H, kCap) - 1;
    const int items = o.level << (o.H - r + lc);
    with_round(r, [&](auto rc) {
      constexpr int R = decltype(rc)::value;
      for (int it = tid; it < items; it += THREADS) {
        const ColumnItem ci = column_item(o, lc, it, hl, R);
        const uint32_t x0 = (ci.h0 << o.L) | (k.c0 + ci.c);
        TfheComplex* out = spectrum(s, k.b, k.p * o.level + ci.row);
        auto from_t = [&](int u) {
          return k.t[column_at(o, lc, ci.row, ci.h0 | (static_cast<uint32_t>(u) << hl), ci.c)];
        };
        auto to_t = [&](int u, TfheComplex v) {
          k.t[column_at(o, lc, ci.row, ci.h0 | (static_cast<uint32_t>(u) << hl), ci.c)] = v;
        };
        auto to_g = [&](int u, TfheComplex v) { out[x0 | (static_cast<uint32_t>(u) << (o.L + hl))] = v; };
        if (last) round_item<false, R>(s, x0, o.L + hl, from_t, to_g);
        else round_item<false, R>(s, x0, o.L + hl, from_t, to_t);
      }
    });
  }
};

// ColumnsInverse: block (b, p, tile), one step per round of the inverse stages on the high bits,
// from the bottom: the first reads the spectra, the last rounds each value x to the torus and adds
// it to coefficients x (real part) and x + M (imaginary part) of accumulator row p.
struct ColumnsInverse {
  using Args = fourier_split::Args;
  using Blk = ColumnBlk;
  struct State {};
  static constexpr int THREADS = kThreads, MIN_BLOCKS = 4, SMEM = 4 * kTile;
  FT_HD static int64_t blocks(const Args& s) { return column_blocks(s, s.o.lci); }
  FT_HD static Blk setup(const Args& s, int64_t block, uint32_t* sm) { return column_blk(s, block, s.o.lci, sm); }
  FT_HD static int num_steps(const Args& s, const Blk& k) { return k.rot == 0 ? 0 : rounds(s.o.H, kCap); }
  FT_HD static void step(const Args& s, const Blk& k, int st, int tid, State&) {
    const Geometry& o = s.o;
    const int lc = o.lci, r = round_bits(o.H, kCap, st), hl = bits_before(o.H, kCap, st);
    const bool first = st == 0, last = st == rounds(o.H, kCap) - 1;
    const uint32_t m = 1u << o.log_m;
    int64_t* acc = torus_row(s, k.b, k.p);
    const TfheComplex* in = spectrum(s, k.b, k.p);
    const int items = 1 << (o.H - r + lc);
    with_round(r, [&](auto rc) {
      constexpr int R = decltype(rc)::value;
      for (int it = tid; it < items; it += THREADS) {
        const ColumnItem ci = column_item(o, lc, it, hl, R);
        const uint32_t x0 = (ci.h0 << o.L) | (k.c0 + ci.c);
        auto from_g = [&](int u) { return in[x0 | (static_cast<uint32_t>(u) << (o.L + hl))]; };
        auto from_t = [&](int u) { return k.t[column_at(o, lc, 0, ci.h0 | (static_cast<uint32_t>(u) << hl), ci.c)]; };
        auto to_t = [&](int u, TfheComplex v) {
          k.t[column_at(o, lc, 0, ci.h0 | (static_cast<uint32_t>(u) << hl), ci.c)] = v;
        };
        auto to_acc = [&](int u, TfheComplex v) {
          const uint32_t x = x0 | (static_cast<uint32_t>(u) << (o.L + hl));
          acc[x] = tfhe_torus_add(acc[x], tfhe_torus_from_double(v.re, o.log_m));
          acc[x + m] = tfhe_torus_add(acc[x + m], tfhe_torus_from_double(v.im, o.log_m));
        };
        if (first) round_item<true, R>(s, x0, o.L + hl, from_g, to_t);  // at least two rounds (fits)
        else if (last) round_item<true, R>(s, x0, o.L + hl, from_t, to_acc);
        else round_item<true, R>(s, x0, o.L + hl, from_t, to_t);
      }
    });
  }
};

// RowsProduct<MAXC>: MAXC >= cols accumulators a value (2 for k = 1: no registers spilled).
// Block (ciphertexts 2 q, 2 q + 1 (o.ct of them), chunks hi .. hi + 2^lh - 1), the ciphertext pair
// fastest (the blocks in flight read the same part of the key, and the block's two ciphertexts read it
// once). The chunks' 2^L values of every row in shared memory, value u of chunk j of row r of
// ciphertext e at ((e rows + r) 2^lh + j) 2^L + swizzle(u) (conflict-free for the rounds' strides 1 and
// 2^R and the product's stride 8). Steps: the forward rounds on bits [0, L) from the top (the first
// reads the spectra), the product, the inverse rounds of the cols outputs from the bottom (the last
// writes spectra rows [0, cols)).
template <int MAXC>
struct RowsProduct {
  using Args = fourier_split::Args;
  struct Blk {
    int64_t b;   // the block's first ciphertext
    int n;       // its ciphertexts, 1 or 2; only those with a nonzero rotation take part
    bool on[2];
    uint32_t hi;
    TfheComplex* t;
  };
  struct State {};
  static constexpr int THREADS = kThreads, MIN_BLOCKS = 4, SMEM = 4 * kTile;
  FT_HD static uint32_t swizzle(uint32_t u) { return u ^ (((u >> 3) ^ (u >> 6)) & 7u); }
  FT_HD static int64_t pairs(const Args& s) { return (s.nb + s.o.ct - 1) / s.o.ct; }
  FT_HD static int64_t blocks(const Args& s) { return pairs(s) << (s.o.H - s.o.lh); }
  FT_HD static Blk setup(const Args& s, int64_t block, uint32_t* sm) {
    Blk k{};
    k.b = block % pairs(s) * s.o.ct;
    k.hi = static_cast<uint32_t>(block / pairs(s)) << s.o.lh;
    k.n = s.nb - k.b < s.o.ct ? static_cast<int>(s.nb - k.b) : s.o.ct;
    for (int e = 0; e < 2; ++e) k.on[e] = e < k.n && tfhe_fourier_rotation(s.a, s.b0 + k.b + e, s.i) != 0;
    k.t = tile_of(sm);
    return k;
  }
  FT_HD static int num_steps(const Args& s, const Blk& k) {
    return k.on[0] || k.on[1] ? 2 * rounds(s.o.L, kCap) + 1 : 0;
  }
  FT_HD static void step(const Args& s, const Blk& k, int st, int tid, State&) {
    const Geometry& o = s.o;
    const int nr = rounds(o.L, kCap);
    if (st == nr) return product(s, k, tid);
    const bool inv = st > nr;
    const int ri = inv ? st - nr - 1 : st, r = round_bits(o.L, kCap, ri);
    const int lo = inv ? bits_before(o.L, kCap, ri) : o.L - bits_before(o.L, kCap, ri) - r;
    const bool first = st == 0, last = st == 2 * nr;
    const int per = inv ? o.cols : o.rows, items = k.n * per << (o.L + o.lh - r);
    with_round(r, [&](auto rc) {
      constexpr int R = decltype(rc)::value;
      for (int it = tid; it < items; it += THREADS) {
        // item (e, row, j, w), w fastest, then the chunk j: chunk j + 1 follows chunk j in the spectra,
        // so a warp's accesses stay consecutive across chunks
        const int erj = it >> (o.L - R), er = erj >> o.lh, e = er >= per ? 1 : 0, row = er - e * per;
        const uint32_t j = static_cast<uint32_t>(erj) & ((1u << o.lh) - 1u);
        if (!k.on[e]) continue;
        const uint32_t w = static_cast<uint32_t>(it) & ((1u << (o.L - R)) - 1u);
        const uint32_t u0 = (w & ((1u << lo) - 1u)) | ((w >> lo) << (lo + R));
        TfheComplex* t = k.t + ((((e * o.rows + row) << o.lh) + j) << o.L);
        TfheComplex* g = spectrum(s, k.b + e, row) + (static_cast<int64_t>(k.hi + j) << o.L);
        // one code path per source and destination (fewer live registers than a branch per value)
        auto from_g = [&](int u) { return g[u0 | (static_cast<uint32_t>(u) << lo)]; };
        auto from_t = [&](int u) { return t[swizzle(u0 | (static_cast<uint32_t>(u) << lo))]; };
        auto to_g = [&](int u, TfheComplex v) { g[u0 | (static_cast<uint32_t>(u) << lo)] = v; };
        auto to_t = [&](int u, TfheComplex v) { t[swizzle(u0 | (static_cast<uint32_t>(u) << lo))] = v; };
        const uint32_t x0 = ((k.hi + j) << o.L) | u0;
        if (first) round_item<false, R>(s, x0, lo, from_g, to_t);  // the first round is forward, the last inverse
        else if (last) round_item<true, R>(s, x0, lo, from_t, to_g);
        else if (inv) round_item<true, R>(s, x0, lo, from_t, to_t);
        else round_item<false, R>(s, x0, lo, from_t, to_t);
      }
    });
  }
  // Value x of the chunks, for each ciphertext: cols products sum_r d_r key(r, c) at key slot
  // tfhe_fft_order(x) (the accumulators from zero, rows in order: tfhe_team_fft_rows_product's
  // operations), each key entry read once for both. Thread tau takes chunk tau / 2^L and in it
  // x mod 8 = (tau mod 2^L) / 2^(L-3): a warp's key reads are consecutive.
  FT_HD static void product(const Args& s, const Blk& k, int tid) {
    const Geometry& o = s.o;
    const uint32_t m = 1u << o.log_m;
    const int64_t per_bit = static_cast<int64_t>(o.rows) * o.cols << o.log_m;  // complex values
    const TfheFourierKey key{s.a.bsk + 2 * per_bit * s.i, o.cols, m};
    for (int tau = tid; tau < (1 << (o.L + o.lh)); tau += THREADS) {
      const uint32_t j = static_cast<uint32_t>(tau) >> o.L, tl = static_cast<uint32_t>(tau) & ((1u << o.L) - 1u);
      const uint32_t u = ((tl & ((1u << (o.L - 3)) - 1u)) << 3) | (tl >> (o.L - 3));
      const uint32_t su = (j << o.L) + swizzle(u);
      const auto ks = key.slot(tfhe_fft_order(((k.hi + j) << o.L) | u, o.log_m));
      TfheComplex acc[2][MAXC];
#pragma unroll
      for (int e = 0; e < 2; ++e)
#pragma unroll
        for (int c = 0; c < MAXC; ++c) acc[e][c] = TfheComplex{0.0, 0.0};
      for (int r = 0; r < o.rows; ++r) {
        TfheComplex d[2];
#pragma unroll
        for (int e = 0; e < 2; ++e) d[e] = k.on[e] ? k.t[((e * o.rows + r) << (o.L + o.lh)) + su] : TfheComplex{0.0, 0.0};
#pragma unroll
        for (int c = 0; c < MAXC; ++c)
          if (c < o.cols) {
            const TfheComplex kv = ks.at(r, c);
#pragma unroll
            for (int e = 0; e < 2; ++e) acc[e][c] = tfhe_cmac(acc[e][c], d[e], kv);
          }
      }
#pragma unroll
      for (int e = 0; e < 2; ++e)
        if (k.on[e])
#pragma unroll
          for (int c = 0; c < MAXC; ++c)
            if (c < o.cols) k.t[((e * o.rows + c) << (o.L + o.lh)) + su] = acc[e][c];
    }
  }
};

// Element programs over the chunk's accumulators, one word per thread: the start
// (tfhe_fourier_start_value) and the return mod q into the output.
template <bool FINISH>
struct Accumulators {
  using Args = fourier_split::Args;
  struct Blk {
    int64_t e0;
  };
  struct State {};
  static constexpr int THREADS = 256, MIN_BLOCKS = 1, SMEM = 4;
  FT_HD static int64_t words(const Args& s) { return s.nb * s.o.cols << (s.o.log_m + 1); }
  FT_HD static int64_t blocks(const Args& s) { return (words(s) + THREADS - 1) / THREADS; }
  FT_HD static Blk setup(const Args&, int64_t block, uint32_t*) { return Blk{block * THREADS}; }
  FT_HD static int num_steps(const Args&, const Blk&) { return 1; }
  FT_HD static void step(const Args& s, const Blk& k, int, int tid, State&) {
    const int64_t e = k.e0 + tid, k1n = static_cast<int64_t>(s.o.cols) << (s.o.log_m + 1);
    if (e >= words(s)) return;
    if (FINISH) s.a.acc[s.b0 * k1n + e] = tfhe_torus_to_q(s.torus[e], s.a.m.q_full);
    else s.torus[e] = tfhe_fourier_start_value(s.a, s.b0 + e / k1n, e % k1n);
  }
};

// Per ciphertext in flight: the spectra and the torus accumulator, in int32 words.
FT_HD int64_t scratch_words(const TfheTorusGgsw& g) {
  const Geometry o = geometry(g);
  return (static_cast<int64_t>(o.rows) << (o.log_m + 2)) + (static_cast<int64_t>(o.cols) << (o.log_m + 2));
}

// The blind rotation of a.B ciphertexts, `chunk` at a time, in `scratch` (chunk * scratch_words,
// 16-byte aligned): per chunk the start, three programs per key bit, the return mod q.
template <int MAXC, class X>
cudaError_t run_cols(X& ex, const FourierRotateArgs& a, uint32_t* scratch, int64_t chunk, int64_t min_blocks) {
  Args s{};
  s.a = a;
  s.o = geometry(a.g);
  s.spec = reinterpret_cast<double*>(scratch);
  s.torus = reinterpret_cast<int64_t*>(scratch + chunk * (static_cast<int64_t>(s.o.rows) << (s.o.log_m + 2)));
  for (int64_t b0 = 0; b0 < a.B; b0 += chunk) {
    s.b0 = b0;
    s.nb = a.B - b0 < chunk ? a.B - b0 : chunk;
    s.o = geometry(a.g, s.nb, min_blocks);
    FT_TRY(ex.template run<Accumulators<false>>(s));
    for (int i = 0; i < a.n; ++i) {
      s.i = i;
      FT_TRY(ex.template run<DigitsForward>(s));
      FT_TRY(ex.template run<RowsProduct<MAXC>>(s));
      FT_TRY(ex.template run<ColumnsInverse>(s));
    }
    FT_TRY(ex.template run<Accumulators<true>>(s));
  }
  return cudaSuccess;
}
// min_blocks: the grid size below which blocks stay small (geometry); 2 per SM on the GPU.
template <class X>
cudaError_t run(X& ex, const FourierRotateArgs& a, uint32_t* scratch, int64_t chunk, int64_t min_blocks) {
  return a.g.k1 <= 2 ? run_cols<2>(ex, a, scratch, chunk, min_blocks)
                     : run_cols<kMaxCols>(ex, a, scratch, chunk, min_blocks);
}

}  // namespace fourier_split
}  // namespace fhetorch::cuda
