// The key-switching inner product that ends mod_up_keyswitch_inner (after mod_up_core.cuh's
// ModUp into the compact converted rows), with the addend: one thread per 4 coefficients of
// ext limb i computes, for every ciphertext of the batch, sum_j d_j[i] * key_j[c][i] for
// c = 0, 1 (a digit's own limb read from the input, or a1 * b1) plus addend * c_add (or the
// tensor product's (d0, d1) * c_add) on the first La limbs. The ciphertexts are the inner
// loop of a thread, so each key row is read from memory once per block and re-read from the
// cache for the other ciphertexts of the batch.
#pragma once
#include <cstdint>

#include "mod_up_core.cuh"

namespace fhetorch::cuda {

FT_HD uint32_t add_2q(uint32_t a, uint32_t b, uint32_t q) { return reduce_2q(a + b, q); }  // a, b < q
FT_HD uint32_t mmul(uint32_t x, uint32_t y, uint32_t q, uint32_t qinv) {               // canonical x * y
  return reduce_2q(mont_lazy(x, y, q, qinv), q);
}

// Key row of digit j (global digit digit_start + j), component c, ext limb i.
FT_HD const int32_t* mu_key_row(const MuArgs& a, int j, int c, int i, int64_t n) {
  const int64_t dig = a.key.digit_start + j;
  if (i < a.g.L) return a.key.key_q + ((dig * 2 + c) * a.key.Lq_key + a.key.q_start + i) * n;
  return a.key.key_p + ((dig * 2 + c) * a.g.K + (i - a.g.L)) * n;
}

// Component c of ciphertext bb's addend at limb i < La, coefficients x..x+3 (before c_add; ROT:
// read through the fused rotation).
template <bool ROT>
FT_HD int4 mu_addend4(const MuArgs& a, int64_t bb, int c, int i, int x, int64_t n, uint32_t q, uint32_t qinv) {
  if (!a.g.b) {
    const int32_t* row = a.key.addend + ((a.key.Ka * bb + c) * a.key.La + i) * n;
    if constexpr (ROT) return rotated4(row, x, a.g.galois, a.g.log_n);
    return ldg4(row + x);
  }
  const int64_t L = a.g.L, o0 = (2 * bb * L + i) * n + x, b0 = bb * a.g.b_stride + static_cast<int64_t>(i) * n + x;
  const int4 a0 = ldg4(a.g.a + o0), a1 = ldg4(a.g.a + o0 + L * n), b0v = ldg4(a.g.b + b0), b1 = ldg4(a.g.b + b0 + L * n);
  int4 r;
#pragma unroll
  for (int m = 0; m < 4; ++m) {
    const uint32_t u0 = static_cast<uint32_t>(elem(a0, m)), v0 = static_cast<uint32_t>(elem(b0v, m));
    elem(r, m) = static_cast<int32_t>(c == 0 ? mmul(u0, v0, q, qinv)
                                             : add_2q(mmul(u0, static_cast<uint32_t>(elem(b1, m)), q, qinv),
                                                      mmul(static_cast<uint32_t>(elem(a1, m)), v0, q, qinv), q));
  }
  return r;
}

// ROT: the input's own digits and the addend read through the fused rotation (a build of its own).
template <int LOG_N, bool ROT = false>
struct KeyswitchInner {
  using Args = MuArgs;
  static constexpr int THREADS = 256, SMEM = 4, MIN_BLOCKS = 4;  // <= 64 registers
  static constexpr int64_t N = int64_t(1) << LOG_N;
  static constexpr int PER_LIMB = static_cast<int>(N / (4 * THREADS));  // N >= 2^10
  struct State {};
  struct Blk {
    int i, x0, own;  // own: the digit holding limb i, or -1 (a special prime)
    uint32_t q, qinv;
  };
  FT_HD static int64_t blocks(const Args& a) { return static_cast<int64_t>(a.Lext) * PER_LIMB; }
  FT_HD static Blk setup(const Args& a, int64_t block, uint32_t*) {
    Blk b;
    b.i = static_cast<int>(block / PER_LIMB);
    b.x0 = static_cast<int>(block % PER_LIMB) * 4 * THREADS;
    b.own = b.i < a.g.L ? mu_own_digit(a, b.i) : -1;
    b.q = static_cast<uint32_t>(ldg(a.g.mod_ext + 2 * b.i));
    b.qinv = static_cast<uint32_t>(ldg(a.g.mod_ext + 2 * b.i + 1));
    return b;
  }
  FT_HD static int num_steps(const Args&, const Blk&) { return 1; }
  FT_HD static void step(const Args& a, const Blk& b, int, int tid, State&) {
    const int x = b.x0 + 4 * tid;
    const uint32_t q = b.q, qinv = b.qinv;
    const bool add = b.i < (a.g.b ? a.g.L : a.key.La);
    const uint32_t ca = add ? static_cast<uint32_t>(ldg(a.key.c_add + b.i)) : 0u;
    for (int64_t bb = 0; bb < a.g.B; ++bb) {
      uint32_t acc[2][4] = {};
      for (int j = 0; j < a.g.beta; ++j) {
        const int4 v = j == b.own ? mu_input4<ROT>(a, bb, b.i, x, N, q, qinv) : ldg4(a.d + mu_drow(a, bb, j, b.i) * N + x);
        const int4 k0 = ldg4(mu_key_row(a, j, 0, b.i, N) + x), k1 = ldg4(mu_key_row(a, j, 1, b.i, N) + x);
#pragma unroll
        for (int m = 0; m < 4; ++m) {
          const uint32_t vm = static_cast<uint32_t>(elem(v, m));
          acc[0][m] = add_2q(acc[0][m], mmul(vm, static_cast<uint32_t>(elem(k0, m)), q, qinv), q);
          acc[1][m] = add_2q(acc[1][m], mmul(vm, static_cast<uint32_t>(elem(k1, m)), q, qinv), q);
        }
      }
#pragma unroll
      for (int c = 0; c < 2; ++c) {
        int4 r;
        const bool add_c = add && (a.g.b || c < a.key.Ka);
        const int4 ad = add_c ? mu_addend4<ROT>(a, bb, c, b.i, x, N, q, qinv) : make_int4(0, 0, 0, 0);
        const int64_t o = ((2 * bb + c) * a.Lext + b.i) * N + x;
        const int4 s = a.key.acc ? ldg4(a.key.acc + o) : make_int4(0, 0, 0, 0);
#pragma unroll
        for (int m = 0; m < 4; ++m) {
          uint32_t v = add_c ? add_2q(acc[c][m], mmul(static_cast<uint32_t>(elem(ad, m)), ca, q, qinv), q) : acc[c][m];
          if (a.key.acc) v = add_2q(v, static_cast<uint32_t>(elem(s, m)), q);
          elem(r, m) = static_cast<int32_t>(v);
        }
        st4(a.out + o, r);
      }
    }
  }
};

// mod_up (key null: out (B, beta, Lext, N), scratch t) or mod_up_keyswitch_inner (out
// (B, 2, Lext, N), scratch t and d), on any executor (program.cuh).
template <class Exec>
cudaError_t run_mod_up(Exec& ex, const ModUpArgs& g, const KeyArgs* key, int32_t* out, int32_t* t, int32_t* d) {
  if (g.B <= 0) return cudaSuccess;
  if (!table_rows_fit(g.psi_rows, g.L + g.K)) return cudaErrorInvalidValue;
  MuArgs a{};
  a.g = g;
  a.t = t;
  a.Lext = g.L + g.K;
  mu_set_divisors(a);
  if (key) {
    a.key = *key;
    a.out = out;
    a.d = d;
    a.compact = 1;
  } else {
    a.d = out;
    a.copy_own = out;
  }
  return dispatch_log_n(g.log_n, [&](auto log_n) {
    constexpr int LOG_N = decltype(log_n)::value;
    FT_TRY((mod_up_pipeline<LOG_N>(ex, a)));
    if (!key) return cudaSuccess;
    return a.g.galois ? ex.template run<KeyswitchInner<LOG_N, true>>(a) : ex.template run<KeyswitchInner<LOG_N>>(a);
  });
}

}  // namespace fhetorch::cuda
