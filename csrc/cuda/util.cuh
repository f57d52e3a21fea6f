// Small helpers shared by the CUDA kernels (torch-free). Functions are __host__ __device__
// where that lets a host-side emulation of the kernels exercise the same index logic.
#pragma once
#include <cstdint>
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
FT_HD void st4(int32_t* p, int4 v) { *reinterpret_cast<int4*>(p) = v; }

// a * b + c with a 32 x 32 -> 64-bit product, as one multiply-add instruction on the GPU.
FT_HD int64_t mad_wide(int32_t a, int32_t b, int64_t c) {
#if defined(__CUDA_ARCH__)
  int64_t d;
  asm("mad.wide.s32 %0, %1, %2, %3;" : "=l"(d) : "r"(a), "r"(b), "l"(c));
  return d;
#else
  return static_cast<int64_t>(a) * b + c;
#endif
}
FT_HD uint64_t mad_wide(uint32_t a, uint32_t b, uint64_t c) {
#if defined(__CUDA_ARCH__)
  uint64_t d;
  asm("mad.wide.u32 %0, %1, %2, %3;" : "=l"(d) : "r"(a), "r"(b), "l"(c));
  return d;
#else
  return static_cast<uint64_t>(a) * b + c;
#endif
}

FT_HD int32_t& elem(int4& v, int i) { return i == 0 ? v.x : i == 1 ? v.y : i == 2 ? v.z : v.w; }

inline bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15u) == 0; }

// Blocks for `items` work items at `per_block` items per block; 0 if it exceeds the grid limit.
inline unsigned grid_for(int64_t items, int64_t per_block) {
  const int64_t g = (items + per_block - 1) / per_block;
  return g > 0x7FFFFFFFLL ? 0u : static_cast<unsigned>(g);
}

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

inline int log2_if_pow2(int64_t n) {
  if (n <= 0 || (n & (n - 1)) != 0) return -1;
  int k = 0;
  while ((int64_t(1) << k) < n) ++k;
  return k;
}

inline LimbOf make_limb_of(int64_t n, int L) { return LimbOf{n, log2_if_pow2(n), L}; }

}  // namespace fhetorch::cuda

// Returns the launch error of the kernel just enqueued, if any.
#define FT_LAUNCH_CHECK()                          \
  do {                                             \
    cudaError_t ft_err_ = cudaGetLastError();      \
    if (ft_err_ != cudaSuccess) return ft_err_;    \
  } while (0)
