// Fast base conversion on the GPU (CPU oracle: csrc/cpu/bconv.cpp) as a block program
// (program.cuh) over a conversion map, so that the bconv op, the ModUp of the fused key
// switching (mod_up_core.cuh) and switch_modulus (switch_modulus_core.cuh) share one kernel.
//
// A map M names groups (a polynomial of a batch, or one digit of one ciphertext), each
// converting n_in(g) input rows to n_out(g) output rows:
//   Args; grid(a) -> BcGrid (set by bconv_grid); groups(a); n(a) coefficients per row;
//   vec(a): 16-byte accesses allowed (n % 4 == 0 and rows 16-byte aligned);
//   n_in(a, g), n_out(a, g); in_row(a, g, k), in_mod(a, g, k) (the [q, qinv] pair);
//   out_row(a, g, o), out_mod(a, g, o); mat_row(a, g, o) (n_in centred entries).
// A block converts kBcCoefs adjacent coefficients of one group to one chunk of at most
// kBcOuts output rows; a thread takes 4 adjacent coefficients. Step 0 stages the chunk's
// output constants (and, for at most 16 inputs, its matrix rows) in shared memory; step 1
// either holds the <= 16 centred inputs in registers and produces the outputs one by one
// (LA4 = ceil(n_in / 4) groups of 4 inputs), or, for more inputs, re-reads inputs and matrix
// (cached) per output.
//
// Overflow: |t| <= 2^30 and, with the matrix centred, |m| <= p/2 < 2^30, so products are
// below 2^60; folding a = h * 2^32 + l to h * r + l (r = 2^32 mod p centred, |r| <= p/2)
// after every 4 products keeps |a| < 2^61 + 2^32 + 2^62 < 2^63, and one final fold brings it
// below 2^31 p, the input range of smr(). The result is the canonical residue of the sum
// the CPU computes, hence identical.
#pragma once
#include <cstdint>

#include "bconv_tc_core.cuh"
#include "program.cuh"
#include "util.cuh"

