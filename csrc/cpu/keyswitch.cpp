// The fused key-switching ops on the CPU (the oracle of csrc/cuda/keyswitch.cu): each is the
// composition its schema (csrc/bind/schema.cpp) states, of the plain transforms, base
// conversion and inner product, phase by phase over the whole batch.
#include <algorithm>

#include "kernels.h"

namespace fhetorch::cpu {
namespace {

int64_t n_of(int log_n) { return int64_t(1) << log_n; }

// row[src(x)]: x's value of automorphism(row, galois) (0: row[x]).
int32_t rotated_at(const int32_t* row, int64_t x, uint32_t galois, int log_n) {
  return row[galois ? automorphism_source(static_cast<uint32_t>(x), galois, log_n) : x];
}

// ModUp's input (B, L, n): a (rotated by the fused rotation, if any), or a1 * b1 in
// tensor-product mode.
void mod_up_input(const ModUpArgs& g, int32_t* in, const Threads& th) {
  const int64_t n = n_of(g.log_n), plane = g.L * n;
  th.par(g.B * plane, 4096, [&](int64_t i0, int64_t i1) {
    if (!g.b && !g.galois && g.a_stride == plane) {
      std::copy(g.a + i0, g.a + i1, in + i0);
      return;
    }
    if (!g.b) {  // polynomial k of a starts k a_stride words in
      for (int64_t it = i0; it < i1; ++it) {
        const int64_t k = it / plane, e = it % plane;
        in[it] = rotated_at(g.a + k * g.a_stride + (e - e % n), e % n, g.galois, g.log_n);
      }
      return;
    }
    for (int64_t it = i0; it < i1; ++it) {
      const int64_t k = it / plane, e = it % plane;
      const int l = static_cast<int>(e / n);
      in[it] = mont_mul(g.a[(2 * k + 1) * plane + e], g.b[k * g.b_stride + plane + e], g.mod_ext[2 * l],
                        g.mod_ext[2 * l + 1]);
    }
  });
}

// Every digit of in (B, L, n) lifted to ext: out (B, beta, Lext, n).
void lift(const ModUpArgs& g, const int32_t* in, int32_t* out, const Threads& th) {
  const int64_t n = n_of(g.log_n);
  const int L = g.L, Lext = g.L + g.K, beta = g.beta;
  // INTT of the whole level with the per-limb BConv constants: standard-form digit inputs.
  int32_t* t = th.scratch(g.B * L * n);
  intt(in, t, g.B * L, L, g.log_n, g.mod_ext, g.psi_inv_ext, g.pre, g.psi_rows, th);
  // BConv of digit j to the ext limbs outside it: [0, lo_j) and [lo_(j+1), Lext).
  th.par(g.B * beta * n, 256, [&](int64_t i0, int64_t i1) {
    for (int64_t it = i0; it < i1; ++it) {
      const int64_t bj = it / n, c = it % n;
      const int j = static_cast<int>(bj % beta), lo = g.lo[j], hi = g.lo[j + 1];
      const int32_t* tin = t + ((bj / beta) * L + lo) * n + c;
      int32_t* o = out + bj * Lext * n + c;
      const int32_t* mat = g.mats + static_cast<int64_t>(j) * Lext * g.alpha_max;
      const int32_t* mod_in = g.mod_ext + 2 * lo;
      bconv_coefficient(tin, o, hi - lo, lo, n, mod_in, g.mod_ext, mat, g.alpha_max);
      bconv_coefficient(tin, o + hi * n, hi - lo, Lext - hi, n, mod_in, g.mod_ext + 2 * hi, mat + hi * g.alpha_max,
                        g.alpha_max);
    }
  });
  // Forward NTT of the converted rows; a digit's own rows are the input's.
  th.par(g.B * beta * Lext, 1, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const int i = static_cast<int>(r % Lext), j = static_cast<int>((r / Lext) % beta);
      if (i >= g.lo[j] && i < g.lo[j + 1]) {
        const int32_t* src = in + ((r / (beta * Lext)) * L + i) * n;
        std::copy(src, src + n, out + r * n);
      } else {
        ntt_rows(out, r, r + 1, Lext, g.log_n, g.mod_ext, g.psi_ext, g.psi_rows);
      }
    }
  });
}

}  // namespace

void mod_up(const ModUpArgs& g, int32_t* out, const Threads& th) {
  int32_t* in = th.scratch(g.B * g.L * n_of(g.log_n));
  mod_up_input(g, in, th);
  lift(g, in, out, th);
}

