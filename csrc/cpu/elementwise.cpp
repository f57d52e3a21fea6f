// Element-wise limb arithmetic (CPU oracle of csrc/cuda/elementwise.cu).
#include "kernels.h"
#include "../arith.h"

namespace fhetorch::cpu {

void binary(Binary op, const int32_t* a, const int32_t* b, int32_t* out, int64_t i0, int64_t i1,
            int64_t nb, int64_t n, int L, const int32_t* mod) {
  for (int64_t i = i0; i < i1; ++i) {
    const int l = static_cast<int>((i / n) % L);
    const int32_t q = mod[2 * l], x = a[i], y = b[i % nb];
    switch (op) {
      case Binary::Add: out[i] = add_mod(x, y, q); break;
      case Binary::Sub: out[i] = sub_mod(x, y, q); break;
      case Binary::Mul: out[i] = mont_mul(x, y, q, mod[2 * l + 1]); break;
    }
  }
}

void neg(const int32_t* a, int32_t* out, int64_t i0, int64_t i1, int64_t n, int L, const int32_t* mod) {
  for (int64_t i = i0; i < i1; ++i) out[i] = neg_mod(a[i], mod[2 * ((i / n) % L)]);
}

void axpby(const int32_t* a, const int32_t* ca, const int32_t* b, const int32_t* cb, int32_t* out,
           int64_t i0, int64_t i1, int64_t nb, int64_t n, int L, const int32_t* mod) {
  for (int64_t i = i0; i < i1; ++i) {
    const int l = static_cast<int>((i / n) % L);
    const int32_t q = mod[2 * l], qinv = mod[2 * l + 1];
    int32_t r = mont_mul(a[i], ca[l], q, qinv);
    if (cb) r = add_mod(r, mont_mul(b[i % nb], cb[l], q, qinv), q);
    out[i] = r;
  }
}

void tensor_product(const int32_t* a, const int32_t* b, int32_t* out, int64_t i0, int64_t i1,
                    int64_t plane, int64_t batch, bool b_broadcast, int64_t n, int L, const int32_t* mod) {
  (void)batch;
  for (int64_t it = i0; it < i1; ++it) {
    const int64_t k = it / plane, e = it % plane;
    const int l = static_cast<int>((e / n) % L);
    const int32_t q = mod[2 * l], qinv = mod[2 * l + 1];
    const int32_t* ak = a + k * 2 * plane;
    const int32_t* bk = b + (b_broadcast ? 0 : k * 2 * plane);
    int32_t* ok = out + k * 3 * plane;
    const int32_t a0 = ak[e], a1 = ak[plane + e], b0 = bk[e], b1 = bk[plane + e];
    ok[e] = mont_mul(a0, b0, q, qinv);
    ok[plane + e] = add_mod(mont_mul(a0, b1, q, qinv), mont_mul(a1, b0, q, qinv), q);
    ok[2 * plane + e] = mont_mul(a1, b1, q, qinv);
  }
}

void automorphism(const int32_t* x, int32_t* out, int64_t r0, int64_t r1, int log_n, uint32_t galois) {
  const int64_t n = int64_t(1) << log_n;
  for (int64_t r = r0; r < r1; ++r)
    for (uint32_t k = 0; k < n; ++k) out[r * n + k] = x[r * n + automorphism_source(k, galois, log_n)];
}

void keyswitch_inner(const int32_t* d, const int32_t* key_q, const int32_t* key_p, int32_t* out,
                     int64_t i0, int64_t i1, int beta, int L, int Lq, int K, int Lq_key,
                     int q_start, int digit_start, int64_t n, const int32_t* mod) {
  for (int64_t it = i0; it < i1; ++it) {
    const int l = static_cast<int>(it / n);
    const int64_t c = it % n;
    const int32_t q = mod[2 * l], qinv = mod[2 * l + 1];
    int32_t acc0 = 0, acc1 = 0;
    for (int j = 0; j < beta; ++j) {
      const int dig = digit_start + j;
      const int32_t dv = d[(static_cast<int64_t>(j) * L + l) * n + c];
      const int32_t* k0;
      if (l < Lq) k0 = key_q + ((static_cast<int64_t>(dig) * 2) * Lq_key + q_start + l) * n;
      else k0 = key_p + ((static_cast<int64_t>(dig) * 2) * K + (l - Lq)) * n;
      const int64_t stride = (l < Lq ? static_cast<int64_t>(Lq_key) : K) * n;
      acc0 = add_mod(acc0, mont_mul(dv, k0[c], q, qinv), q);
      acc1 = add_mod(acc1, mont_mul(dv, k0[stride + c], q, qinv), q);
    }
    out[static_cast<int64_t>(l) * n + c] = acc0;
    out[(static_cast<int64_t>(L) + l) * n + c] = acc1;
  }
}

void to_rns(const int64_t* x, int32_t* out, int64_t i0, int64_t i1, int L, int64_t n,
            const int32_t* mod, const int32_t* r2) {
  for (int64_t it = i0; it < i1; ++it) {
    const int64_t row = it / n, c = it % n;
    const int64_t v = x[it];
    for (int l = 0; l < L; ++l) {
      const int32_t q = mod[2 * l];
      int32_t rv = canon(static_cast<int32_t>(v % q), q);
      out[(row * L + l) * n + c] = mont_mul(rv, r2[l], q, mod[2 * l + 1]);
    }
  }
}

void crt_digits(const int32_t* x, int32_t* out, int64_t i0, int64_t i1, int L, int64_t n,
                const int32_t* mod, const int32_t* garner) {
  int32_t v[256];
  for (int64_t it = i0; it < i1; ++it) {
    const int64_t row = it / n, c = it % n;
    const int32_t* xr = x + row * L * n + c;
    for (int k = 0; k < L; ++k) {
      const int32_t q = mod[2 * k], qinv = mod[2 * k + 1];
      const int32_t* g = garner + static_cast<int64_t>(k) * L;
      int32_t r = xr[k * n];
      for (int i = 0; i < k; ++i) r = sub_mod(r, mont_mul(v[i], g[i], q, qinv), q);
      v[k] = centre(mont_mul(r, g[k], q, qinv), q);
      out[(row * L + k) * n + c] = v[k];
    }
  }
}

}  // namespace fhetorch::cpu