namespace fhetorch::cuda {

constexpr int kBcThreads = 128;
constexpr int kBcCoefs = 4 * kBcThreads;
constexpr int kBcOuts = 64;

struct BcGrid {
  int tiles, chunks, outs;  // coefficient tiles, output chunks per group, outputs per chunk
};

// Enough blocks to fill the GPU (about 132 SMs x 1024 threads), at least 4 outputs per
// chunk (each chunk reloads its inputs), at most kBcOuts.
inline BcGrid bconv_grid(int64_t groups, int64_t n, int max_out) {
  BcGrid g;
  g.tiles = static_cast<int>((n + kBcCoefs - 1) / kBcCoefs);
  const int64_t base = groups * g.tiles * kBcThreads;
  int64_t ch = base > 0 ? (135168 + base - 1) / base : 1;
  const int64_t lo = (max_out + kBcOuts - 1) / kBcOuts, hi = (max_out + 3) / 4;
  ch = ch < lo ? lo : ch > hi ? hi : ch;
  if (ch < 1) ch = 1;
  g.outs = static_cast<int>((max_out + ch - 1) / ch);
  if (g.outs < 1) g.outs = 1;
  g.chunks = (max_out + g.outs - 1) / g.outs;
  if (g.chunks < 1) g.chunks = 1;
  return g;
}

// 2^32 mod p, centred.
FT_HD int32_t two32_centred(int32_t p) {
  const uint32_t up = static_cast<uint32_t>(p);
  const uint32_t r = two32_mod(up);
  return r > (up >> 1) ? static_cast<int32_t>(r) - p : static_cast<int32_t>(r);
}

FT_HD int64_t fold(int64_t a, int32_t r) {
  return mad_wide(static_cast<int32_t>(a >> 32), r, static_cast<int64_t>(static_cast<uint32_t>(a)));
}

// Coefficients c .. c+3 of a row of n (zeros past its end).
FT_HD int4 load4(const int32_t* row, int64_t c, int64_t n, bool vec) {
  if (vec) return ldg4(row + c);
  int4 v;
  for (int m = 0; m < 4; ++m) elem(v, m) = c + m < n ? ldg(row + c + m) : 0;
  return v;
}
FT_HD void store4(int32_t* row, int64_t c, int64_t n, bool vec, int4 v) {
  if (vec) return st4(row + c, v);
  for (int m = 0; m < 4; ++m)
    if (c + m < n) row[c + m] = elem(v, m);
}

// The chunk's constants, staged once per block: the row addresses too, since a map's
// row arithmetic (digit bounds, divisions by the digit count) per output and thread cost as
// much as the products themselves.
struct BcSmem {
  int32_t* out[kBcOuts];       // output rows
  const int32_t* in[16];       // input rows (register path)
  int32_t m[kBcOuts * 16];     // [o][k], k padded to 16 with zeros (register path)
  int32_t p[kBcOuts], pinv[kBcOuts], r[kBcOuts];
  int32_t q_in[16];            // input moduli (register path)
};

template <int LA4, class M>
struct Bconv {
  using Args = typename M::Args;
  static constexpr int THREADS = kBcThreads, MIN_BLOCKS = 5;  // <= 102 registers
  static constexpr int SMEM = static_cast<int>(sizeof(BcSmem) / 4);
  struct State {};
  struct Blk {
    int g, o0, nout;
    int64_t c0;
    BcSmem* s;
  };
  FT_HD static int64_t blocks(const Args& a) {
    const BcGrid gr = M::grid(a);
    return static_cast<int64_t>(M::groups(a)) * gr.chunks * gr.tiles;
  }
  FT_HD static Blk setup(const Args& a, int64_t block, uint32_t* sm) {
    const BcGrid gr = M::grid(a);
    const int64_t rest = block / gr.tiles;
    Blk b;
    b.c0 = (block % gr.tiles) * kBcCoefs;
    b.g = static_cast<int>(rest / gr.chunks);
    b.o0 = static_cast<int>(rest % gr.chunks) * gr.outs;
    const int left = M::n_out(a, b.g) - b.o0;
    b.nout = left < gr.outs ? left : gr.outs;
    b.s = reinterpret_cast<BcSmem*>(sm);
    return b;
  }
  FT_HD static int num_steps(const Args&, const Blk& b) { return b.nout > 0 ? 2 : 0; }
  FT_HD static void step(const Args& a, const Blk& b, int s, int tid, State&) {
    if (s == 0) return stage(a, b, tid);
    const int64_t c = b.c0 + 4 * tid, n = M::n(a);
    if (c >= n) return;
    const bool vec = M::vec(a);
    const BcSmem& sm = *b.s;
    const int nin = M::n_in(a, b.g);
    if constexpr (LA4 > 0) {
      int32_t t[4 * LA4][4];
#pragma unroll
      for (int k = 0; k < 4 * LA4; ++k) {
        const int4 v = k < nin ? load4(sm.in[k], c, n, vec) : make_int4(0, 0, 0, 0);
        const int32_t q = sm.q_in[k];
#pragma unroll
        for (int e = 0; e < 4; ++e) t[k][e] = centre(elem(v, e), q);
      }
#pragma unroll 1
      for (int o = 0; o < b.nout; ++o) {
        const int4* mrow = reinterpret_cast<const int4*>(sm.m + 16 * o);
        int64_t acc[4] = {0, 0, 0, 0};
#pragma unroll
        for (int g = 0; g < LA4; ++g) {
          const int4 m4 = mrow[g];
#pragma unroll
          for (int jj = 0; jj < 4; ++jj)
#pragma unroll
            for (int e = 0; e < 4; ++e) acc[e] = mad_wide(t[4 * g + jj][e], elem(m4, jj), acc[e]);
#pragma unroll
          for (int e = 0; e < 4; ++e) acc[e] = fold(acc[e], sm.r[o]);
        }
        finish(a, b, o, acc, c, n, vec);
      }
    } else {
      for (int o = 0; o < b.nout; ++o) {
        const int32_t* mrow = M::mat_row(a, b.g, b.o0 + o);
        int64_t acc[4] = {0, 0, 0, 0};
        for (int k = 0; k < nin; ++k) {
          const int32_t q = ldg(M::in_mod(a, b.g, k)), m = ldg(mrow + k);
          const int4 v = load4(M::in_row(a, b.g, k), c, n, vec);
#pragma unroll
          for (int e = 0; e < 4; ++e) acc[e] = mad_wide(centre(elem(v, e), q), m, acc[e]);
          if ((k & 3) == 3) {
#pragma unroll
            for (int e = 0; e < 4; ++e) acc[e] = fold(acc[e], sm.r[o]);
          }
        }
#pragma unroll
        for (int e = 0; e < 4; ++e) acc[e] = fold(acc[e], sm.r[o]);
        finish(a, b, o, acc, c, n, vec);
      }
    }
  }

