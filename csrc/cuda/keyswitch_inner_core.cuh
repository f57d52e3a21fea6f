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

// acc[c] += v * k_c (4 coefficients), canonical.
FT_HD void mac_key(uint32_t (&acc)[2][4], int4 v, int4 k0, int4 k1, uint32_t q, uint32_t qinv) {
#pragma unroll
  for (int m = 0; m < 4; ++m) {
    const uint32_t vm = static_cast<uint32_t>(elem(v, m));
    acc[0][m] = add_2q(acc[0][m], mmul(vm, static_cast<uint32_t>(elem(k0, m)), q, qinv), q);
    acc[1][m] = add_2q(acc[1][m], mmul(vm, static_cast<uint32_t>(elem(k1, m)), q, qinv), q);
  }
}

// ROT: the input's own digits and the addend read through the fused rotation (a build of its own).
// Every load is issued early: the sums start from the addend (times c_add) and the running sum,
// then take the own digit's key products, then the converted rows' with no branch between their
// loads, two digits at a time (six 16-byte loads in flight; a loop whose loads waited in turn,
// behind the own digit's branch, was latency-bound: docs/benchmarks.md, session 36). Sums mod q
// are exact, so the order gives the canonical results of any other.
template <int LOG_N, bool ROT = false>
struct KeyswitchInner {
  using Args = MuArgs;
  static constexpr int THREADS = 256, SMEM = 4, MIN_BLOCKS = 4;  // <= 64 registers
  static constexpr int64_t N = int64_t(1) << LOG_N;
  static constexpr int PER_LIMB = static_cast<int>(N / (4 * THREADS));  // N >= 2^10
  struct State {};
  struct Blk {
    int i, x0, own;      // own: the digit holding limb i, or -1 (a special prime)
    uint32_t q, qinv;
    const int32_t* key;  // the key row of digit 0, component 0 at limb i; digit j's component c: + (2 j + c) kstride
    int64_t kstride;
    int64_t vb;          // the work block (a grid of a.ks_cap blocks strides over them)
  };
  FT_HD static int64_t work(const Args& a) { return static_cast<int64_t>(a.ks_hi - a.ks_lo) * PER_LIMB; }
  FT_HD static int64_t blocks(const Args& a) { return a.ks_cap > 0 && a.ks_cap < work(a) ? a.ks_cap : work(a); }
  FT_HD static Blk setup(const Args& a, int64_t block, uint32_t*) {
    Blk b;
    b.vb = block;
    b.i = a.ks_lo + static_cast<int>(block / PER_LIMB);
    b.x0 = static_cast<int>(block % PER_LIMB) * 4 * THREADS;
    b.own = b.i < a.g.L ? mu_own_digit(a, b.i) : -1;
    b.q = static_cast<uint32_t>(ldg(a.g.mod_ext + 2 * b.i));
    b.qinv = static_cast<uint32_t>(ldg(a.g.mod_ext + 2 * b.i + 1));
    // key_q (digits, 2, Lq_key, N) at limb q_start + i, or key_p (digits, 2, K, N) at i - L
    const bool level = b.i < a.g.L;
    b.kstride = (level ? a.key.Lq_key : a.g.K) * N;
    b.key = (level ? a.key.key_q + (a.key.q_start + b.i) * N : a.key.key_p + (b.i - a.g.L) * N) +
            2 * a.key.digit_start * b.kstride;
    return b;
  }
  FT_HD static int num_steps(const Args&, const Blk&) { return 1; }
  FT_HD static void step(const Args& a, const Blk& b, int, int tid, State&) {
    body(a, b, tid);
    if (a.ks_cap > 0)
      for (int64_t vb = b.vb + a.ks_cap; vb < work(a); vb += a.ks_cap) body(a, setup(a, vb, nullptr), tid);
  }
  FT_HD static void body(const Args& a, const Blk& b, int tid) {
    const int x = b.x0 + 4 * tid;
    const uint32_t q = b.q, qinv = b.qinv;
    const bool add = b.i < (a.g.b ? a.g.L : a.key.La);
    const uint32_t ca = add ? static_cast<uint32_t>(ldg(a.key.c_add + b.i)) : 0u;
    const int others = b.own >= 0 ? a.g.beta - 1 : a.g.beta;
    for (int64_t bb = 0; bb < a.g.B; ++bb) {
      uint32_t acc[2][4] = {};
      int4 own = make_int4(0, 0, 0, 0);
      if (a.g.b) {
        if (b.i < a.g.L) {  // the tensor product: (d0, d1) c_add start the sums, d2 = a1 b1 is the own digit
          const int64_t L = a.g.L, o0 = (2 * bb * L + b.i) * N + x, b0 = bb * a.g.b_stride + b.i * N + x;
          const int4 a0 = ldg4(a.g.a + o0), a1 = ldg4(a.g.a + o0 + L * N), b0v = ldg4(a.g.b + b0),
                     b1 = ldg4(a.g.b + b0 + L * N);
#pragma unroll
          for (int m = 0; m < 4; ++m) {
            const uint32_t u0 = elem(a0, m), u1 = elem(a1, m), v0 = elem(b0v, m), v1 = elem(b1, m);
            acc[0][m] = mmul(mmul(u0, v0, q, qinv), ca, q, qinv);
            acc[1][m] = mmul(add_2q(mmul(u0, v1, q, qinv), mmul(u1, v0, q, qinv), q), ca, q, qinv);
            elem(own, m) = static_cast<int32_t>(mmul(u1, v1, q, qinv));
          }
        }
      } else {
#pragma unroll
        for (int c = 0; c < 2; ++c) {
          if (add && c < a.key.Ka) {  // the addend (B, Ka, La, N) at limb i < La, rotated with ROT
            const int32_t* row = a.key.addend + bb * a.key.addend_stride + (c * a.key.La + b.i) * N;
            const int4 ad = ROT ? rotated4(row, x, a.g.galois, a.g.log_n) : ldg4(row + x);
#pragma unroll
            for (int m = 0; m < 4; ++m) acc[c][m] = mmul(static_cast<uint32_t>(elem(ad, m)), ca, q, qinv);
          }
        }
        if (b.own >= 0) own = mu_input4<ROT>(a, bb, b.i, x, N, q, qinv);
      }
      if (a.key.acc) {
#pragma unroll
        for (int c = 0; c < 2; ++c) {
          const int4 s = ldg4(a.key.acc + ((2 * bb + c) * a.Lext + b.i) * N + x);
#pragma unroll
          for (int m = 0; m < 4; ++m) acc[c][m] = add_2q(acc[c][m], static_cast<uint32_t>(elem(s, m)), q);
        }
      }
      if (b.own >= 0) {
        const int32_t* k = b.key + 2 * b.own * b.kstride + x;
        mac_key(acc, own, ldg4(k), ldg4(k + b.kstride), q, qinv);
      }
      const int32_t* d_bb = a.d + bb * mu_conv_rows(a) * N + x;
#pragma unroll 2
      for (int jj = 0; jj < others; ++jj) {
        const int j = b.own >= 0 && jj >= b.own ? jj + 1 : jj;
        const int4 v = ldg4(d_bb + mu_conv_index(a, j, b.i) * N);
        const int32_t* k = b.key + 2 * j * b.kstride + x;
        mac_key(acc, v, ldg4(k), ldg4(k + b.kstride), q, qinv);
      }
#pragma unroll
      for (int c = 0; c < 2; ++c) {
        int4 r;
#pragma unroll
        for (int m = 0; m < 4; ++m) elem(r, m) = static_cast<int32_t>(acc[c][m]);
        stg4(a.out + ((2 * bb + c) * a.Lext + b.i) * N + x, r);
      }
    }
  }
};