void mod_up_keyswitch_inner(const ModUpArgs& g, const KeyArgs& key, int32_t* out, const Threads& th) {
  const int64_t n = n_of(g.log_n);
  const int L = g.L, Lext = g.L + g.K;
  int32_t* d = th.scratch(g.B * g.beta * Lext * n);
  mod_up(g, d, th);
  keyswitch_inner(InnerArgs{d, key.key_q, key.key_p, out, g.mod_ext, g.B, n, g.beta, Lext, L, g.K, key.Lq_key,
                            key.q_start, key.digit_start},
                  th);
  // + addend * c_add on the first La limbs of the first Ka components (the addend rotated with a,
  // if a fused rotation is set); in tensor-product mode the addend is (a0 b0, a0 b1 + a1 b0).
  const int La = g.b ? L : key.La, Ka = g.b ? 2 : key.Ka;
  const int64_t plane = La * n;
  th.par(g.B * Ka * La, 1, [&](int64_t r0, int64_t r1) {
    for (int64_t row = r0; row < r1; ++row) {  // row = (ciphertext k, component c < Ka, limb l)
      const int64_t bk = row / La, k = bk / Ka;
      const int l = static_cast<int>(row % La), c = static_cast<int>(bk % Ka);
      const int32_t q = g.mod_ext[2 * l], qinv = g.mod_ext[2 * l + 1], c_add = key.c_add[l];
      const int64_t e0 = static_cast<int64_t>(l) * n;
      int32_t* o = out + (2 * k + c) * Lext * n + e0;
      if (g.b) {
        const int32_t* a = g.a + 2 * k * plane + e0;
        const int32_t* b = g.b + k * g.b_stride + e0;
        for (int64_t x = 0; x < n; ++x) {
          int32_t d0, d1, d2;
          tensor_product_element(a[x], a[plane + x], b[x], b[plane + x], q, qinv, d0, d1, d2);
          o[x] = add_mod(o[x], mont_mul(c == 0 ? d0 : d1, c_add, q, qinv), q);
        }
      } else {
        const int32_t* v = key.addend + k * key.addend_stride + c * plane + e0;
        for (int64_t x = 0; x < n; ++x)
          o[x] = add_mod(o[x], mont_mul(rotated_at(v, x, g.galois, g.log_n), c_add, q, qinv), q);
      }
    }
  });
  if (key.acc) {  // + the running sum, every row
    th.par(g.B * 2 * Lext, 1, [&](int64_t r0, int64_t r1) {
      for (int64_t row = r0; row < r1; ++row) {
        const int l = static_cast<int>(row % Lext);
        const int32_t q = g.mod_ext[2 * l];
        int32_t* o = out + row * n;
        const int32_t* s = key.acc + row * n;
        for (int64_t x = 0; x < n; ++x) o[x] = add_mod(o[x], s[x], q);
      }
    });
  }
}

void switch_modulus(const SwitchArgs& g, int32_t* out, const Threads& th) {
  const int64_t n = n_of(g.log_n), B = g.B;
  const int D = g.D, Ld = g.Ld;
  // The dropped rows, to standard form times pre.
  int32_t* t = th.scratch(B * D * n);
  th.par(B * D, 1, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const int32_t* src = g.x + ((r / D) * g.Ls + g.drop[r % D]) * n;
      std::copy(src, src + n, t + r * n);
    }
    intt_rows(t, r0, r1, D, g.log_n, g.mod_drop, g.psi_inv_drop, g.pre, g.psi_inv_drop_rows);
  });
  int32_t* y = th.scratch(B * Ld * n);
  bconv(t, y, B, D, Ld, n, g.mod_drop, g.mod_dst, g.mat, th);
  ntt(y, y, B * Ld, Ld, g.log_n, g.mod_dst, g.psi_dst, g.psi_dst_rows, th);
  // out = x[keep] * c_keep + y * c_sub (+ addend, rotated if galois is set), row by row (constants
  // once per row).
  th.par(B * Ld, 1, [&](int64_t r0, int64_t r1) {
    for (int64_t row = r0; row < r1; ++row) {
      const int64_t p = row / Ld;
      const int i = static_cast<int>(row % Ld);
      const int32_t q = g.mod_dst[2 * i], qinv = g.mod_dst[2 * i + 1], c_sub = g.c_sub[i], c_keep = g.c_keep[i];
      const int32_t* yr = y + row * n;
      const int32_t* keep = g.keep[i] >= 0 ? g.x + (p * g.Ls + g.keep[i]) * n : nullptr;
      const int32_t* add =
          g.addend && p % g.K < g.Ka ? g.addend + (((p / g.K) * g.Ka + p % g.K) * Ld + i) * n : nullptr;
      int32_t* o = out + row * n;
      for (int64_t c = 0; c < n; ++c) {
        int32_t r = mont_mul(yr[c], c_sub, q, qinv);
        if (keep) r = add_mod(mont_mul(keep[c], c_keep, q, qinv), r, q);
        if (add) r = add_mod(r, rotated_at(add, c, g.galois, g.log_n), q);
        o[c] = r;
      }
    }
  });
}

void keyswitch(const ModUpArgs& g, const KeyArgs& key, const SwitchArgs& sw, int32_t* u, int32_t* out,
               const Threads& th) {
  mod_up_keyswitch_inner(g, key, u, th);
  switch_modulus(sw, out, th);
}

}  // namespace fhetorch::cpu
