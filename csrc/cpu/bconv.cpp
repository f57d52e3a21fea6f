// Base conversion, fast (approximate) form: y_i = sum_j centre(x_j) * mat[i][j] * 2^-32
// mod p_i. With x_j = [a * (Q/q_j)^-1]_{q_j} (standard form) and mat[i][j] =
// (Q/q_j) * 2^64 mod p_i (centred), y is a + u*Q for a small u, in Montgomery form.
#include "kernels.h"

namespace fhetorch::cpu {

void bconv_coefficient(const int32_t* x, int32_t* y, int La, int Lb, int64_t n, const int32_t* mod_in,
                       const int32_t* mod_out, const int32_t* mat, int64_t mat_stride) {
  int32_t t[256];
  for (int j = 0; j < La; ++j) t[j] = centre(x[j * n], mod_in[2 * j]);
  for (int i = 0; i < Lb; ++i) {
    const int32_t p = mod_out[2 * i], pinv = mod_out[2 * i + 1];
    const int32_t* row = mat + i * mat_stride;
    int64_t acc = 0;
    for (int j = 0; j < La; ++j) {
      acc += static_cast<int64_t>(t[j]) * row[j];
      if ((j & 3) == 3) acc = fold_acc(acc, p);
    }
    y[i * n] = canon(smr(fold_acc(acc, p), p, pinv), p);
  }
}

void bconv(const int32_t* x, int32_t* y, int64_t batch, int La, int Lb, int64_t n, const int32_t* mod_in,
           const int32_t* mod_out, const int32_t* mat, const Threads& th) {
  th.par(batch * n, 256, [&](int64_t i0, int64_t i1) {
    for (int64_t it = i0; it < i1; ++it) {
      const int64_t b = it / n, c = it % n;
      bconv_coefficient(x + b * La * n + c, y + b * Lb * n + c, La, Lb, n, mod_in, mod_out, mat, La);
    }
  });
}

}  // namespace fhetorch::cpu
