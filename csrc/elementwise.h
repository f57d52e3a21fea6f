// Element functions of the element-wise ops (add, sub, mul, neg, axpby, mul_const, lincomb,
// tensor_product, automorphism, keyswitch_inner, to_rns, crt_digits), shared by the CPU
// loops (csrc/cpu/elementwise.cpp) and the CUDA kernels (csrc/cuda/elementwise.cu): the one
// definition of each op's arithmetic. Torch-free; semantics in csrc/bind/schema.cpp.
#pragma once
#include <cstdint>

#include "arith.h"

namespace fhetorch {

enum class EwOp { Add, Sub, Mul, Neg, Axpby, MulConst };

// One element of a (op) b, or a * ca + b * cb (Axpby), a * ca (MulConst); canonical inputs.
template <EwOp OP>
FT_HD int32_t ew_apply(int32_t x, int32_t y, int32_t q, int32_t qinv, int32_t ca, int32_t cb) {
  switch (OP) {
    case EwOp::Add: return add_mod(x, y, q);
    case EwOp::Sub: return sub_mod(x, y, q);
    case EwOp::Mul: return mont_mul(x, y, q, qinv);
    case EwOp::Neg: return neg_mod(x, q);
    case EwOp::Axpby: return add_mod(mont_mul(x, ca, q, qinv), mont_mul(y, cb, q, qinv), q);
    case EwOp::MulConst: return mont_mul(x, ca, q, qinv);
  }
  return 0;
}

template <EwOp OP>
FT_HD constexpr bool ew_uses_b() { return OP == EwOp::Add || OP == EwOp::Sub || OP == EwOp::Mul || OP == EwOp::Axpby; }

// ---- lincomb: out = scalar (on polynomial 0 of each group of K) + sum_t x_t * c_t -----------

constexpr int kLincombTerms = 16;  // terms per pass; the op runs ceil(T / 16) passes

// One pass over at most kLincombTerms terms; passed by value to the kernel (__grid_constant__),
// so the pointer table needs no device copy and the launch can be graph-captured.
struct LincombArgs {
  const int32_t* x[kLincombTerms];  // (total,) each, same shape
  const int32_t* consts;            // (terms, L): this pass's rows
  const int32_t* scalar;            // (L,) or null: added to polynomial 0 of each group of K
  const int32_t* acc;               // the previous passes' sum (total,), or null (the first pass)
  int32_t* out;                     // (total,); may equal acc
  const int32_t* mod;
  int64_t total, n;
  int L, K, terms;
};

// acc + x * c, canonical: each product is reduced and added exactly, so the sum of canonical
// products does not depend on the order of the terms.
FT_HD int32_t lincomb_term(int32_t acc, int32_t x, int32_t c, int32_t q, int32_t qinv) {
  return add_mod(acc, mont_mul(x, c, q, qinv), q);
}

// The value the first pass starts from on row `row` (limb l): the scalar on polynomial 0 of
// each group of K polynomials, 0 elsewhere.
FT_HD int32_t lincomb_start(const LincombArgs& g, int64_t row, int l) {
  return g.scalar && (row / g.L) % g.K == 0 ? g.scalar[l] : 0;
}

// The tensor product of (a0, a1) and (b0, b1) at one coefficient: (a0 b0, a0 b1 + a1 b0, a1 b1).
FT_HD void tensor_product_element(int32_t a0, int32_t a1, int32_t b0, int32_t b1, int32_t q, int32_t qinv,
                                  int32_t& o0, int32_t& o1, int32_t& o2) {
  o0 = mont_mul(a0, b0, q, qinv);
  o1 = add_mod(mont_mul(a0, b1, q, qinv), mont_mul(a1, b0, q, qinv), q);
  o2 = mont_mul(a1, b1, q, qinv);
}

// ---- tensor_product: out = sum_t a_t (x) b_t, in passes of kTensorPairs pairs -------------------
//
// A spine of a polynomial (lazy relinearisation) sums several tensor products before one key
// switch: one pass reads every operand once and writes the sum once, where a product per launch
// and a lincomb wrote and read every product again.
constexpr int kTensorPairs = 8;

// One pass; passed by value to the kernel (__grid_constant__: no device copy, graph-capturable).
struct TensorProductArgs {
  const int32_t* a[kTensorPairs];  // (batch, 2, L, n) each
  const int32_t* b[kTensorPairs];  // (batch, 2, L, n), or (2, L, n) where bit t of b_shared is set
  uint32_t b_shared;
  const int32_t* acc;  // the previous passes' sum (batch, 3, L, n), or null (the first pass)
  int32_t* out;        // (batch, 3, L, n); may equal acc
  const int32_t* mod;
  int64_t batch, n;
  int L, pairs;
};

// Element e of ciphertext k's planes (plane = L n), limb q: acc + the pass's products. Each
// product is reduced and added exactly, so the sum does not depend on the order of the pairs.
FT_HD void tensor_product_sum_element(const TensorProductArgs& g, int64_t k, int64_t e, int64_t plane, int32_t q,
                                      int32_t qinv, int32_t& o0, int32_t& o1, int32_t& o2) {
  const int64_t o = k * 3 * plane + e;
  o0 = g.acc ? g.acc[o] : 0;
  o1 = g.acc ? g.acc[o + plane] : 0;
  o2 = g.acc ? g.acc[o + 2 * plane] : 0;
  for (int t = 0; t < g.pairs; ++t) {
    const int32_t* a = g.a[t] + k * 2 * plane + e;
    const int32_t* b = g.b[t] + ((g.b_shared >> t) & 1u ? 0 : k * 2 * plane) + e;
    int32_t d0, d1, d2;
    tensor_product_element(a[0], a[plane], b[0], b[plane], q, qinv, d0, d1, d2);
    o0 = add_mod(o0, d0, q);
    o1 = add_mod(o1, d1, q);
    o2 = add_mod(o2, d2, q);
  }
}

// Signed v -> v * 2^32 mod q, canonical (to_rns; r2 = 2^64 mod q in Montgomery form): with
// v = h * 2^32 + lo, h * 2^32 = smr(h * r2) and lo < 2^32 needs one 32-bit remainder.
FT_HD int32_t to_mont(int64_t v, int32_t q, int32_t qinv, int32_t r2) {
  const int32_t h = static_cast<int32_t>(v >> 32);
  const uint32_t lo = static_cast<uint32_t>(v);
  const uint32_t uq = static_cast<uint32_t>(q);
  const uint32_t a = static_cast<uint32_t>(canon(smr(static_cast<int64_t>(h) * r2, q, qinv), q));
  uint32_t s = a + lo % uq;  // < 2q < 2^32
  if (s >= uq) s -= uq;
  return mont_mul(static_cast<int32_t>(s), r2, q, qinv);
}

constexpr int kMaxCrtLimbs = 256;

// Mixed-radix (Garner) digits of one coefficient: x[k * n] (standard form, limb k) -> out[k *
// n] = v_k centred, for k < L <= kMaxCrtLimbs; garner (L, L) as schema.cpp's crt_digits.
FT_HD void crt_digits_element(const int32_t* x, int32_t* out, int64_t n, int L, const int32_t* mod,
                              const int32_t* garner) {
  int32_t v[kMaxCrtLimbs];
  for (int k = 0; k < L; ++k) {
    const int32_t q = mod[2 * k], qinv = mod[2 * k + 1];
    const int32_t* g = garner + static_cast<int64_t>(k) * L;
    int32_t r = x[k * n];
    for (int i = 0; i < k; ++i) r = sub_mod(r, mont_mul(v[i], g[i], q, qinv), q);
    v[k] = centre(mont_mul(r, g[k], q, qinv), q);
    out[k * n] = v[k];
  }
}

// ---- keyswitch_inner: out[b] = sum_j d[b][j] * key_(digit_start + j) over ext limbs ----

struct InnerArgs {
  const int32_t* d;      // (B, beta, Lext, n)
  const int32_t* key_q;  // (digits, 2, Lq_key, n): limbs [q_start, q_start + Lq) are d's first Lq
  const int32_t* key_p;  // (digits, 2, K, n): d's last K limbs
  int32_t* out;          // (B, 2, Lext, n)
  const int32_t* mod;    // (Lext, 2)
  int64_t B, n;
  int beta, Lext, Lq, K, Lq_key, q_start, digit_start;
};

// Both outputs at ext limb l, coefficient x, for every ciphertext of the batch: the key
// values are re-read per ciphertext by the same thread, from cache.
FT_HD void keyswitch_inner_element(const InnerArgs& g, int l, int64_t x) {
  const int32_t q = g.mod[2 * l], qinv = g.mod[2 * l + 1];
  const bool in_q = l < g.Lq;
  const int64_t rows = in_q ? g.Lq_key : g.K;  // rows of one key component
  const int32_t* k0 = in_q ? g.key_q + (2 * static_cast<int64_t>(g.digit_start) * rows + g.q_start + l) * g.n + x
                           : g.key_p + (2 * static_cast<int64_t>(g.digit_start) * rows + l - g.Lq) * g.n + x;
  const int64_t plane = static_cast<int64_t>(g.Lext) * g.n;
  for (int64_t b = 0; b < g.B; ++b) {
    const int32_t* dv = g.d + b * g.beta * plane + l * g.n + x;
    int32_t acc0 = 0, acc1 = 0;
    for (int j = 0; j < g.beta; ++j) {
      const int32_t v = dv[j * plane];
      const int32_t* kj = k0 + 2 * j * rows * g.n;
      acc0 = add_mod(acc0, mont_mul(v, kj[0], q, qinv), q);
      acc1 = add_mod(acc1, mont_mul(v, kj[rows * g.n], q, qinv), q);
    }
    int32_t* o = g.out + 2 * b * plane + l * g.n + x;
    o[0] = acc0;
    o[plane] = acc1;
  }
}

}  // namespace fhetorch
