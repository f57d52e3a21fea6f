// Negacyclic NTT over rows of N coefficients (CPU oracle of csrc/cuda/ntt.cu).
// Forward: Cooley-Tukey, natural order in, bit-reversed order out; psi[l][k] holds
// psi^brev(k) * 2^32 mod q (psi a primitive 2N-th root). Inverse: Gentleman-Sande,
// bit-reversed in, natural out, with psi_inv[l][k] = psi^-brev(k) * 2^32 mod q, then a
// multiplication of every output by post[l] (N^-1 folded in by the caller).
#include "kernels.h"
#include "../arith.h"

namespace fhetorch::cpu {

void ntt_rows(int32_t* x, int64_t r0, int64_t r1, int L, int log_n, const int32_t* mod,
              const int32_t* psi, const int* psi_rows) {
  const int64_t n = int64_t(1) << log_n;
  for (int64_t r = r0; r < r1; ++r) {
    const int l = static_cast<int>(r % L);
    const int32_t q = mod[2 * l], qinv = mod[2 * l + 1];
    const int32_t* w = psi + (psi_rows ? psi_rows[l] : l) * n;
    int32_t* a = x + r * n;
    for (int64_t m = 1, t = n >> 1; m < n; m <<= 1, t >>= 1) {
      for (int64_t i = 0; i < m; ++i) {
        const int32_t s = w[m + i];
        int32_t* lo = a + 2 * i * t;
        int32_t* hi = lo + t;
        for (int64_t j = 0; j < t; ++j) {
          int32_t u = lo[j], v = mont_mul(hi[j], s, q, qinv);
          lo[j] = add_mod(u, v, q);
          hi[j] = sub_mod(u, v, q);
        }
      }
    }
  }
}

void intt_rows(int32_t* x, int64_t r0, int64_t r1, int L, int log_n, const int32_t* mod,
               const int32_t* psi_inv, const int32_t* post, const int* psi_rows) {
  const int64_t n = int64_t(1) << log_n;
  for (int64_t r = r0; r < r1; ++r) {
    const int l = static_cast<int>(r % L);
    const int32_t q = mod[2 * l], qinv = mod[2 * l + 1];
    const int32_t* w = psi_inv + (psi_rows ? psi_rows[l] : l) * n;
    int32_t* a = x + r * n;
    for (int64_t m = n >> 1, t = 1; m >= 1; m >>= 1, t <<= 1) {
      for (int64_t i = 0; i < m; ++i) {
        const int32_t s = w[m + i];
        int32_t* lo = a + 2 * i * t;
        int32_t* hi = lo + t;
        for (int64_t j = 0; j < t; ++j) {
          int32_t u = lo[j], v = hi[j];
          lo[j] = add_mod(u, v, q);
          hi[j] = mont_mul(u - v, s, q, qinv);
        }
      }
    }
    const int32_t c = post[l];
    for (int64_t j = 0; j < n; ++j) a[j] = mont_mul(a[j], c, q, qinv);
  }
}

}  // namespace fhetorch::cpu
