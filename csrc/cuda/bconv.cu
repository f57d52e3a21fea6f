// Fast base conversion launcher (design: bconv_core.cuh; oracle: csrc/cpu/bconv.cpp): the
// register path for up to 16 input limbs (key-switching digits, special primes), the
// shared-memory path otherwise.
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

template <int LA4>
__global__ void __launch_bounds__(kSmallThreads) bconv_small_kernel(SmallArgs a) {
  __shared__ __align__(16) SmallSmem s;
  const int o0 = blockIdx.y * a.outs;
  const int nout = a.Lb - o0 < a.outs ? a.Lb - o0 : a.outs;
  small_load_step(a, o0, nout, s, threadIdx.x);
  __syncthreads();
  small_compute_step<LA4>(a, blockIdx.x, o0, nout, s, threadIdx.x);
}

cudaError_t bconv_small(const int32_t* x, int32_t* y, int64_t batch, int La, int Lb, int64_t n,
                        const int32_t* mod_in, const int32_t* mod_out, const int32_t* mat, cudaStream_t stream) {
  const int64_t tiles = (n + kSmallCoefs - 1) / kSmallCoefs;
  const unsigned gx = grid_for(batch * tiles, 1);
  if (gx == 0) return cudaErrorInvalidConfiguration;
  // Output chunks: enough blocks to fill the GPU (about 132 SMs x 1024 threads), but at
  // least 4 outputs per chunk (each chunk reloads the inputs) and at most kSmallOuts.
  const int64_t base = batch * tiles * kSmallThreads;
  int64_t chunks = (135168 + base - 1) / base;
  const int64_t lo = (Lb + kSmallOuts - 1) / kSmallOuts, hi = (Lb + 3) / 4;
  chunks = chunks < lo ? lo : chunks > hi ? hi : chunks;
  if (chunks < 1) chunks = 1;
  const int outs = static_cast<int>((Lb + chunks - 1) / chunks);
  const unsigned gy = static_cast<unsigned>((Lb + outs - 1) / outs);
  if (gy > 65535) return cudaErrorInvalidConfiguration;
  SmallArgs a{x, y, n, tiles, La, Lb, outs, mod_in, mod_out, mat};
  const dim3 grid(gx, gy);
  switch ((La + 3) / 4) {
    case 1: bconv_small_kernel<1><<<grid, kSmallThreads, 0, stream>>>(a); break;
    case 2: bconv_small_kernel<2><<<grid, kSmallThreads, 0, stream>>>(a); break;
    case 3: bconv_small_kernel<3><<<grid, kSmallThreads, 0, stream>>>(a); break;
    case 4: bconv_small_kernel<4><<<grid, kSmallThreads, 0, stream>>>(a); break;
    default: return cudaErrorInvalidValue;
  }
  FT_LAUNCH_CHECK();
  return cudaSuccess;
}

}  // namespace

cudaError_t bconv(const int32_t* x, int32_t* y, int64_t batch, int La, int Lb, int64_t n, const int32_t* mod_in,
                  const int32_t* mod_out, const int32_t* mat, cudaStream_t stream) {
  if (batch <= 0 || n <= 0 || Lb <= 0) return cudaSuccess;
  if (La <= 0 || La > 256) return cudaErrorInvalidValue;
  if (La <= 16 && n % 4 == 0 && aligned16(x) && aligned16(y))
    return bconv_small(x, y, batch, La, Lb, n, mod_in, mod_out, mat, stream);
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
