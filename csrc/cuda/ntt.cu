// Negacyclic NTT / inverse NTT launchers (design: ntt_core.cuh; oracle: csrc/cpu/ntt.cpp).
// 2^10 <= N <= 2^17: two shared-memory phases per transform (ntt_core.cuh's two_phase).
// Other sizes, or a twiddle table not 16-byte aligned: one simple radix-2 kernel per stage.
#include "kernels.h"
#include "ntt_core.cuh"
#include "program.cuh"

namespace fhetorch::cuda {
namespace {

using namespace ntt_detail;

// ---- other sizes: one radix-2 stage per launch, one butterfly per thread ----------------

// __grid_constant__: the row map is read in place from the parameters, not copied per thread.
template <bool INV>
__global__ void ntt_stage_kernel(const __grid_constant__ StageArgs a) {
  ntt_stage_thread<INV>(a, static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x);
}

template <bool INV>
cudaError_t stagewise(const int32_t* x, int32_t* y, int64_t rows, int L, int log_n, const int32_t* mod,
                      const int32_t* tw, const int32_t* post, const TableRows& tw_rows, cudaStream_t stream) {
  const int64_t pairs = rows * ((int64_t(1) << log_n) >> 1);
  const unsigned grid = grid_for(pairs, 256);
  if (grid == 0) return cudaErrorInvalidConfiguration;
  for (int s = 0; s < log_n; ++s) {
    const int bit = INV ? s : log_n - 1 - s;
    const int32_t* src = s == 0 ? x : y;
    const StageArgs a{src, y, pairs, L, log_n, bit, s == log_n - 1, mod, tw, INV ? post : nullptr, tw_rows};
    ntt_stage_kernel<INV><<<grid, 256, 0, stream>>>(a);
    FT_TRY(cudaGetLastError());
  }
  return cudaSuccess;
}

template <bool INV>
cudaError_t transform(const int32_t* x, int32_t* y, int64_t rows, int L, int log_n, const int32_t* mod,
                      const int32_t* tw, const int32_t* post, const TableRows& tw_rows, cudaStream_t stream) {
  if (rows <= 0) return cudaSuccess;
  if (log_n < 1 || log_n > 30 || L <= 0 || !table_rows_fit(tw_rows, L)) return cudaErrorInvalidValue;
  if (log_n >= kMinLogN && log_n <= kMaxLogN && aligned16(tw)) {  // two_phase reads the table 16 bytes at a time
    CudaExec ex{stream};
    return two_phase<INV>(ex, log_n, x, y, rows, L, mod, tw, post, tw_rows);
  }
  return stagewise<INV>(x, y, rows, L, log_n, mod, tw, post, tw_rows, stream);
}

}  // namespace

cudaError_t ntt(const int32_t* x, int32_t* y, int64_t rows, int L, int log_n, const int32_t* mod, const int32_t* psi,
                const TableRows& psi_rows, const Stream& s) {
  return transform<false>(x, y, rows, L, log_n, mod, psi, nullptr, psi_rows, s.stream);
}

cudaError_t intt(const int32_t* x, int32_t* y, int64_t rows, int L, int log_n, const int32_t* mod,
                 const int32_t* psi_inv, const int32_t* post, const TableRows& psi_rows, const Stream& s) {
  return transform<true>(x, y, rows, L, log_n, mod, psi_inv, post, psi_rows, s.stream);
}

}  // namespace fhetorch::cuda
