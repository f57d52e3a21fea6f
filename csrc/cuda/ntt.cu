// Negacyclic NTT / inverse NTT launchers (design: ntt_core.cuh; oracle: csrc/cpu/ntt.cpp).
// 2^10 <= N <= 2^17: two shared-memory kernels per transform. Other sizes: one simple
// radix-2 kernel per stage.
#include "kernels.h"
#include "ntt_core.cuh"

namespace fhetorch::cuda {
namespace {

using namespace ntt_detail;

template <int LOG_N, bool LARGE, int CAP, bool INV>
__global__ void __launch_bounds__(Geo<LOG_N, LARGE, CAP>::THREADS) ntt_phase_kernel(const __grid_constant__ PhaseArgs a) {
  using G = Geo<LOG_N, LARGE, CAP>;
  __shared__ __align__(16) uint32_t sm[G::T];
  const Ctx c = make_ctx<LOG_N, LARGE, CAP>(a, sm, blockIdx.x);
  const int tid = threadIdx.x;
#pragma unroll
  for (int s = 0; s < G::STEPS; ++s) {
    if (s > 0) __syncthreads();
    ntt_step<LOG_N, LARGE, CAP, INV>(s, c, tid);
  }
}

template <int LOG_N, bool LARGE, int CAP, bool INV>
cudaError_t launch_phase(const PhaseArgs& a, int64_t rows, cudaStream_t stream) {
  using G = Geo<LOG_N, LARGE, CAP>;
  const unsigned grid = grid_for(rows * G::BLOCKS_PER_ROW, 1);
  if (grid == 0) return cudaErrorInvalidConfiguration;
  ntt_phase_kernel<LOG_N, LARGE, CAP, INV><<<grid, G::THREADS, 0, stream>>>(a);
  FT_LAUNCH_CHECK();
  return cudaSuccess;
}

template <int LOG_N, int CAP, bool INV>
cudaError_t two_phase(const int32_t* x, int32_t* y, int64_t rows, int L, const int32_t* mod, const int32_t* tw,
                      const int32_t* post, const TwRows& twr, cudaStream_t stream) {
  PhaseArgs first{x, y, mod, tw, nullptr, L, aligned16(x), aligned16(y), aligned16(tw), twr};
  PhaseArgs second{y, y, mod, tw, post, L, aligned16(y), aligned16(y), aligned16(tw), twr};
  cudaError_t err;
  if (!INV) {
    if ((err = launch_phase<LOG_N, true, CAP, false>(first, rows, stream)) != cudaSuccess) return err;
    return launch_phase<LOG_N, false, CAP, false>(second, rows, stream);
  }
  if ((err = launch_phase<LOG_N, false, CAP, true>(first, rows, stream)) != cudaSuccess) return err;
  return launch_phase<LOG_N, true, CAP, true>(second, rows, stream);
}

// Rounds of up to 4 stages (16 coefficients per thread); 3 (8 per thread) measured slower
// on an H100 at N = 2^16.
constexpr int kCap = 4;

template <int LOG_N, bool INV>
cudaError_t two_phase_k(const int32_t* x, int32_t* y, int64_t rows, int L, const int32_t* mod, const int32_t* tw,
                        const int32_t* post, const TwRows& twr, cudaStream_t stream) {
  return two_phase<LOG_N, kCap, INV>(x, y, rows, L, mod, tw, post, twr, stream);
}

template <bool INV>
cudaError_t dispatch(const int32_t* x, int32_t* y, int64_t rows, int L, int log_n, const int32_t* mod,
                     const int32_t* tw, const int32_t* post, const TwRows& twr, cudaStream_t stream) {
  switch (log_n) {
    case 10: return two_phase_k<10, INV>(x, y, rows, L, mod, tw, post, twr, stream);
    case 11: return two_phase_k<11, INV>(x, y, rows, L, mod, tw, post, twr, stream);
    case 12: return two_phase_k<12, INV>(x, y, rows, L, mod, tw, post, twr, stream);
    case 13: return two_phase_k<13, INV>(x, y, rows, L, mod, tw, post, twr, stream);
    case 14: return two_phase_k<14, INV>(x, y, rows, L, mod, tw, post, twr, stream);
    case 15: return two_phase_k<15, INV>(x, y, rows, L, mod, tw, post, twr, stream);
    case 16: return two_phase_k<16, INV>(x, y, rows, L, mod, tw, post, twr, stream);
    case 17: return two_phase_k<17, INV>(x, y, rows, L, mod, tw, post, twr, stream);
    default: return cudaErrorInvalidValue;
  }
}

// ---- fallback: one radix-2 stage per launch, one butterfly per thread ----------------

template <bool INV>
__global__ void ntt_stage_kernel(const __grid_constant__ StageArgs a) {
  ntt_stage_thread<INV>(a, static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x);
}

template <bool INV>
cudaError_t stagewise(const int32_t* x, int32_t* y, int64_t rows, int L, int log_n, const int32_t* mod,
                      const int32_t* tw, const int32_t* post, const TwRows& twr, cudaStream_t stream) {
  const int64_t pairs = rows * ((int64_t(1) << log_n) >> 1);
  const unsigned grid = grid_for(pairs, 256);
  if (grid == 0) return cudaErrorInvalidConfiguration;
  for (int s = 0; s < log_n; ++s) {
    const int bit = INV ? s : log_n - 1 - s;
    const int32_t* src = s == 0 ? x : y;
    const StageArgs a{src, y, pairs, L, log_n, bit, s == log_n - 1, mod, tw, INV ? post : nullptr, twr};
    ntt_stage_kernel<INV><<<grid, 256, 0, stream>>>(a);
    FT_LAUNCH_CHECK();
  }
  return cudaSuccess;
}

template <bool INV>
cudaError_t transform(const int32_t* x, int32_t* y, int64_t rows, int L, int log_n, const int32_t* mod,
                      const int32_t* tw, const int32_t* post, const int* psi_rows, cudaStream_t stream) {
  if (rows <= 0) return cudaSuccess;
  if (log_n < 1 || log_n > 30 || L <= 0 || (psi_rows && L > kMaxTwRows)) return cudaErrorInvalidValue;
  const TwRows twr = tw_rows(psi_rows, L);
  if (log_n >= kMinLogN && log_n <= kMaxLogN) return dispatch<INV>(x, y, rows, L, log_n, mod, tw, post, twr, stream);
  return stagewise<INV>(x, y, rows, L, log_n, mod, tw, post, twr, stream);
}

}  // namespace

cudaError_t ntt(const int32_t* x, int32_t* y, int64_t rows, int L, int log_n, const int32_t* mod,
                const int32_t* psi, cudaStream_t stream, const int* psi_rows) {
  return transform<false>(x, y, rows, L, log_n, mod, psi, nullptr, psi_rows, stream);
}

cudaError_t intt(const int32_t* x, int32_t* y, int64_t rows, int L, int log_n, const int32_t* mod,
                 const int32_t* psi_inv, const int32_t* post, cudaStream_t stream, const int* psi_rows) {
  return transform<true>(x, y, rows, L, log_n, mod, psi_inv, post, psi_rows, stream);
}

}  // namespace fhetorch::cuda
