// Negacyclic NTT over rows of N coefficients (CPU oracle of csrc/cuda/ntt.cu).
// Forward: Cooley-Tukey, natural order in, bit-reversed order out; psi[l][k] holds
// psi^brev(k) * 2^32 mod q (psi a primitive 2N-th root). Inverse: Gentleman-Sande,
// bit-reversed in, natural out, with psi_inv[l][k] = psi^-brev(k) * 2^32 mod q, then a
// multiplication of every output by post[l] (N^-1 folded in by the caller). Limb l reads
// twiddle row table_row(psi_rows, l) (csrc/table_rows.h).
#include <algorithm>

#include "kernels.h"

namespace fhetorch::cpu {
namespace {

// One stage: m groups of 2t coefficients, group i with twiddle w[m + i].
template <bool INV>
void stage(int32_t* a, const int32_t* w, int64_t m, int64_t t, int32_t q, int32_t qinv) {
  for (int64_t i = 0; i < m; ++i) {
    const int32_t s = w[m + i];
    int32_t* lo = a + 2 * i * t;
    int32_t* hi = lo + t;
    for (int64_t j = 0; j < t; ++j) {
      const int32_t u = lo[j], v = hi[j];
      if (INV) {
        lo[j] = add_mod(u, v, q);
        hi[j] = mont_mul(u - v, s, q, qinv);
      } else {
        const int32_t sv = mont_mul(v, s, q, qinv);
        lo[j] = add_mod(u, sv, q);
        hi[j] = sub_mod(u, sv, q);
      }
    }
  }
}

template <bool INV>
void transform_rows(int32_t* x, int64_t r0, int64_t r1, int L, int log_n, const int32_t* mod, const int32_t* tw,
                    const int32_t* post, const TableRows& tw_rows) {
  const int64_t n = int64_t(1) << log_n;
  for (int64_t r = r0; r < r1; ++r) {
    const int l = static_cast<int>(r % L);
    const int32_t q = mod[2 * l], qinv = mod[2 * l + 1];
    const int32_t* w = tw + table_row(tw_rows, l) * n;
    int32_t* a = x + r * n;
    if (!INV) {
      for (int64_t m = 1, t = n >> 1; m < n; m <<= 1, t >>= 1) stage<false>(a, w, m, t, q, qinv);
      continue;
    }
    for (int64_t m = n >> 1, t = 1; m >= 1; m >>= 1, t <<= 1) stage<true>(a, w, m, t, q, qinv);
    const int32_t c = post[l];
    for (int64_t j = 0; j < n; ++j) a[j] = mont_mul(a[j], c, q, qinv);
  }
}

template <bool INV>
void transform(const int32_t* x, int32_t* y, int64_t rows, int L, int log_n, const int32_t* mod, const int32_t* tw,
               const int32_t* post, const TableRows& tw_rows, const Threads& th) {
  const int64_t n = int64_t(1) << log_n;
  th.par(rows, 1, [&](int64_t r0, int64_t r1) {
    if (x != y) std::copy(x + r0 * n, x + r1 * n, y + r0 * n);
    transform_rows<INV>(y, r0, r1, L, log_n, mod, tw, post, tw_rows);
  });
}

}  // namespace

void ntt_rows(int32_t* x, int64_t r0, int64_t r1, int L, int log_n, const int32_t* mod, const int32_t* psi,
              const TableRows& psi_rows) {
  transform_rows<false>(x, r0, r1, L, log_n, mod, psi, nullptr, psi_rows);
}

void intt_rows(int32_t* x, int64_t r0, int64_t r1, int L, int log_n, const int32_t* mod, const int32_t* psi_inv,
               const int32_t* post, const TableRows& psi_rows) {
  transform_rows<true>(x, r0, r1, L, log_n, mod, psi_inv, post, psi_rows);
}

void ntt(const int32_t* x, int32_t* y, int64_t rows, int L, int log_n, const int32_t* mod, const int32_t* psi,
         const TableRows& psi_rows, const Threads& th) {
  transform<false>(x, y, rows, L, log_n, mod, psi, nullptr, psi_rows, th);
}

void intt(const int32_t* x, int32_t* y, int64_t rows, int L, int log_n, const int32_t* mod, const int32_t* psi_inv,
          const int32_t* post, const TableRows& psi_rows, const Threads& th) {
  transform<true>(x, y, rows, L, log_n, mod, psi_inv, post, psi_rows, th);
}

}  // namespace fhetorch::cpu
