// Fast base conversion (CUDA; CPU oracle: csrc/cpu/bconv.cpp).
//
// A block converts kCoefs = 128 adjacent coefficients of one polynomial to up to kOuts = 64
// output limbs (grid.y walks further chunks of output limbs). Step 0 stages the centred
// inputs t[j][c] (La x 128), the matrix transposed m[j][i] (La x 64) and each output
// prime's constants in shared memory. Step 1: warp w takes groups of 4 output limbs
// (w, w + 4, ...), lane k the 4 coefficients 4k..4k+3; it accumulates the 16 sums
// sum_j t[j][c] * m[j][i] in int64 registers, reading t as one 16-byte word per j and m as
// a broadcast 16-byte word per j.
//
// Overflow: |t| <= 2^30 and |m| <= 2^31, so each product is below 2^61 in magnitude. After
// every two products the accumulator a = h * 2^32 + l (h signed, l in [0, 2^32)) is folded
// to h * r + l with r = 2^32 mod p centred (|r| <= p/2 < 2^30): the result is congruent
// to a mod p and below 2^61 + 2^32, so adding two products stays below 2^63. Two final
// folds bring |a| below p^2/16 + p + 2^32 < 2^31 p, the input range of smr(). The result
// is the canonical residue of the same sum the CPU computes, hence identical.
#pragma once
#include <cstdint>
#include "util.cuh"

