// Torch-free CUDA launchers on raw device pointers (the CUDA counterpart of
// csrc/cpu/kernels.h). Each enqueues its kernels on `stream` without synchronising and
// returns the first launch error (cudaSuccess otherwise). Semantics: csrc/bind/schema.cpp.
// All pointers are device pointers to contiguous data; counts may be zero.
#pragma once
#include <cstdint>
#include <cuda_runtime.h>

#include "../hoisted_mac.h"

namespace fhetorch::cuda {

// x, y: (rows, N = 2^log_n), row r uses limb l = r % L of mod and of psi (L, N), or, with
// psi_rows (host, L <= 256 entries), row psi_rows[l] of any (R, N) psi. y may equal x.
cudaError_t ntt(const int32_t* x, int32_t* y, int64_t rows, int L, int log_n, const int32_t* mod,
                const int32_t* psi, cudaStream_t stream, const int* psi_rows = nullptr);
cudaError_t intt(const int32_t* x, int32_t* y, int64_t rows, int L, int log_n, const int32_t* mod,
                 const int32_t* psi_inv, const int32_t* post, cudaStream_t stream, const int* psi_rows = nullptr);

// x: (batch, La, n) standard form -> y: (batch, Lb, n) Montgomery form. La <= 256.
cudaError_t bconv(const int32_t* x, int32_t* y, int64_t batch, int La, int Lb, int64_t n,
                  const int32_t* mod_in, const int32_t* mod_out, const int32_t* mat, cudaStream_t stream);

enum class Binary { Add, Sub, Mul };
// out[i] = a[i] (op) b[i % nb] for i < total, limb (i / n) % L.
cudaError_t binary(Binary op, const int32_t* a, const int32_t* b, int32_t* out, int64_t total, int64_t nb,
                   int64_t n, int L, const int32_t* mod, cudaStream_t stream);
cudaError_t neg(const int32_t* a, int32_t* out, int64_t total, int64_t n, int L, const int32_t* mod,
                cudaStream_t stream);
// out[i] = a[i]*ca[l] + b[i % nb]*cb[l]; b == nullptr (and cb): out[i] = a[i]*ca[l].
cudaError_t axpby(const int32_t* a, const int32_t* ca, const int32_t* b, const int32_t* cb, int32_t* out,
                  int64_t total, int64_t nb, int64_t n, int L, const int32_t* mod, cudaStream_t stream);
// a: (batch, 2, L, n), b: (batch or 1 if b_broadcast, 2, L, n) -> out (batch, 3, L, n).
cudaError_t tensor_product(const int32_t* a, const int32_t* b, int32_t* out, int64_t batch, bool b_broadcast,
                           int64_t n, int L, const int32_t* mod, cudaStream_t stream);

// x, out: (rows, 2^log_n) NTT-domain rows (bit-reversed order); out must not alias x.
cudaError_t automorphism(const int32_t* x, int32_t* out, int64_t rows, int log_n, uint32_t galois,
                         cudaStream_t stream);

// d: (beta, L, n); key_q: (digits, 2, Lq_key, n); key_p: (digits, 2, K, n); out (2, L, n).
cudaError_t keyswitch_inner(const int32_t* d, const int32_t* key_q, const int32_t* key_p, int32_t* out, int beta,
                            int L, int Lq, int K, int Lq_key, int q_start, int digit_start, int64_t n,
                            const int32_t* mod, cudaStream_t stream);

// hoisted_mac (csrc/hoisted_mac.h): args.out (giants, 2, Lext, n) written in full.
cudaError_t hoisted_mac(const MacArgs& args, cudaStream_t stream);

// ---- fused key switching (keyswitch.cu; semantics: schema.cpp's mod_up, mod_up_keyswitch,
// switch_modulus). N = 2^log_n with 10 <= log_n <= 17 (else cudaErrorInvalidValue); every
// device pointer 16-byte aligned; host arrays (bounds, drop, keep, table rows) travel in the
// launch parameters, so nothing is copied to the device and the launches can be graph-captured.
constexpr int kMaxDigits = 64;        // mod_up: beta <= 64
constexpr int kMaxSwitchRows = 256;   // switch_modulus: D, Ld <= 256 (Ls < 2^15)

struct ModUpTables {
  const int32_t* pre;          // (L,)
  const int32_t* mod_ext;      // (L + K, 2)
  const int32_t* psi_ext;      // (L + K, N), or (R, N) with psi_rows
  const int32_t* psi_inv_ext;  // (L + K, N), or (R, N) with psi_rows
  const int32_t* mats;         // (beta, L + K, alpha_max)
  int alpha_max;
  const int* psi_rows = nullptr;  // host, L + K <= kMaxSwitchRows entries: the table row of each ext limb
};
// a (L, n) -> out (beta, L + K, n); scratch: L * n words. bounds: beta + 1 values.
cudaError_t mod_up(const int32_t* a, int32_t* out, int32_t* scratch, int L, int K, int log_n, const ModUpTables& tb,
                   const int* bounds, int beta, cudaStream_t stream);

struct KeyTables {
  const int32_t* key_q;  // (digits, 2, Lq_key, n)
  const int32_t* key_p;  // (digits, 2, K, n)
  int Lq_key, q_start, digit_start;
  const int32_t* addend;  // (2, La, n) or null
  const int32_t* c_add;   // (La,)
  int La;
  const int32_t* b;  // tensor-product mode (a and b (2, L, n); addend null, c_add (L,)), or null
};
// a (L, n) -> out (2, L + K, n); scratch_t: L * n words, scratch_d: (beta * (L + K) - L) * n.
// Tensor-product mode: ModUp of a1 * b1, addend (a0 b0, a0 b1 + a1 b0) times c_add.
cudaError_t mod_up_keyswitch(const int32_t* a, int32_t* out, int32_t* scratch_t, int32_t* scratch_d, int L, int K,
                             int log_n, const ModUpTables& tb, const int* bounds, int beta, const KeyTables& key,
                             cudaStream_t stream);

struct SwitchTables {
  const int32_t* pre;           // (D,)
  const int32_t* mod_drop;      // (D, 2)
  const int32_t* psi_inv_drop;  // (D, n)
  const int32_t* mod_dst;       // (Ld, 2)
  const int32_t* psi_dst;       // (Ld, n)
  const int32_t* mat;           // (Ld, D)
  const int32_t* c_keep;        // (Ld,)
  const int32_t* c_sub;         // (Ld,)
  const int* psi_inv_drop_rows = nullptr;  // host, D entries: rows of psi_inv_drop (null: row k)
  const int* psi_dst_rows = nullptr;       // host, Ld entries: rows of psi_dst (null: row i)
};
// x (B, Ls, n) -> out (B, Ld, n); scratch_t: B * D * n words, scratch_y: B * Ld * n. addend:
// (Ba, Ld, n) added to the first Ba polynomials, or null.
cudaError_t switch_modulus(const int32_t* x, int32_t* out, int32_t* scratch_t, int32_t* scratch_y, int64_t B, int Ls,
                           int log_n, const int* drop, int D, const int* keep, int Ld, const SwitchTables& tb,
                           const int32_t* addend, int64_t Ba, cudaStream_t stream);

// x: (rows, n) int64 -> out (rows, L, n) Montgomery form.
cudaError_t to_rns(const int64_t* x, int32_t* out, int64_t rows, int L, int64_t n, const int32_t* mod,
                   const int32_t* r2, cudaStream_t stream);
// x: (rows, L, n) standard form -> centred mixed-radix digits (rows, L, n). L <= 256.
cudaError_t crt_digits(const int32_t* x, int32_t* out, int64_t rows, int L, int64_t n, const int32_t* mod,
                       const int32_t* garner, cudaStream_t stream);

// key: 8 words in device memory. Uniform: out (total = rows*L*n) residues, limb (e / n) % L.
cudaError_t sample_uniform(const uint32_t* key, uint64_t stream_id, int32_t* out, int64_t total, int L,
                           int64_t n, const int32_t* mod, cudaStream_t stream);
cudaError_t sample_ternary(const uint32_t* key, uint64_t stream_id, int64_t* out, int64_t total,
                           cudaStream_t stream);
cudaError_t sample_cbd(const uint32_t* key, uint64_t stream_id, int64_t* out, int64_t total,
                       cudaStream_t stream);

}  // namespace fhetorch::cuda
