// Negacyclic NTT / inverse NTT launchers (design: ntt_core.cuh; oracle: csrc/cpu/ntt.cpp).
// 2^10 <= N <= 2^17: two shared-memory phases per transform (NttPhase programs over every
// row). Other sizes: one simple radix-2 kernel per stage.
#include "kernels.h"
#include "ntt_core.cuh"
#include "program.cuh"

namespace fhetorch::cuda {
namespace {

using namespace ntt_detail;

struct RowsArgs {
  const int32_t* in;
  int32_t* out;
  const int32_t* mod;
  const int32_t* tw;    // (L, N)
  const int32_t* post;  // (L,), the inverse's last phase only
  int64_t rows;
  int L;
  bool in_vec, out_vec, tw_vec;
};

// Every row r of the input, with limb r % L.
template <int LOG_N>
struct AllRows {
  using Args = RowsArgs;
  static constexpr bool LOAD = false, STORE = false;
  FT_HD static int64_t rows(const Args& a) { return a.rows; }
  FT_HD static Ctx row(const Args& a, int64_t r, uint32_t* sm, int blk) {
    constexpr int64_t N = int64_t(1) << LOG_N;
    const int l = static_cast<int>(r % a.L);
    Ctx c = row_ctx(sm, a.in + r * N, a.out + r * N, a.mod, a.tw, l, N, a.post ? static_cast<uint32_t>(ldg(a.post + l)) : 0u,
                    blk);
    c.in_vec = a.in_vec;
    c.out_vec = a.out_vec;
    c.tw_vec = a.tw_vec;
    return c;
  }
};

template <bool INV>
cudaError_t two_phase(int log_n, const int32_t* x, int32_t* y, int64_t rows, int L, const int32_t* mod,
                      const int32_t* tw, const int32_t* post, cudaStream_t stream) {
  const RowsArgs first{x, y, mod, tw, nullptr, rows, L, aligned16(x), aligned16(y), aligned16(tw)};
  const RowsArgs second{y, y, mod, tw, post, rows, L, aligned16(y), aligned16(y), aligned16(tw)};
  CudaExec ex{stream};
  return dispatch_log_n(log_n, [&](auto tag) {
    constexpr int LOG_N = decltype(tag)::value;
    // forward: the large phase (top bits) first; inverse: the small one first
    FT_TRY((ex.run<NttPhase<LOG_N, !INV, INV, AllRows<LOG_N>>>(first)));
    return ex.run<NttPhase<LOG_N, INV, INV, AllRows<LOG_N>>>(second);
  });
}

// ---- other sizes: one radix-2 stage per launch, one butterfly per thread ----------------

template <bool INV>
__global__ void ntt_stage_kernel(StageArgs a) {
  ntt_stage_thread<INV>(a, static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x);
}

template <bool INV>
cudaError_t stagewise(const int32_t* x, int32_t* y, int64_t rows, int L, int log_n, const int32_t* mod,
                      const int32_t* tw, const int32_t* post, cudaStream_t stream) {
  const int64_t pairs = rows * ((int64_t(1) << log_n) >> 1);
  const unsigned grid = grid_for(pairs, 256);
  if (grid == 0) return cudaErrorInvalidConfiguration;
  for (int s = 0; s < log_n; ++s) {
    const int bit = INV ? s : log_n - 1 - s;
    const int32_t* src = s == 0 ? x : y;
    const StageArgs a{src, y, pairs, L, log_n, bit, s == log_n - 1, mod, tw, INV ? post : nullptr};
    ntt_stage_kernel<INV><<<grid, 256, 0, stream>>>(a);
    FT_TRY(cudaGetLastError());
  }
  return cudaSuccess;
}

template <bool INV>
cudaError_t transform(const int32_t* x, int32_t* y, int64_t rows, int L, int log_n, const int32_t* mod,
                      const int32_t* tw, const int32_t* post, cudaStream_t stream) {
  if (rows <= 0) return cudaSuccess;
  if (log_n < 1 || log_n > 30 || L <= 0) return cudaErrorInvalidValue;
  if (log_n >= kMinLogN && log_n <= kMaxLogN) return two_phase<INV>(log_n, x, y, rows, L, mod, tw, post, stream);
  return stagewise<INV>(x, y, rows, L, log_n, mod, tw, post, stream);
}

}  // namespace

cudaError_t ntt(const int32_t* x, int32_t* y, int64_t rows, int L, int log_n, const int32_t* mod, const int32_t* psi,
                const Stream& s) {
  return transform<false>(x, y, rows, L, log_n, mod, psi, nullptr, s.stream);
}

cudaError_t intt(const int32_t* x, int32_t* y, int64_t rows, int L, int log_n, const int32_t* mod,
                 const int32_t* psi_inv, const int32_t* post, const Stream& s) {
  return transform<true>(x, y, rows, L, log_n, mod, psi_inv, post, s.stream);
}

}  // namespace fhetorch::cuda
