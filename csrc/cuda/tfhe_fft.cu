// The float64 FFT ring product on the 2^64 torus on CUDA (oracle: csrc/cpu/tfhe_fft.cpp; step
// functions: csrc/tfhe_fft.h): one thread block per polynomial (a team with __syncthreads as
// its barrier), the scratch rows in global memory from the caching allocator, on the current
// stream. Every float64 operation of the step functions is an explicit __dadd_rn / __dsub_rn /
// __dmul_rn / __fma_rn intrinsic, so -fmad (on under --use_fast_math) contracts nothing and the
// results equal the CPU's bit for bit. A first increment: the blind rotation's fused kernels
// (shared memory, clusters) are the next step (docs/tfhe.md).
#include "kernels.h"
#include "util.cuh"

namespace fhetorch::cuda {
namespace {

constexpr int kFftTeam = 256;

struct BlockTeam {
  int rank, size;
  FT_HD void sync() const {
#if defined(__CUDA_ARCH__)
    __syncthreads();
#endif
  }
};

__device__ BlockTeam block_team() {
  return BlockTeam{static_cast<int>(threadIdx.x), static_cast<int>(blockDim.x)};
}

__global__ void __launch_bounds__(kFftTeam) fft_kernel(TfheFftRing f, const int64_t* x, double* out, double* scratch) {
  const int64_t b = blockIdx.x, n = int64_t(1) << f.log_n;
  tfhe_team_fft_op(block_team(), f, x + b * n, scratch + b * tfhe_fft_scratch_doubles(f, 1), out + b * n);
}

__global__ void __launch_bounds__(kFftTeam) ifft_kernel(TfheFftRing f, const double* x, int64_t* out, double* scratch) {
  const int64_t b = blockIdx.x, n = int64_t(1) << f.log_n;
  tfhe_team_ifft_op(block_team(), f, x + b * n, scratch + b * tfhe_fft_scratch_doubles(f, 1), out + b * n);
}

__global__ void __launch_bounds__(kFftTeam)
    fft_product_kernel(TfheFftRing f, const int64_t* digits, const double* key, int64_t* out, int rows, int cols,
                       double* scratch) {
  const int64_t b = blockIdx.x, n = int64_t(1) << f.log_n;
  const int64_t per = tfhe_fft_scratch_doubles(f, rows > cols ? rows : cols);
  tfhe_team_fft_product(block_team(), f, digits + b * rows * n, key, rows, cols, scratch + b * per,
                        out + b * cols * n);
}

__global__ void __launch_bounds__(kFftTeam)
    torus_cmux_kernel(TfheTorusGgsw g, const int64_t* c0, const int64_t* c1, const double* ggsw, int64_t* out,
                      double* scratch) {
  const int64_t b = blockIdx.x, k1n = static_cast<int64_t>(g.k1) << g.f.log_n;
  tfhe_team_torus_cmux(block_team(), g, c0 ? c0 + b * k1n : nullptr, c1 + b * k1n, ggsw,
                       scratch + b * tfhe_fft_scratch_doubles(g.f, g.k1 * g.level), out + b * k1n);
}

double* fft_scratch(const Stream& s, int64_t B, int64_t doubles) {
  return reinterpret_cast<double*>(s.scratch(2 * B * doubles));
}

}  // namespace

cudaError_t tfhe_fft(const TfheFftRing& f, const int64_t* x, double* out, int64_t B, const Stream& s) {
  if (B <= 0) return cudaSuccess;
  if (B > 0x7FFFFFFFLL) return cudaErrorInvalidConfiguration;
  double* scratch = fft_scratch(s, B, tfhe_fft_scratch_doubles(f, 1));
  fft_kernel<<<static_cast<unsigned>(B), kFftTeam, 0, s.stream>>>(f, x, out, scratch);
  return cudaGetLastError();
}

cudaError_t tfhe_ifft(const TfheFftRing& f, const double* x, int64_t* out, int64_t B, const Stream& s) {
  if (B <= 0) return cudaSuccess;
  if (B > 0x7FFFFFFFLL) return cudaErrorInvalidConfiguration;
  double* scratch = fft_scratch(s, B, tfhe_fft_scratch_doubles(f, 1));
  ifft_kernel<<<static_cast<unsigned>(B), kFftTeam, 0, s.stream>>>(f, x, out, scratch);
  return cudaGetLastError();
}

cudaError_t tfhe_fft_product(const TfheFftRing& f, const int64_t* digits, const double* key, int64_t* out, int64_t B,
                             int rows, int cols, const Stream& s) {
  if (B <= 0) return cudaSuccess;
  if (B > 0x7FFFFFFFLL) return cudaErrorInvalidConfiguration;
  double* scratch = fft_scratch(s, B, tfhe_fft_scratch_doubles(f, rows > cols ? rows : cols));
  fft_product_kernel<<<static_cast<unsigned>(B), kFftTeam, 0, s.stream>>>(f, digits, key, out, rows, cols, scratch);
  return cudaGetLastError();
}

cudaError_t tfhe_torus_cmux(const TfheTorusGgsw& g, const int64_t* c0, const int64_t* c1, const double* ggsw,
                            int64_t* out, int64_t B, const Stream& s) {
  if (B <= 0) return cudaSuccess;
  if (B > 0x7FFFFFFFLL) return cudaErrorInvalidConfiguration;
  double* scratch = fft_scratch(s, B, tfhe_fft_scratch_doubles(g.f, g.k1 * g.level));
  torus_cmux_kernel<<<static_cast<unsigned>(B), kFftTeam, 0, s.stream>>>(g, c0, c1, ggsw, out, scratch);
  return cudaGetLastError();
}

}  // namespace fhetorch::cuda