namespace fhetorch::cuda::bconv_detail {

constexpr int kCoefs = 128;  // coefficients per block (32 lanes x 4)
constexpr int kOuts = 64;    // output limbs per block
constexpr int kWarps = 4;
constexpr int kThreads = 32 * kWarps;

struct Args {
  const int32_t* x;  // (batch, La, n)
  int32_t* y;        // (batch, Lb, n)
  int64_t n;
  int64_t tiles;     // ceil(n / kCoefs)
  int La, Lb;
  const int32_t* mod_in;
  const int32_t* mod_out;
  const int32_t* mat;  // (Lb, La)
  bool vec;            // n % 4 == 0 and x, y 16-byte aligned
};

// Shared memory words for La inputs.
inline size_t smem_bytes(int La) {
  return sizeof(int32_t) * (static_cast<size_t>(La) * (kCoefs + kOuts) + 3 * kOuts);
}

struct Smem {
  int32_t* t;     // [La][kCoefs]
  int32_t* m;     // [La][kOuts]
  int32_t* p;     // [kOuts]
  int32_t* pinv;  // [kOuts]
  int32_t* r;     // [kOuts]
};

FT_HD Smem carve(int32_t* base, int La) {
  Smem s;
  s.t = base;
  s.m = s.t + La * kCoefs;
  s.p = s.m + La * kOuts;
  s.pinv = s.p + kOuts;
  s.r = s.pinv + kOuts;
  return s;
}

struct Block {
  int64_t batch;  // polynomial index
  int64_t c0;     // first coefficient
  int o0;         // first output limb
  int nout;       // output limbs in this block
};

FT_HD Block block_of(const Args& a, int64_t bx, int by) {
  Block b;
  b.batch = bx / a.tiles;
  b.c0 = (bx % a.tiles) * kCoefs;
  b.o0 = by * kOuts;
  b.nout = a.Lb - b.o0 < kOuts ? a.Lb - b.o0 : kOuts;
  return b;
}

// 2^32 mod p, centred.
FT_HD int32_t two32_centred(int32_t p) {
  const uint32_t up = static_cast<uint32_t>(p);
  const uint32_t r = (0u - up) % up;
  return r > (up >> 1) ? static_cast<int32_t>(r) - p : static_cast<int32_t>(r);
}

FT_HD int64_t fold(int64_t a, int32_t r) {
  return mad_wide(static_cast<int32_t>(a >> 32), r, static_cast<int64_t>(static_cast<uint32_t>(a)));
}

// Step 0: stage inputs, matrix and constants.
FT_HD void load_step(const Args& a, const Block& b, const Smem& s, int tid) {
  const int32_t* xb = a.x + b.batch * a.La * a.n;
  for (int idx = tid; idx < a.La * 32; idx += kThreads) {
    const int j = idx >> 5, quad = idx & 31;
    const int64_t c = b.c0 + 4 * quad;
    const int32_t q = ldg(a.mod_in + 2 * j);
    const int32_t* src = xb + j * a.n + c;
    int4 v;
    if (a.vec && c + 3 < a.n) {
      v = ldg4(src);
    } else {
      v.x = c < a.n ? src[0] : 0;
      v.y = c + 1 < a.n ? src[1] : 0;
      v.z = c + 2 < a.n ? src[2] : 0;
      v.w = c + 3 < a.n ? src[3] : 0;
    }
    v.x = centre(v.x, q);
    v.y = centre(v.y, q);
    v.z = centre(v.z, q);
    v.w = centre(v.w, q);
    st4(s.t + j * kCoefs + 4 * quad, v);
  }
  for (int idx = tid; idx < a.La * kOuts; idx += kThreads) {
    const int j = idx / kOuts, i = idx % kOuts;
    s.m[idx] = i < b.nout ? ldg(a.mat + static_cast<int64_t>(b.o0 + i) * a.La + j) : 0;
  }
  for (int i = tid; i < kOuts; i += kThreads) {
    if (i < b.nout) {
      const int32_t p = ldg(a.mod_out + 2 * (b.o0 + i));
      s.p[i] = p;
      s.pinv[i] = ldg(a.mod_out + 2 * (b.o0 + i) + 1);
      s.r[i] = two32_centred(p);
    } else {
      s.p[i] = 1;
      s.pinv[i] = 1;
      s.r[i] = 0;
    }
  }
}

FT_HD void mac(int64_t (&acc)[4][4], const int4& t, const int4& m) {
  const int32_t tv[4] = {t.x, t.y, t.z, t.w};
  const int32_t mv[4] = {m.x, m.y, m.z, m.w};
#pragma unroll
  for (int o = 0; o < 4; ++o)
#pragma unroll
    for (int k = 0; k < 4; ++k) acc[o][k] = mad_wide(tv[k], mv[o], acc[o][k]);
}

// Step 1: the sums for this thread's (4 output limbs) x (4 coefficients) groups.
FT_HD void compute_step(const Args& a, const Block& b, const Smem& s, int tid) {
  const int warp = tid >> 5, lane = tid & 31;
  const int groups = (b.nout + 3) >> 2;
  const int64_t c = b.c0 + 4 * lane;
  if (c >= a.n) return;
  const int4* t4 = reinterpret_cast<const int4*>(s.t) + lane;
  int32_t* yb = a.y + b.batch * a.Lb * a.n;
  for (int g = warp; g < groups; g += kWarps) {
    const int4* m4 = reinterpret_cast<const int4*>(s.m) + g;
    int32_t r[4];
#pragma unroll
    for (int o = 0; o < 4; ++o) r[o] = s.r[4 * g + o];
    int64_t acc[4][4] = {};
    int j = 0;
    for (; j + 1 < a.La; j += 2) {
      mac(acc, t4[j * (kCoefs / 4)], m4[j * (kOuts / 4)]);
      mac(acc, t4[(j + 1) * (kCoefs / 4)], m4[(j + 1) * (kOuts / 4)]);
#pragma unroll
      for (int o = 0; o < 4; ++o)
#pragma unroll
        for (int k = 0; k < 4; ++k) acc[o][k] = fold(acc[o][k], r[o]);
    }
    if (j < a.La) mac(acc, t4[j * (kCoefs / 4)], m4[j * (kOuts / 4)]);
#pragma unroll
    for (int o = 0; o < 4; ++o) {
      const int i = 4 * g + o;
      if (i >= b.nout) break;
      const int32_t p = s.p[i], pinv = s.pinv[i];
      int4 v;
#pragma unroll
      for (int k = 0; k < 4; ++k) elem(v, k) = canon(smr(fold(fold(acc[o][k], r[o]), r[o]), p, pinv), p);
      int32_t* dst = yb + static_cast<int64_t>(b.o0 + i) * a.n + c;
      if (a.vec && c + 3 < a.n) {
        st4(dst, v);
      } else {
        if (c < a.n) dst[0] = v.x;
        if (c + 1 < a.n) dst[1] = v.y;
        if (c + 2 < a.n) dst[2] = v.z;
        if (c + 3 < a.n) dst[3] = v.w;
      }
    }
  }
}

// ---- register path: La <= 16, n % 4 == 0, 16-byte aligned x and y ---------------------
//
// A thread takes 4 adjacent coefficients of one polynomial: it loads their La centred
// inputs once into registers (t[j][k], 16-byte loads, coalesced across the warp) and then
// produces its outputs one limb at a time, reading the matrix row as 16-byte broadcast words
// from shared memory. A block is 128 threads (512 coefficients) and one chunk of at most
// kSmallOuts output limbs (grid.y walks the chunks; the launcher picks the chunk size so
// the grid fills the GPU). Overflow: with the matrix centred (|m| <= p/2 < 2^30, as the
// CPU kernel assumes) products are below 2^60, so one fold after every 4 products keeps
// |acc| < 2^61 + 2^32 + 2^62 < 2^63, and a single final fold brings it below 2^31 p.

constexpr int kSmallThreads = 128;
constexpr int kSmallCoefs = 4 * kSmallThreads;
constexpr int kSmallOuts = 64;

struct SmallArgs {
  const int32_t* x;  // (batch, La, n)
  int32_t* y;        // (batch, Lb, n)
  int64_t n;
  int64_t tiles;     // ceil(n / kSmallCoefs)
  int La, Lb;
  int outs;          // output limbs per chunk (<= kSmallOuts)
  const int32_t* mod_in;
  const int32_t* mod_out;
  const int32_t* mat;  // (Lb, La)
};

struct SmallSmem {
  int32_t m[kSmallOuts * 16];  // [i][j], j padded to 16 with zeros
  int32_t p[kSmallOuts], pinv[kSmallOuts], r[kSmallOuts];
};

// Step 0: this chunk's matrix rows and output constants.
FT_HD void small_load_step(const SmallArgs& a, int o0, int nout, SmallSmem& s, int tid) {
  for (int idx = tid; idx < kSmallOuts * 16; idx += kSmallThreads) {
    const int i = idx >> 4, j = idx & 15;
    s.m[idx] = (i < nout && j < a.La) ? ldg(a.mat + static_cast<int64_t>(o0 + i) * a.La + j) : 0;
  }
  for (int i = tid; i < kSmallOuts; i += kSmallThreads) {
    if (i < nout) {
      const int32_t p = ldg(a.mod_out + 2 * (o0 + i));
      s.p[i] = p;
      s.pinv[i] = ldg(a.mod_out + 2 * (o0 + i) + 1);
      s.r[i] = two32_centred(p);
    } else {
      s.p[i] = 1;
      s.pinv[i] = 1;
      s.r[i] = 0;
    }
  }
}

// Step 1: LA4 = ceil(La / 4) groups of 4 inputs held in registers.
template <int LA4>
FT_HD void small_compute_step(const SmallArgs& a, int64_t bx, int o0, int nout, const SmallSmem& s, int tid) {
  const int64_t batch = bx / a.tiles;
  const int64_t c = (bx % a.tiles) * kSmallCoefs + 4 * tid;
  if (c >= a.n) return;  // n % 4 == 0: the 4 coefficients are all in range or all out
  const int32_t* xb = a.x + batch * a.La * a.n + c;
  int32_t t[4 * LA4][4];
#pragma unroll
  for (int j = 0; j < 4 * LA4; ++j) {
    if (j < a.La) {
      const int32_t q = ldg(a.mod_in + 2 * j);
      const int4 v = ldg4(xb + j * a.n);
      t[j][0] = centre(v.x, q);
      t[j][1] = centre(v.y, q);
      t[j][2] = centre(v.z, q);
      t[j][3] = centre(v.w, q);
    } else {
      t[j][0] = t[j][1] = t[j][2] = t[j][3] = 0;
    }
  }
  int32_t* yb = a.y + (batch * a.Lb + o0) * a.n + c;
#pragma unroll 1
  for (int i = 0; i < nout; ++i) {
    const int4* mrow = reinterpret_cast<const int4*>(s.m + 16 * i);
    const int32_t r = s.r[i];
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
      for (int k = 0; k < 4; ++k) acc[k] = fold(acc[k], r);
    }
    const int32_t p = s.p[i], pinv = s.pinv[i];
    int4 v;
#pragma unroll
    for (int k = 0; k < 4; ++k) elem(v, k) = canon(smr(acc[k], p, pinv), p);
    st4(yb + static_cast<int64_t>(i) * a.n, v);
  }
}

}  // namespace fhetorch::cuda::bconv_detail
