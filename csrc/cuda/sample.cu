// ChaCha20 sampler launchers (bodies: sample_core.cuh; oracle: csrc/cpu/sample.cpp).
#include "kernels.h"
#include "sample_core.cuh"

namespace fhetorch::cuda {
namespace {

using namespace sample_detail;

constexpr int kBlock = 128;

__device__ __forceinline__ int64_t thread_index() {
  return static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
}

__global__ void __launch_bounds__(kBlock) uniform_kernel(UniformArgs g) { uniform_thread(g, thread_index()); }
__global__ void __launch_bounds__(kBlock) ternary_kernel(SmallArgs g) { ternary_thread(g, thread_index()); }
__global__ void __launch_bounds__(kBlock) cbd_kernel(SmallArgs g) { cbd_thread(g, thread_index()); }

}  // namespace

cudaError_t sample_uniform(const uint32_t* key, uint64_t stream_id, int32_t* out, int64_t total, int L, int64_t n,
                           const int32_t* mod, cudaStream_t stream) {
  if (total <= 0) return cudaSuccess;
  const unsigned grid = grid_for((total + 3) / 4, kBlock);
  if (grid == 0) return cudaErrorInvalidConfiguration;
  uniform_kernel<<<grid, kBlock, 0, stream>>>(UniformArgs{key, stream_id, out, total, make_limb_of(n, L), mod});
  FT_LAUNCH_CHECK();
  return cudaSuccess;
}

cudaError_t sample_ternary(const uint32_t* key, uint64_t stream_id, int64_t* out, int64_t total, cudaStream_t stream) {
  if (total <= 0) return cudaSuccess;
  const unsigned grid = grid_for((total + 15) / 16, kBlock);
  if (grid == 0) return cudaErrorInvalidConfiguration;
  ternary_kernel<<<grid, kBlock, 0, stream>>>(SmallArgs{key, stream_id, out, total});
  FT_LAUNCH_CHECK();
  return cudaSuccess;
}

cudaError_t sample_cbd(const uint32_t* key, uint64_t stream_id, int64_t* out, int64_t total, cudaStream_t stream) {
  if (total <= 0) return cudaSuccess;
  const unsigned grid = grid_for((total + 7) / 8, kBlock);
  if (grid == 0) return cudaErrorInvalidConfiguration;
  cbd_kernel<<<grid, kBlock, 0, stream>>>(SmallArgs{key, stream_id, out, total});
  FT_LAUNCH_CHECK();
  return cudaSuccess;
}

}  // namespace fhetorch::cuda