 private:
  // Step 0: the chunk's output constants and, on the register path, its matrix rows.
  FT_HD static void stage(const Args& a, const Blk& b, int tid) {
    BcSmem& sm = *b.s;
    const int nin = M::n_in(a, b.g);
    if (LA4 > 0) {
      for (int idx = tid; idx < kBcOuts * 16; idx += THREADS) {
        const int o = idx >> 4, k = idx & 15;
        sm.m[idx] = (o < b.nout && k < nin) ? ldg(M::mat_row(a, b.g, b.o0 + o) + k) : 0;
      }
      for (int k = tid; k < 16; k += THREADS) {
        sm.in[k] = k < nin ? M::in_row(a, b.g, k) : nullptr;
        sm.q_in[k] = k < nin ? ldg(M::in_mod(a, b.g, k)) : 1;
      }
    }
    for (int o = tid; o < kBcOuts; o += THREADS) {
      const int32_t* pm = o < b.nout ? M::out_mod(a, b.g, b.o0 + o) : nullptr;
      sm.p[o] = pm ? ldg(pm) : 1;
      sm.pinv[o] = pm ? ldg(pm + 1) : 1;
      sm.r[o] = pm ? two32_centred(sm.p[o]) : 0;
      sm.out[o] = o < b.nout ? M::out_row(a, b.g, b.o0 + o) : nullptr;
    }
  }
  FT_HD static void finish(const Args& a, const Blk& b, int o, const int64_t (&acc)[4], int64_t c, int64_t n,
                           bool vec) {
    const BcSmem& sm = *b.s;
    int4 v;
#pragma unroll
    for (int e = 0; e < 4; ++e) elem(v, e) = canon(smr(acc[e], sm.p[o], sm.pinv[o]), sm.p[o]);
    store4(sm.out[o], c, n, vec, v);
  }
};

// Runs the conversion of at most max_out outputs a group: on int8 tensor cores where
// bconv_tc_takes(max_in) (bconv_tc_core.cuh: 9-16 inputs by default), else with the register
// path sized for up to max_in inputs per group, or the memory path.
template <class M, class Exec>
cudaError_t run_bconv(Exec& ex, const typename M::Args& a, int max_in, int max_out) {
  if (bconv_tc_takes(max_in) && (!std::is_same_v<Exec, CudaExec> || tc_device_ok())) {
    const TcArgs<M> t{a, bconv_tc_grid(M::groups(a), M::n(a), max_out)};
    if (max_in <= 8) return ex.template run<BconvTc<1, M>>(t);
    return ex.template run<BconvTc<2, M>>(t);
  }
  if (max_in <= 4) return ex.template run<Bconv<1, M>>(a);
  if (max_in <= 8) return ex.template run<Bconv<2, M>>(a);
  if (max_in <= 12) return ex.template run<Bconv<3, M>>(a);
  if (max_in <= 16) return ex.template run<Bconv<4, M>>(a);
  return ex.template run<Bconv<0, M>>(a);
}

// ---- the bconv op: one group per polynomial of a batch (x (batch, La, n) -> y (batch, Lb, n))

struct BatchArgs {
  const int32_t* x;  // (batch, La, n)
  int32_t* y;        // (batch, Lb, n)
  const int32_t* mod_in;
  const int32_t* mod_out;
  const int32_t* mat;  // (Lb, La)
  int64_t n;
  int batch, La, Lb;
  bool vec;
  BcGrid grid;
};

struct BatchMap {
  using Args = BatchArgs;
  static constexpr bool kConstTables = false;  // the bconv op's matrix may come from the kernel just before
  FT_HD static BcGrid grid(const Args& a) { return a.grid; }
  FT_HD static int groups(const Args& a) { return a.batch; }
  FT_HD static int64_t n(const Args& a) { return a.n; }
  FT_HD static bool vec(const Args& a) { return a.vec; }
  FT_HD static int n_in(const Args& a, int) { return a.La; }
  FT_HD static int n_out(const Args& a, int) { return a.Lb; }
  FT_HD static const int32_t* in_row(const Args& a, int g, int k) { return a.x + (static_cast<int64_t>(g) * a.La + k) * a.n; }
  FT_HD static const int32_t* in_mod(const Args& a, int, int k) { return a.mod_in + 2 * k; }
  FT_HD static int32_t* out_row(const Args& a, int g, int o) { return a.y + (static_cast<int64_t>(g) * a.Lb + o) * a.n; }
  FT_HD static const int32_t* out_mod(const Args& a, int, int o) { return a.mod_out + 2 * o; }
  FT_HD static const int32_t* mat_row(const Args& a, int, int o) { return a.mat + static_cast<int64_t>(o) * a.La; }
};

template <class Exec>
cudaError_t run_bconv_batch(Exec& ex, const int32_t* x, int32_t* y, int64_t batch, int La, int Lb, int64_t n,
                            const int32_t* mod_in, const int32_t* mod_out, const int32_t* mat) {
  if (batch <= 0 || n <= 0 || Lb <= 0) return cudaSuccess;
  if (La <= 0 || La > 256 || batch > 0x7FFFFFFF) return cudaErrorInvalidValue;
  const BatchArgs a{x, y, mod_in, mod_out, mat, n, static_cast<int>(batch), La, Lb,
                    n % 4 == 0 && aligned16(x) && aligned16(y), bconv_grid(batch, n, Lb)};
  return run_bconv<BatchMap>(ex, a, La, Lb);
}

}  // namespace fhetorch::cuda
