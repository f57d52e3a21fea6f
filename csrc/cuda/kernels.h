// Torch-free CUDA implementations on raw device pointers, one function per op of
// csrc/bind/schema.cpp (where the semantics are stated): the CUDA counterpart of
// csrc/cpu/kernels.h, with a Stream context in place of the CPU's Threads. Each enqueues
// its kernels on the stream without synchronising and returns the first launch error
// (cudaSuccess otherwise). All pointers are device pointers to contiguous data; counts may
// be zero. Host arrays (digit bounds, dropped and kept rows, hoisted_mac's tables) travel in
// the launch parameters, so nothing is copied to the device and every launch can be
// captured in a CUDA graph.
#pragma once
#include <cstdint>
#include <functional>
#include <cuda_runtime.h>

#include "../elementwise.h"
#include "../hoisted_mac.h"
#include "../keyswitch.h"

namespace fhetorch::cuda {

// What an op may use from its caller (the binding): the stream to enqueue on, and `scratch`,
// which lends device memory of that many int32 words from the caching allocator (in stream
// order: valid for the work enqueued by this op).
struct Stream {
  cudaStream_t stream;
  std::function<int32_t*(int64_t words)> scratch;
};

// x, y: (rows, N = 2^log_n), row r with limb r % L of mod / psi (L, N). y may equal x.
cudaError_t ntt(const int32_t* x, int32_t* y, int64_t rows, int L, int log_n, const int32_t* mod, const int32_t* psi,
                const Stream& s);
cudaError_t intt(const int32_t* x, int32_t* y, int64_t rows, int L, int log_n, const int32_t* mod,
                 const int32_t* psi_inv, const int32_t* post, const Stream& s);

// x: (batch, La, n) standard form -> y: (batch, Lb, n) Montgomery form. La <= 256.
cudaError_t bconv(const int32_t* x, int32_t* y, int64_t batch, int La, int Lb, int64_t n, const int32_t* mod_in,
                  const int32_t* mod_out, const int32_t* mat, const Stream& s);

// out[i] = a[i] (op) b[i % nb] as csrc/cpu/kernels.h's elementwise.
cudaError_t elementwise(EwOp op, const int32_t* a, const int32_t* ca, const int32_t* b, const int32_t* cb,
                        int32_t* out, int64_t total, int64_t nb, int64_t n, int L, const int32_t* mod,
                        const Stream& s);
// a: (batch, 2, L, n), b: (batch or 1 if b_broadcast, 2, L, n) -> out (batch, 3, L, n).
cudaError_t tensor_product(const int32_t* a, const int32_t* b, int32_t* out, int64_t batch, bool b_broadcast,
                           int64_t n, int L, const int32_t* mod, const Stream& s);
// x, out: (rows, 2^log_n) NTT-domain rows (bit-reversed order); out must not alias x.
cudaError_t automorphism(const int32_t* x, int32_t* out, int64_t rows, int log_n, uint32_t galois, const Stream& s);

cudaError_t keyswitch_inner(const InnerArgs& g, const Stream& s);
cudaError_t hoisted_mac(const MacArgs& g, const Stream& s);

// The fused key-switching ops (keyswitch.cu): out (B, beta, L + K, n) for mod_up,
// (B, 2, L + K, n) for mod_up_keyswitch_inner, (B, Ld, n) for switch_modulus. Device
// pointers 16-byte aligned; 2^10 <= N <= 2^17 (else cudaErrorInvalidValue).
cudaError_t mod_up(const ModUpArgs& g, int32_t* out, const Stream& s);
cudaError_t mod_up_keyswitch_inner(const ModUpArgs& g, const KeyArgs& key, int32_t* out, const Stream& s);
cudaError_t switch_modulus(const SwitchArgs& g, int32_t* out, const Stream& s);

// x: (rows, n) int64 -> out (rows, L, n) Montgomery form.
cudaError_t to_rns(const int64_t* x, int32_t* out, int64_t rows, int L, int64_t n, const int32_t* mod,
                   const int32_t* r2, const Stream& s);
// x: (rows, L, n) standard form -> centred mixed-radix digits (rows, L, n). L <= 256.
cudaError_t crt_digits(const int32_t* x, int32_t* out, int64_t rows, int L, int64_t n, const int32_t* mod,
                       const int32_t* garner, const Stream& s);

// key: 8 words in device memory. Uniform: out (total = rows*L*n) residues, limb (e / n) % L.
cudaError_t sample_uniform(const uint32_t* key, uint64_t stream_id, int32_t* out, int64_t total, int L, int64_t n,
                           const int32_t* mod, const Stream& s);
cudaError_t sample_ternary(const uint32_t* key, uint64_t stream_id, int64_t* out, int64_t total, const Stream& s);
cudaError_t sample_cbd(const uint32_t* key, uint64_t stream_id, int64_t* out, int64_t total, const Stream& s);

}  // namespace fhetorch::cuda
