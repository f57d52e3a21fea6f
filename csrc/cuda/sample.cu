// ChaCha20 sampler launchers (bodies: sample_core.cuh; oracle: csrc/cpu/sample.cpp).
#include "kernels.h"
#include "sample_core.cuh"

namespace fhetorch::cuda {
namespace {

using namespace sample_detail;

constexpr int kBlock = 128;

template <class A, void (*BODY)(const A&, int64_t)>
__global__ void __launch_bounds__(kBlock) sample_kernel(A g) {
  BODY(g, static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x);
}

// One thread per `per_thread` consecutive elements.
template <class A, void (*BODY)(const A&, int64_t)>
cudaError_t launch(const A& g, int64_t total, int per_thread, cudaStream_t stream) {
  if (total <= 0) return cudaSuccess;
  const unsigned grid = grid_for((total + per_thread - 1) / per_thread, kBlock);
  if (grid == 0) return cudaErrorInvalidConfiguration;
  sample_kernel<A, BODY><<<grid, kBlock, 0, stream>>>(g);
  return cudaGetLastError();
}

}  // namespace

cudaError_t sample_uniform(const uint32_t* key, uint64_t stream_id, int32_t* out, int64_t total, int L, int64_t n,
                           const int32_t* mod, const Stream& s) {
  return launch<UniformArgs, uniform_thread>(UniformArgs{key, stream_id, out, total, make_limb_of(n, L), mod}, total,
                                             4, s.stream);
}

cudaError_t sample_ternary(const uint32_t* key, uint64_t stream_id, int64_t* out, int64_t total, const Stream& s) {
  return launch<SmallArgs, ternary_thread>(SmallArgs{key, stream_id, out, total}, total, 16, s.stream);
}

cudaError_t sample_cbd(const uint32_t* key, uint64_t stream_id, int64_t* out, int64_t total, const Stream& s) {
  return launch<SmallArgs, cbd_thread>(SmallArgs{key, stream_id, out, total}, total, 8, s.stream);
}

}  // namespace fhetorch::cuda
