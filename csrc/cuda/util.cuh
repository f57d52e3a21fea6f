// Small helpers shared by the CUDA kernels (torch-free). Functions are __host__ __device__
// where that lets the host emulation of the kernels (program.cuh) run the same code.
#pragma once
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <type_traits>
#include <utility>
#include <cuda_runtime.h>

#include "../arith.h"

namespace fhetorch::cuda {

// Read-only (non-coherent cache) loads; plain loads when compiled for the host.
FT_HD int32_t ldg(const int32_t* p) {
#if defined(__CUDA_ARCH__)
  return __ldg(p);
#else
  return *p;
#endif
}
FT_HD int4 ldg4(const int32_t* p) {
#if defined(__CUDA_ARCH__)
  return __ldg(reinterpret_cast<const int4*>(p));
#else
  return *reinterpret_cast<const int4*>(p);
#endif
}
// row[src(x)]: coefficient x of automorphism(row, galois), X -> X^galois on an NTT-domain row
// (arith.h automorphism_source), read as ldg does.
FT_HD int32_t ldg_rotated(const int32_t* row, uint32_t x, uint32_t galois, int log_n) {
  return ldg(row + automorphism_source(x, galois, log_n));
}
FT_HD void st4(int32_t* p, int4 v) { *reinterpret_cast<int4*>(p) = v; }
// Plain (weak) stores to global memory through a generic pointer the compiler cannot trace to
// its origin (pin_ptr): st.global instead of a generic store.
FT_HD void stg(int32_t* p, int32_t v) {
#if defined(__CUDA_ARCH__)
  asm volatile("st.global.b32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
#else
  *p = v;
#endif
}
FT_HD void stg2(int32_t* p, int32_t x, int32_t y) {
#if defined(__CUDA_ARCH__)
  asm volatile("st.global.v2.b32 [%0], {%1, %2};" ::"l"(p), "r"(x), "r"(y) : "memory");
#else
  p[0] = x;
  p[1] = y;
#endif
}
FT_HD void stg4(int32_t* p, int4 v) {
#if defined(__CUDA_ARCH__)
  asm volatile("st.global.v4.b32 [%0], {%1, %2, %3, %4};" ::"l"(p), "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w) : "memory");
#else
  *reinterpret_cast<int4*>(p) = v;
#endif
}

// 2^32 mod p, canonical: (2^32 - p) mod p in 32-bit arithmetic.
FT_HD uint32_t two32_mod(uint32_t p) { return (0u - p) % p; }

// p, opaque to the optimiser: an address made once per thread stays one register, and
// accesses at constant distances from it become immediate offsets instead of being
// re-derived (a 64-bit sum each) from the row base.
template <class T>
FT_HD T* pin_ptr(T* p) {
#if defined(__CUDA_ARCH__)
  asm("" : "+l"(p));
#endif
  return p;
}

// a * b + c with a 32 x 32 -> 64-bit product (signed or unsigned), one multiply-add
// instruction on the GPU.
template <class T, class W = std::conditional_t<std::is_signed_v<T>, int64_t, uint64_t>>
FT_HD W mad_wide(T a, T b, std::common_type_t<W> c) {
#if defined(__CUDA_ARCH__)
  W d;
  if constexpr (std::is_signed_v<T>) asm("mad.wide.s32 %0, %1, %2, %3;" : "=l"(d) : "r"(a), "r"(b), "l"(c));
  else asm("mad.wide.u32 %0, %1, %2, %3;" : "=l"(d) : "r"(a), "r"(b), "l"(c));
  return d;
#else
  return static_cast<W>(a) * b + c;
#endif
}

FT_HD int32_t& elem(int4& v, int i) { return i == 0 ? v.x : i == 1 ? v.y : i == 2 ? v.z : v.w; }
FT_HD int32_t elem(const int4& v, int i) { return i == 0 ? v.x : i == 1 ? v.y : i == 2 ? v.z : v.w; }

inline bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15u) == 0; }

// Blocks for `items` work items at `per_block` items per block; 0 if it exceeds the grid limit.
inline unsigned grid_for(int64_t items, int64_t per_block) {
  const int64_t g = (items + per_block - 1) / per_block;
  return g > 0x7FFFFFFFLL ? 0u : static_cast<unsigned>(g);
}

// Division by a divisor fixed at launch, for numerators 0 <= n < 2^31 (row and block
// indices: grids stay below 2^31 blocks): a multiply-high and a shift instead of the ~25
// instructions of a 64-bit division by a run-time value, which every thread of a block
// would otherwise pay in its setup. With l = ceil(log2 d) and m = floor(2^(31+l) / d) + 1
// (< 2^32), floor(n / d) = floor(n m / 2^(31+l)) (Granlund and Montgomery 1994, Thm 4.2,
// N = 31). Made on the host; d = 1 keeps m = 0 and returns n.
struct Divisor {
  uint32_t d = 1, m = 0;
  int s = 0;  // l - 1
  Divisor() = default;
  explicit Divisor(int64_t dd) : d(static_cast<uint32_t>(dd)) {
    if (d > 1) {
      int l = 0;
      while ((uint64_t(1) << l) < d) ++l;
      m = static_cast<uint32_t>((uint64_t(1) << (31 + l)) / d + 1);
      s = l - 1;
    }
  }
  FT_HD int64_t div(int64_t n) const { return m ? umulhi32(static_cast<uint32_t>(n), m) >> s : n; }
  FT_HD int64_t mod(int64_t n) const { return n - div(n) * d; }
};

// The limb of element i of a (..., L, n) tensor: (i / n) % L, with a shift when n = 2^s.
struct LimbOf {
  int64_t n;
  int shift;  // log2(n) if n is a power of two, else -1
  int L;
  FT_HD int64_t row(int64_t i) const { return shift >= 0 ? (i >> shift) : i / n; }
  FT_HD int of_row(int64_t r) const {
    return static_cast<uint64_t>(r) <= 0xFFFFFFFFull ? static_cast<int>(static_cast<uint32_t>(r) % static_cast<uint32_t>(L))
                                                     : static_cast<int>(r % L);
  }
  FT_HD int operator()(int64_t i) const { return of_row(row(i)); }
};

inline LimbOf make_limb_of(int64_t n, int L) {
  int shift = -1;
  if (n > 0 && (n & (n - 1)) == 0)
    for (shift = 0; (int64_t(1) << shift) < n;) ++shift;
  return LimbOf{n, shift, L};
}

// Raises Kernel's dynamic shared memory limit to `bytes` on device `dev` the first time a launch
// needs more than the limit already set there (one cudaFuncSetAttribute per kernel and device).
template <auto Kernel>
cudaError_t allow_dynamic_smem(int64_t bytes, int dev) {
  constexpr int kDevices = 64;
  static std::atomic<int> raised[kDevices];  // the limit each device's kernel has (0: none yet)
  if (dev < kDevices && raised[dev].load() >= bytes) return cudaSuccess;
  const cudaError_t err =
      cudaFuncSetAttribute(Kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes));
  if (err == cudaSuccess && dev < kDevices) raised[dev].store(static_cast<int>(bytes));
  return err;
}

