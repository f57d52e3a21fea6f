// Element-wise ops on the CPU: loops over the element functions of csrc/elementwise.h and
// csrc/hoisted_mac.h, which the CUDA kernels (csrc/cuda/elementwise.cu) call too.
#include <algorithm>

#include "kernels.h"

namespace fhetorch::cpu {
namespace {

// Row by row (a row is n coefficients of one limb), so the limb's constants and the offset into
// b are computed once per row, not by two 64-bit divisions per element.
template <EwOp OP>
void ew_range(const int32_t* a, const int32_t* ca, const int32_t* b, const int32_t* cb, int32_t* out, int64_t i0,
              int64_t i1, int64_t nb, int64_t n, int L, const int32_t* mod) {
  for (int64_t i = i0; i < i1;) {
    const int64_t row_end = std::min(i1, (i / n + 1) * n);
    const int l = static_cast<int>((i / n) % L);
    const int32_t q = mod[2 * l], qinv = mod[2 * l + 1], c_a = ca ? ca[l] : 0, c_b = cb ? cb[l] : 0;
    if (!ew_uses_b<OP>()) {
      for (; i < row_end; ++i) out[i] = ew_apply<OP>(a[i], 0, q, qinv, c_a, c_b);
    } else if (nb % n == 0) {  // b is whole rows: contiguous within this row
      const int32_t* br = b + i % nb;  // row_end - i <= n <= nb elements from here
      for (int64_t j = 0; i < row_end; ++i, ++j) out[i] = ew_apply<OP>(a[i], br[j], q, qinv, c_a, c_b);
    } else {
      for (; i < row_end; ++i) out[i] = ew_apply<OP>(a[i], b[i % nb], q, qinv, c_a, c_b);
    }
  }
}

}  // namespace

void elementwise(EwOp op, const int32_t* a, const int32_t* ca, const int32_t* b, const int32_t* cb, int32_t* out,
                 int64_t total, int64_t nb, int64_t n, int L, const int32_t* mod, const Threads& th) {
  th.par(total, 4096, [&](int64_t i0, int64_t i1) {
    switch (op) {
      case EwOp::Add: return ew_range<EwOp::Add>(a, ca, b, cb, out, i0, i1, nb, n, L, mod);
      case EwOp::Sub: return ew_range<EwOp::Sub>(a, ca, b, cb, out, i0, i1, nb, n, L, mod);
      case EwOp::Mul: return ew_range<EwOp::Mul>(a, ca, b, cb, out, i0, i1, nb, n, L, mod);
      case EwOp::Neg: return ew_range<EwOp::Neg>(a, ca, b, cb, out, i0, i1, nb, n, L, mod);
      case EwOp::Axpby: return ew_range<EwOp::Axpby>(a, ca, b, cb, out, i0, i1, nb, n, L, mod);
      case EwOp::MulConst: return ew_range<EwOp::MulConst>(a, ca, b, cb, out, i0, i1, nb, n, L, mod);
    }
  });
}

// Row by row, term by term over the row's part of the range (out is the accumulator).
void lincomb(const LincombArgs& g, const Threads& th) {
  th.par(g.total, 4096, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1;) {
      const int64_t row = i / g.n, row_end = std::min(i1, (row + 1) * g.n);
      const int l = static_cast<int>(row % g.L);
      const int32_t q = g.mod[2 * l], qinv = g.mod[2 * l + 1];
      if (g.acc) {
        if (g.acc != g.out) std::copy(g.acc + i, g.acc + row_end, g.out + i);
      } else {
        std::fill(g.out + i, g.out + row_end, lincomb_start(g, row, l));
      }
      for (int t = 0; t < g.terms; ++t) {
        const int32_t* x = g.x[t];
        const int32_t c = g.consts[t * g.L + l];
        for (int64_t j = i; j < row_end; ++j) g.out[j] = lincomb_term(g.out[j], x[j], c, q, qinv);
      }
      i = row_end;
    }
  });
}

void tensor_product(const TensorProductArgs& g, const Threads& th) {
  const int64_t plane = static_cast<int64_t>(g.L) * g.n;
  th.par(g.batch * plane, 4096, [&](int64_t i0, int64_t i1) {
    for (int64_t it = i0; it < i1; ++it) {
      const int64_t k = it / plane, e = it % plane;
      const int l = static_cast<int>(e / g.n);
      int32_t* ok = g.out + k * 3 * plane + e;
      tensor_product_sum_element(g, k, e, plane, g.mod[2 * l], g.mod[2 * l + 1], ok[0], ok[plane], ok[2 * plane]);
    }
  });
}

void automorphism(const int32_t* x, int32_t* out, int64_t rows, int log_n, uint32_t galois, const Threads& th) {
  const int64_t n = int64_t(1) << log_n;
  th.par(rows, 1, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r)
      for (uint32_t k = 0; k < n; ++k) out[r * n + k] = x[r * n + automorphism_source(k, galois, log_n)];
  });
}

void keyswitch_inner(const InnerArgs& g, const Threads& th) {
  th.par(static_cast<int64_t>(g.Lext) * g.n, 1024, [&](int64_t i0, int64_t i1) {
    for (int64_t it = i0; it < i1; ++it) keyswitch_inner_element(g, static_cast<int>(it / g.n), it % g.n);
  });
}

void hoisted_mac(const MacArgs& g, const Threads& th) {
  th.par(static_cast<int64_t>(g.Lext) * g.n, 1024, [&](int64_t i0, int64_t i1) {
    for (int64_t it = i0; it < i1; ++it) hoisted_mac_element(g, it);
  });
}

void keyswitch_inner_sum(const InnerSumArgs& g, const Threads& th) {
  th.par(static_cast<int64_t>(g.Lext) * g.n, 1024, [&](int64_t i0, int64_t i1) {
    for (int64_t it = i0; it < i1; ++it) keyswitch_inner_sum_element(g, it);
  });
}

void to_rns(const int64_t* x, int32_t* out, int64_t rows, int L, int64_t n, const int32_t* mod, const int32_t* r2,
            const Threads& th) {
  th.par(rows * n, 1024, [&](int64_t i0, int64_t i1) {
    for (int64_t it = i0; it < i1; ++it) {
      const int64_t row = it / n, c = it % n;
      for (int l = 0; l < L; ++l) out[(row * L + l) * n + c] = to_mont(x[it], mod[2 * l], mod[2 * l + 1], r2[l]);
    }
  });
}

void crt_digits(const int32_t* x, int32_t* out, int64_t rows, int L, int64_t n, const int32_t* mod,
                const int32_t* garner, const Threads& th) {
  th.par(rows * n, 256, [&](int64_t i0, int64_t i1) {
    for (int64_t it = i0; it < i1; ++it) {
      const int64_t off = (it / n) * L * n + it % n;
      crt_digits_element(x + off, out + off, n, L, mod, garner);
    }
  });
}

}  // namespace fhetorch::cpu
