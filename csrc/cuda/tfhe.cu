// TFHE kernels on CUDA (oracle: csrc/cpu/tfhe.cpp; step functions: csrc/tfhe.h). Element-wise
// ops: one thread per element. Polynomial ops: one thread block per ciphertext (a team with
// __syncthreads as its barrier); blind rotation launches one step per key bit over the whole
// batch (CMux-level batching: each GGSW of the key is read once per step, from L2, for every
// ciphertext). Scratch lives in global memory, from the caching allocator.
#include "kernels.h"
#include "util.cuh"

namespace fhetorch::cuda {
namespace {

constexpr int kBlock = 128;  // element-wise kernels
constexpr int kTeam = 256;   // threads per ciphertext

struct BlockTeam {
  int rank, size;
  FT_HD void sync() const {
#if defined(__CUDA_ARCH__)
    __syncthreads();
#endif
  }
};

__device__ BlockTeam block_team() { return BlockTeam{static_cast<int>(threadIdx.x), static_cast<int>(blockDim.x)}; }

__device__ int64_t global_index() { return static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; }

__global__ void __launch_bounds__(kBlock)
    sample_int_kernel(const uint32_t* key, uint64_t stream, int64_t* out, int64_t total, int64_t lo, uint64_t span) {
  const int64_t e = global_index();
  if (e < total) out[e] = tfhe_sample_int_one(key, stream, static_cast<uint64_t>(e), lo, span);
}

__global__ void __launch_bounds__(kBlock)
    modulus_switch_kernel(const int64_t* x, int64_t* out, int64_t total, TfheMod m, int bits) {
  const int64_t e = global_index();
  if (e < total) out[e] = static_cast<int64_t>(tfhe_round_pow2(x[e], m.q_full, bits));
}

__global__ void __launch_bounds__(kBlock)
    decompose_kernel(const int64_t* x, int64_t* out, int64_t total, TfheMod m, int base_log, int level) {
  const int64_t e = global_index();
  if (e >= total) return;
  const uint64_t v = tfhe_round_pow2(x[e], m.q_full, base_log * level);
  for (int j = 0; j < level; ++j) out[e * level + j] = tfhe_digit(v, base_log, level, j);
}

__global__ void __launch_bounds__(kTeam)
    external_product_kernel(TfheRing r, const int64_t* glwe, const int32_t* ggsw, int64_t* out, int32_t* scratch) {
  const int64_t b = blockIdx.x, k1n = static_cast<int64_t>(r.k1) << r.log_n;
  tfhe_team_external_product_op(block_team(), r, glwe + b * k1n, ggsw, scratch + b * tfhe_scratch_words(r),
                                out + b * k1n);
}

__global__ void __launch_bounds__(kTeam) blind_rotate_init_kernel(BlindRotateArgs g) {
  tfhe_team_blind_rotate_init(block_team(), g, blockIdx.x);
}

__global__ void __launch_bounds__(kTeam) cmux_step_kernel(BlindRotateArgs g, int i) {
  tfhe_team_cmux_step(block_team(), g, blockIdx.x, i);
}

cudaError_t elementwise_grid(int64_t total, unsigned* grid) {
  *grid = grid_for(total, kBlock);
  return *grid == 0 ? cudaErrorInvalidConfiguration : cudaSuccess;
}

}  // namespace

cudaError_t tfhe_sample_int(const uint32_t* key, uint64_t stream, int64_t* out, int64_t total, int64_t lo,
                            uint64_t span, const Stream& s) {
  if (total <= 0) return cudaSuccess;
  unsigned grid;
  if (elementwise_grid(total, &grid) != cudaSuccess) return cudaErrorInvalidConfiguration;
  sample_int_kernel<<<grid, kBlock, 0, s.stream>>>(key, stream, out, total, lo, span);
  return cudaGetLastError();
}

cudaError_t tfhe_modulus_switch(const int64_t* x, int64_t* out, int64_t total, const TfheMod& m, int bits,
                                const Stream& s) {
  if (total <= 0) return cudaSuccess;
  unsigned grid;
  if (elementwise_grid(total, &grid) != cudaSuccess) return cudaErrorInvalidConfiguration;
  modulus_switch_kernel<<<grid, kBlock, 0, s.stream>>>(x, out, total, m, bits);
  return cudaGetLastError();
}

cudaError_t tfhe_decompose(const int64_t* x, int64_t* out, int64_t total, const TfheMod& m, int base_log, int level,
                           const Stream& s) {
  if (total <= 0) return cudaSuccess;
  unsigned grid;
  if (elementwise_grid(total, &grid) != cudaSuccess) return cudaErrorInvalidConfiguration;
  decompose_kernel<<<grid, kBlock, 0, s.stream>>>(x, out, total, m, base_log, level);
  return cudaGetLastError();
}

cudaError_t tfhe_external_product(const TfheRing& r, const int64_t* glwe, const int32_t* ggsw, int64_t* out,
                                  int64_t B, const Stream& s) {
  if (B <= 0) return cudaSuccess;
  if (B > 0x7FFFFFFFLL) return cudaErrorInvalidConfiguration;
  int32_t* scratch = s.scratch(B * tfhe_scratch_words(r));
  external_product_kernel<<<static_cast<unsigned>(B), kTeam, 0, s.stream>>>(r, glwe, ggsw, out, scratch);
  return cudaGetLastError();
}

cudaError_t tfhe_blind_rotate(const BlindRotateArgs& g_in, const Stream& s) {
  if (g_in.B <= 0) return cudaSuccess;
  if (g_in.B > 0x7FFFFFFFLL) return cudaErrorInvalidConfiguration;
  BlindRotateArgs g = g_in;
  g.scratch = s.scratch(g.B * tfhe_scratch_words(g.r));
  const unsigned grid = static_cast<unsigned>(g.B);
  blind_rotate_init_kernel<<<grid, kTeam, 0, s.stream>>>(g);
  cudaError_t err = cudaGetLastError();
  for (int i = 0; i < g.n && err == cudaSuccess; ++i) {
    cmux_step_kernel<<<grid, kTeam, 0, s.stream>>>(g, i);
    err = cudaGetLastError();
  }
  return err;
}

}  // namespace fhetorch::cuda