// The arguments of run_mod_up (key null: mod_up into out; else mod_up_keyswitch_inner, the key
// product over every ext limb into out, the compact converted rows in d).
inline MuArgs mu_args(const ModUpArgs& g, const KeyArgs* key, int32_t* out, int32_t* t, int32_t* d) {
  MuArgs a{};
  a.g = g;
  a.t = t;
  a.Lext = g.L + g.K;
  a.ks_lo = 0;
  a.ks_hi = a.Lext;
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
  return a;
}

// The key product of ext limbs [a.ks_lo, a.ks_hi) (after mod_up_pipeline).
template <int LOG_N, class Exec>
cudaError_t run_key_product(Exec& ex, const MuArgs& a) {
  return a.g.galois ? ex.template run<KeyswitchInner<LOG_N, true>>(a) : ex.template run<KeyswitchInner<LOG_N>>(a);
}

// mod_up (key null: out (B, beta, Lext, N), scratch t) or mod_up_keyswitch_inner (out
// (B, 2, Lext, N), scratch t and d), on any executor (program.cuh).
template <class Exec>
cudaError_t run_mod_up(Exec& ex, const ModUpArgs& g, const KeyArgs* key, int32_t* out, int32_t* t, int32_t* d) {
  if (g.B <= 0) return cudaSuccess;
  if (!table_rows_fit(g.psi_rows, g.L + g.K)) return cudaErrorInvalidValue;
  MuArgs a = mu_args(g, key, out, t, d);
  return dispatch_log_n(g.log_n, [&](auto log_n) {
    constexpr int LOG_N = decltype(log_n)::value;
    FT_TRY((mod_up_pipeline<LOG_N>(ex, a)));
    return key ? run_key_product<LOG_N>(ex, a) : cudaSuccess;
  });
}

}  // namespace fhetorch::cuda