// Programmatic dependent launch (sm_90): a kernel started by launch_kernel() may be scheduled
// onto the SMs while the kernel before it in the stream is still finishing, so the launch and
// the ramp-up of the many short dependent kernels of a key switch overlap the previous one's
// tail. Such a kernel must call pdl_enter() before it touches global memory: it waits until
// the previous kernel has completed and its writes are visible (PTX griddepcontrol.wait), then
// lets the next kernel be scheduled. A kernel launched plainly, or after a kernel that never
// signals, runs exactly as without it. FHETORCH_PDL=0 launches plainly (for A/B timing).
__device__ __forceinline__ void pdl_enter() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

inline bool pdl_enabled() {
  static const bool on = [] {
    const char* e = std::getenv("FHETORCH_PDL");
    return !(e && e[0] == '0');
  }();
  return on;
}

// kernel<<<grid, block, smem, stream>>>(args...), as a programmatic dependent launch where
// pdl_enabled(); the kernel starts with pdl_enter().
template <class... KArgs, class... Args>
cudaError_t launch_kernel(void (*kernel)(KArgs...), unsigned grid, unsigned block, size_t smem, cudaStream_t stream,
                          Args&&... args) {
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = dim3(grid);
  cfg.blockDim = dim3(block);
  cfg.dynamicSmemBytes = smem;
  cfg.stream = stream;
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  cfg.attrs = attr;
  cfg.numAttrs = pdl_enabled() ? 1 : 0;
  return cudaLaunchKernelEx(&cfg, kernel, std::forward<Args>(args)...);
}

// A thread block as a "team" of the shared step functions (csrc/tfhe.h, csrc/tfhe_fft.h):
// rank and size split the loops, sync() is the block barrier.
struct BlockTeam {
  int rank, size;
  __host__ __device__ void sync() const {
#if defined(__CUDA_ARCH__)
    __syncthreads();
#endif
  }
};

__device__ inline BlockTeam block_team() {
  return BlockTeam{static_cast<int>(threadIdx.x), static_cast<int>(blockDim.x)};
}

}  // namespace fhetorch::cuda
