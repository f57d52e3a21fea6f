// Pieces of the fused key-switching ops that the other CPU kernels lack (the bindings
// compose them with ntt_rows / intt_rows / bconv / keyswitch_inner; CPU oracle of
// csrc/cuda/keyswitch.cu). Same arithmetic as csrc/cpu/bconv.cpp and elementwise.cpp.
#include "kernels.h"
#include "../arith.h"

namespace fhetorch::cpu {

void mod_up_bconv(const int32_t* t, int32_t* out, int64_t i0, int64_t i1, const int* lo, int Lext, int64_t n,
                  const int32_t* mod_ext, const int32_t* mats, int alpha_max) {
  int32_t v[256];
  for (int64_t it = i0; it < i1; ++it) {
    const int j = static_cast<int>(it / n);
    const int64_t c = it % n;
    const int a0 = lo[j], cnt = lo[j + 1] - lo[j];
    for (int k = 0; k < cnt; ++k) v[k] = centre(t[(a0 + k) * n + c], mod_ext[2 * (a0 + k)]);
    int32_t* oj = out + static_cast<int64_t>(j) * Lext * n + c;
    const int32_t* mj = mats + static_cast<int64_t>(j) * Lext * alpha_max;
    for (int i = 0; i < Lext; ++i) {
      if (i >= a0 && i < a0 + cnt) continue;
      const int32_t p = mod_ext[2 * i], pinv = mod_ext[2 * i + 1];
      const int32_t* row = mj + static_cast<int64_t>(i) * alpha_max;
      int64_t acc = 0;
      for (int k = 0; k < cnt; ++k) {
        acc += static_cast<int64_t>(v[k]) * row[k];
        if ((k & 3) == 3) acc = fold_acc(acc, p);
      }
      oj[i * n] = canon(smr(fold_acc(acc, p), p, pinv), p);
    }
  }
}

void switch_combine(const int32_t* x, const int32_t* y, const int32_t* add, int32_t* out, int64_t i0, int64_t i1,
                    const int* keep, int64_t n, const int32_t* mod_dst, const int32_t* c_keep,
                    const int32_t* c_sub) {
  for (int64_t e = i0; e < i1; ++e) {
    const int i = static_cast<int>(e / n);
    const int64_t c = e % n;
    const int32_t q = mod_dst[2 * i], qinv = mod_dst[2 * i + 1];
    int32_t r = mont_mul(y[e], c_sub[i], q, qinv);
    if (keep[i] >= 0) r = add_mod(mont_mul(x[keep[i] * n + c], c_keep[i], q, qinv), r, q);
    if (add) r = add_mod(r, add[e], q);
    out[e] = r;
  }
}

void add_scaled(int32_t* out, const int32_t* add, int64_t i0, int64_t i1, int64_t n, const int32_t* mod,
                const int32_t* c) {
  for (int64_t e = i0; e < i1; ++e) {
    const int l = static_cast<int>(e / n);
    const int32_t q = mod[2 * l];
    out[e] = add_mod(out[e], mont_mul(add[e], c[l], q, mod[2 * l + 1]), q);
  }
}

}  // namespace fhetorch::cpu
