// Block programs: how the multi-phase CUDA kernels (NTT phases, base conversion, the fused
// key-switching pipelines) are written, launched on the GPU, and emulated on the host.
//
// A program is a struct P with
//   Args       the launch parameters (passed by value, __grid_constant__: they hold the small
//              host tables -- digit bounds, row lists, table row maps -- so launches need no
//              device copy and can be graph-captured; at most kMaxParamBytes);
//   Blk        per-block state computed once by P::setup(args, block, smem);
//   State      per-thread registers that live across steps;
//   THREADS, MIN_BLOCKS (for __launch_bounds__), SMEM (32-bit words of static shared
//   memory), P::blocks(args) (a 1-D grid);
//   num_steps(args, blk) and step(args, blk, s, tid, state): a __syncthreads() separates
//   consecutive steps;
//   optionally EARLY = true and early(args, blk, tid, state): work run before the kernel waits
//   for the one before it in the stream (pdl_enter), with a __syncthreads() before step 0. It
//   may read only what no kernel of the stream writes (a context's constant tables: the
//   kernel before is still running) and P::setup then runs early too.
// Everything is __host__ __device__, so a pipeline of programs, templated on its executor,
// runs unchanged on the GPU (CudaExec) and under HostExec, which runs one block after
// another and, within a block, every thread of a step before the next (the __syncthreads()
// semantics): tests/cuda_emu/emu.cu checks the CUDA programs that way against the CPU
// kernels, without a GPU.
#pragma once
#include <algorithm>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "util.cuh"
#include "../keyswitch.h"

namespace fhetorch::cuda {

constexpr int kStaticSmemWords = 12288;  // 48 KB: the static shared-memory limit
constexpr size_t kMaxParamBytes = 4096;  // the kernel parameter limit of every CUDA version

// Whether program P has an early phase (P::EARLY, P::early).
template <class P, class = void>
struct ProgramEarly : std::false_type {};
template <class P>
struct ProgramEarly<P, std::enable_if_t<P::EARLY>> : std::true_type {};

template <class P>
__global__ void __launch_bounds__(P::THREADS, P::MIN_BLOCKS) program_kernel(const __grid_constant__ typename P::Args a) {
  static_assert(P::SMEM <= kStaticSmemWords, "a program's shared memory must fit the static limit");
  static_assert(sizeof(typename P::Args) <= kMaxParamBytes, "a program's arguments must fit the parameter limit");
  __shared__ __align__(16) uint32_t sm[P::SMEM];
  constexpr bool early = ProgramEarly<P>::value;
  if constexpr (!early) pdl_enter();
  const typename P::Blk b = P::setup(a, blockIdx.x, sm);
  typename P::State st{};
  if constexpr (early) {
    P::early(a, b, threadIdx.x, st);
    pdl_enter();
  }
  const int ns = P::num_steps(a, b);
#pragma unroll
  for (int s = 0; s < ns; ++s) {  // unrolled where ns is a constant: each step's code then fixed
    if (s > 0 || early) __syncthreads();
    P::step(a, b, s, threadIdx.x, st);
  }
}

// Launches programs on a stream.
struct CudaExec {
  cudaStream_t stream;
  template <class P>
  cudaError_t run(const typename P::Args& a) {
    const int64_t blocks = P::blocks(a);
    if (blocks <= 0) return cudaSuccess;
    const unsigned grid = grid_for(blocks, 1);
    if (grid == 0) return cudaErrorInvalidConfiguration;
    return launch_kernel(program_kernel<P>, grid, P::THREADS, 0, stream, a);
  }
};

// Runs programs on the host, block by block, step by step, with shared memory poisoned
// before each block (a value never canonical for a prime below 2^31 - 1) so that reading a
// word no step wrote shows up in the results. Counts the launches.
struct HostExec {
  static constexpr uint32_t kPoison = 0x7fffffffu;
  long long launches = 0;
  template <class P>
  cudaError_t run(const typename P::Args& a) {
    const int64_t blocks = P::blocks(a);
    if (blocks <= 0) return cudaSuccess;
    ++launches;
    std::vector<uint32_t> sm(P::SMEM + 4);
    uint32_t* base = sm.data() + ((16 - reinterpret_cast<uintptr_t>(sm.data()) % 16) % 16) / 4;  // 16-byte aligned
    std::vector<typename P::State> st(P::THREADS);
    for (int64_t blk = 0; blk < blocks; ++blk) {
      std::fill(base, base + P::SMEM, kPoison);
      const typename P::Blk b = P::setup(a, blk, base);
      for (auto& s : st) s = typename P::State{};
      if constexpr (ProgramEarly<P>::value)
        for (int tid = 0; tid < P::THREADS; ++tid) P::early(a, b, tid, st[tid]);
      const int ns = P::num_steps(a, b);
      for (int s = 0; s < ns; ++s)
        for (int tid = 0; tid < P::THREADS; ++tid) P::step(a, b, s, tid, st[tid]);
    }
    return cudaSuccess;
  }
};

// Calls f(std::integral_constant<int, log_n>{}) for the ring sizes the fused kernels
// cover (csrc/keyswitch.h), cudaErrorInvalidValue for any other.
static_assert(kFusedMinLogN == 10 && kFusedMaxLogN == 17, "dispatch_log_n lists the fused sizes");
template <class F>
cudaError_t dispatch_log_n(int log_n, F&& f) {
  switch (log_n) {
    case 10: return f(std::integral_constant<int, 10>{});
    case 11: return f(std::integral_constant<int, 11>{});
    case 12: return f(std::integral_constant<int, 12>{});
    case 13: return f(std::integral_constant<int, 13>{});
    case 14: return f(std::integral_constant<int, 14>{});
    case 15: return f(std::integral_constant<int, 15>{});
    case 16: return f(std::integral_constant<int, 16>{});
    case 17: return f(std::integral_constant<int, 17>{});
    default: return cudaErrorInvalidValue;
  }
}

}  // namespace fhetorch::cuda

// Returns from the enclosing function with the error of `expr` if it is not cudaSuccess.
#define FT_TRY(expr)                        \
  do {                                      \
    const cudaError_t ft_e_ = (expr);       \
    if (ft_e_ != cudaSuccess) return ft_e_; \
  } while (0)
