// Fused key-switching launchers (programs and pipelines: keyswitch_core.cuh; oracle: the
// CPU binding's compositions in csrc/bind/cpu.cpp).
#include "kernels.h"
#include "keyswitch_core.cuh"

namespace fhetorch::cuda {
namespace {

using namespace ks_detail;

constexpr int kStaticSmemWords = 12288;  // 48 KB: more needs dynamic shared memory

template <class P>
__device__ __forceinline__ void program_body(const typename P::Args& a, uint32_t* sm) {
  const typename P::Blk b = P::setup(a, blockIdx.x, sm);
  typename P::State st{};
  const int ns = P::num_steps(a, b);
  for (int s = 0; s < ns; ++s) {
    if (s > 0) __syncthreads();
    P::step(a, b, s, threadIdx.x, st);
  }
}

// One launch of a program: blocks in a 1-D grid, steps separated by __syncthreads().
template <class P>
__global__ void __launch_bounds__(P::THREADS, P::MIN_BLOCKS) program_kernel(const __grid_constant__ typename P::Args a) {
  __shared__ __align__(16) uint32_t sm[P::SMEM <= kStaticSmemWords ? P::SMEM : 1];
  program_body<P>(a, sm);
}

// The same with dynamic shared memory (P::SMEM words, above the static limit).
extern __shared__ __align__(16) uint32_t ft_dynamic_smem[];
template <class P>
__global__ void __launch_bounds__(P::THREADS, P::MIN_BLOCKS)
    program_kernel_dyn(const __grid_constant__ typename P::Args a) {
  program_body<P>(a, ft_dynamic_smem);
}

struct CudaExec {
  cudaStream_t stream;
  template <class P>
  cudaError_t run(const typename P::Args& a) {
    const int64_t blocks = P::blocks(a);
    if (blocks <= 0) return cudaSuccess;
    const unsigned grid = grid_for(blocks, 1);
    if (grid == 0) return cudaErrorInvalidConfiguration;
    if constexpr (P::SMEM > kStaticSmemWords) {
      // Raise the kernel's dynamic shared-memory limit once per device (outside graph capture:
      // the first call of an op is an eager one).
      const size_t dyn = sizeof(uint32_t) * P::SMEM;
      static bool raised[64] = {};
      int dev = 0;
      cudaError_t err = cudaGetDevice(&dev);
      if (err != cudaSuccess) return err;
      if (dev < 0 || dev >= 64 || !raised[dev]) {
        err = cudaFuncSetAttribute(program_kernel_dyn<P>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                   static_cast<int>(dyn));
        if (err != cudaSuccess) return err;
        if (dev >= 0 && dev < 64) raised[dev] = true;
      }
      program_kernel_dyn<P><<<grid, P::THREADS, dyn, stream>>>(a);
    } else {
      program_kernel<P><<<grid, P::THREADS, 0, stream>>>(a);
    }
    FT_LAUNCH_CHECK();
    return cudaSuccess;
  }
};

struct ModUpRun {
  CudaExec& ex;
  const MuArgs& a;
  bool fused;
  template <int LOG_N>
  cudaError_t operator()() const {
    return mod_up_pipeline<LOG_N>(ex, a, fused);
  }
};

struct SwitchRun {
  CudaExec& ex;
  const SwArgs& a;
  template <int LOG_N>
  cudaError_t operator()() const {
    return switch_pipeline<LOG_N>(ex, a);
  }
};

}  // namespace

cudaError_t mod_up(const int32_t* a, int32_t* out, int32_t* scratch, int L, int K, int log_n, const ModUpTables& tb,
                   const int* bounds, int beta, cudaStream_t stream) {
  MuArgs args;
  if (!mu_fill(args, a, scratch, out, L, K, tb, bounds, beta, nullptr, nullptr)) return cudaErrorInvalidValue;
  CudaExec ex{stream};
  return dispatch_log_n(log_n, ModUpRun{ex, args, false});
}

cudaError_t mod_up_keyswitch(const int32_t* a, int32_t* out, int32_t* scratch_t, int32_t* scratch_d, int L, int K,
                             int log_n, const ModUpTables& tb, const int* bounds, int beta, const KeyTables& key,
                             cudaStream_t stream) {
  MuArgs args;
  if (!mu_fill(args, a, scratch_t, scratch_d, L, K, tb, bounds, beta, &key, out)) return cudaErrorInvalidValue;
  CudaExec ex{stream};
  return dispatch_log_n(log_n, ModUpRun{ex, args, true});
}

cudaError_t switch_modulus(const int32_t* x, int32_t* out, int32_t* scratch_t, int32_t* scratch_y, int64_t B, int Ls,
                           int log_n, const int* drop, int D, const int* keep, int Ld, const SwitchTables& tb,
                           const int32_t* addend, int64_t Ba, cudaStream_t stream) {
  if (B <= 0) return cudaSuccess;
  SwArgs a;
  if (!sw_fill(a, x, out, scratch_t, scratch_y, B, Ls, drop, D, keep, Ld, tb, addend, Ba)) return cudaErrorInvalidValue;
  CudaExec ex{stream};
  return dispatch_log_n(log_n, SwitchRun{ex, a});
}

}  // namespace fhetorch::cuda
