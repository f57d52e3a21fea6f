// Fast base conversion launcher (design: bconv_core.cuh; oracle: csrc/cpu/bconv.cpp).
#include "kernels.h"
#include "bconv_core.cuh"

namespace fhetorch::cuda {
namespace {

using namespace bconv_detail;

__global__ void __launch_bounds__(kThreads) bconv_kernel(Args a) {
  extern __shared__ int4 bconv_smem[];
  const Smem s = carve(reinterpret_cast<int32_t*>(bconv_smem), a.La);
  const Block b = block_of(a, blockIdx.x, blockIdx.y);
  load_step(a, b, s, threadIdx.x);
  __syncthreads();
  compute_step(a, b, s, threadIdx.x);
}

}  // namespace

cudaError_t bconv(const int32_t* x, int32_t* y, int64_t batch, int La, int Lb, int64_t n, const int32_t* mod_in,
                  const int32_t* mod_out, const int32_t* mat, cudaStream_t stream) {
  if (batch <= 0 || n <= 0 || Lb <= 0) return cudaSuccess;
  if (La <= 0 || La > 256) return cudaErrorInvalidValue;
  Args a{x, y, n, (n + kCoefs - 1) / kCoefs, La, Lb, mod_in, mod_out, mat,
         n % 4 == 0 && aligned16(x) && aligned16(y)};
  const unsigned gx = grid_for(batch * a.tiles, 1);
  const unsigned gy = static_cast<unsigned>((Lb + kOuts - 1) / kOuts);
  if (gx == 0 || gy > 65535) return cudaErrorInvalidConfiguration;
  const size_t smem = smem_bytes(La);
  if (smem > 48 * 1024) {
    cudaError_t err = cudaFuncSetAttribute(bconv_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                           static_cast<int>(smem));
    if (err != cudaSuccess) return err;
  }
  bconv_kernel<<<dim3(gx, gy), kThreads, smem, stream>>>(a);
  FT_LAUNCH_CHECK();
  return cudaSuccess;
}

}  // namespace fhetorch::cuda
