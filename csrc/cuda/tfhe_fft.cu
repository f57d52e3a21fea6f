// The float64 FFT ring product on the 2^64 torus on CUDA (oracle: csrc/cpu/tfhe_fft.cpp; step
// functions: csrc/tfhe_fft.h): one thread block per polynomial (a team with __syncthreads as
// its barrier), the scratch rows in global memory from the caching allocator, on the current
// stream. Every float64 operation of the step functions is an explicit __dadd_rn / __dsub_rn /
// __dmul_rn / __fma_rn intrinsic, so -fmad (on under --use_fast_math) contracts nothing and the
// results equal the CPU's bit for bit. A first increment: the blind rotation's fused kernels
// (shared memory, clusters) are the next step (docs/tfhe.md).
#include <cstdlib>
#include <string>

#include "fourier_split_core.cuh"
#include "kernels.h"
#include "program.cuh"
#include "util.cuh"

namespace fhetorch::cuda {
namespace {

constexpr int kFftTeam = 256;

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

// The blind rotation with a Fourier key. Fused (tfhe_fourier_fused_bytes within the opt-in
// limit: N <= 2^11 at k = 1, level 1): one block per ciphertext, the torus accumulator and the
// digit scratch in shared memory, every key bit in one launch, the key's rows read through the
// read-only cache (the blocks in flight run about the same key bit, so they share it in L2).
// Larger rings: fourier_split_core.cuh (three block programs per key bit over the batch); multi-bit
// keys there: one launch per group over the batch, the accumulator and digits in global memory.
// Registers capped so that three blocks share an SM (their 64 KiB of shared memory each at
// tfhe-4bit-p128 allows three): uncapped, the compiler took 255 per thread and one block ran per SM.
// MAXC: 2 for k = 1 (fewer accumulator registers), kTfheMaxK1 otherwise.
// MULTI: the multi-bit rotation (a.grouping > 1), its subset rotations after the digit scratch.
template <int THREADS, int MAXC, bool MULTI>
__global__ void __launch_bounds__(THREADS, THREADS >= 512 ? 1 : 3)
    fourier_rotate_fused_kernel(const __grid_constant__ FourierRotateArgs a) {
  extern __shared__ __align__(16) double fsmem[];
  const int64_t k1n = static_cast<int64_t>(a.g.k1) << a.g.f.log_n;
  int64_t* acc = reinterpret_cast<int64_t*>(fsmem);
  double* s = fsmem + k1n;
  if constexpr (MULTI) {
    int32_t* rot = reinterpret_cast<int32_t*>(s + tfhe_fourier_scratch_doubles(a.g));
    tfhe_team_fourier_multi_bit_blind_rotate<MAXC>(block_team(), a, blockIdx.x, acc, s, rot);
  } else {
    tfhe_team_fourier_blind_rotate<MAXC>(block_team(), a, blockIdx.x, acc, s);
  }
}

__global__ void __launch_bounds__(kFftTeam) fourier_rotate_init_kernel(const __grid_constant__ FourierRotateArgs a) {
  const int64_t b = blockIdx.x, k1n = static_cast<int64_t>(a.g.k1) << a.g.f.log_n;
  tfhe_team_fourier_rotate_init(block_team(), a, b, a.torus + b * k1n);
}

__global__ void __launch_bounds__(kFftTeam)
    fourier_rotate_step_kernel(const __grid_constant__ FourierRotateArgs a, int i) {
  const int64_t b = blockIdx.x, k1n = static_cast<int64_t>(a.g.k1) << a.g.f.log_n;
  double* s = a.scratch + b * tfhe_fourier_scratch_doubles(a.g);
  if (a.grouping > 1) {
    __shared__ int32_t rot[1 << kTfheMaxGrouping];
    tfhe_team_fourier_multi_bit_step(block_team(), a, b, i, a.torus + b * k1n, s, rot);
  } else {
    tfhe_team_fourier_rotate_step(block_team(), a, b, i, a.torus + b * k1n, s);
  }
}

// The bundles of groups [j0, j0 + C) of every ciphertext: block (b, jj) writes out[b C + jj]
// (k1, level, k1, N/2) complex (csrc/tfhe_fft.h, tfhe_fourier_bundle_slots).
__global__ void __launch_bounds__(kFftTeam)
    fourier_key_bundle_kernel(const __grid_constant__ FourierRotateArgs a, int j0, int C, double* out) {
  __shared__ int32_t rot[1 << kTfheMaxGrouping];
  const int64_t b = blockIdx.x / C;
  const int jj = static_cast<int>(blockIdx.x % C);
  pdl_enter();
  tfhe_team_fourier_subset_rotations(block_team(), a, b, j0 + jj, rot);
  __syncthreads();
  tfhe_fourier_bundle_slots(a, j0 + jj, rot, threadIdx.x, blockDim.x,
                            out + 2 * (b * C + jj) * tfhe_fourier_ggsw_values(a.g));
}

__global__ void __launch_bounds__(kFftTeam) fourier_rotate_finish_kernel(const __grid_constant__ FourierRotateArgs a) {
  const int64_t b = blockIdx.x, k1n = static_cast<int64_t>(a.g.k1) << a.g.f.log_n;
  tfhe_team_fourier_rotate_finish(block_team(), a, b, a.torus + b * k1n);
}

// The fused kernel's team: 256 threads at large batches (three blocks per SM), 512 where the batch
// leaves SMs idle. FHETORCH_FOURIER_TEAM (128, 256 or 512) overrides it for measurements.
int fourier_team(int64_t B, int sms) {
  static const int forced = [] {
    const char* e = std::getenv("FHETORCH_FOURIER_TEAM");
    return e ? std::atoi(e) : 0;
  }();
  if (forced == 128 || forced == 256 || forced == 512) return forced;
  return B <= sms ? 512 : 256;
}

// FHETORCH_FOURIER_KERNEL=generic forces the generic kernels where the register-scheduled one
// (csrc/cuda/fourier_rotate.cu) would run, =per-bit the per-bit launches where the large-ring
// programs (fourier_split_core.cuh) would: for measurements.
std::string forced_fourier_kernel() {
  const char* e = std::getenv("FHETORCH_FOURIER_KERNEL");
  return e ? e : "";
}
bool generic_fourier_forced() { return forced_fourier_kernel() == "generic"; }

// The grid below which the large-ring programs keep their blocks small (fourier_split::geometry): two
// per SM; FHETORCH_FOURIER_SPLIT_BLOCKS sets another (a huge value keeps every block small), for
// measurements.
int64_t split_min_blocks(int sms) {
  const char* e = std::getenv("FHETORCH_FOURIER_SPLIT_BLOCKS");
  return e ? std::max<int64_t>(1, std::atoll(e)) : 2 * int64_t(sms);
}

template <int THREADS, int MAXC, bool MULTI>
cudaError_t launch_fourier_fused_as(const FourierRotateArgs& a, int64_t smem, int dev, const Stream& s) {
  FT_TRY((allow_dynamic_smem<fourier_rotate_fused_kernel<THREADS, MAXC, MULTI>>(smem, dev)));
  fourier_rotate_fused_kernel<THREADS, MAXC, MULTI><<<static_cast<unsigned>(a.B), THREADS, smem, s.stream>>>(a);
  return cudaGetLastError();
}

template <int THREADS, int MAXC>
cudaError_t launch_fourier_fused(const FourierRotateArgs& a, int64_t smem, int dev, const Stream& s) {
  return a.grouping > 1 ? launch_fourier_fused_as<THREADS, MAXC, true>(a, smem, dev, s)
                        : launch_fourier_fused_as<THREADS, MAXC, false>(a, smem, dev, s);
}

template <int MAXC>
cudaError_t launch_fourier_team(const FourierRotateArgs& a, int64_t smem, int dev, int sms, const Stream& s) {
  switch (fourier_team(a.B, sms)) {
    case 128: return launch_fourier_fused<128, MAXC>(a, smem, dev, s);
    case 512: return launch_fourier_fused<512, MAXC>(a, smem, dev, s);
    default: return launch_fourier_fused<256, MAXC>(a, smem, dev, s);
  }
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

cudaError_t tfhe_fourier_blind_rotate(const FourierRotateArgs& a_in, const Stream& s) {
  if (a_in.B <= 0) return cudaSuccess;
  if (a_in.B > 0x7FFFFFFFLL) return cudaErrorInvalidConfiguration;
  FourierRotateArgs a = a_in;
  int dev = 0, optin = 0, sms = 0;
  FT_TRY(cudaGetDevice(&dev));
  FT_TRY(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
  FT_TRY(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  if (!generic_fourier_forced() && fourier_rotate_in_registers(a, optin)) return tfhe_fourier_rotate_registers(a, dev, sms, s);
  const int64_t smem = tfhe_fourier_fused_bytes(a.g) + (a.grouping > 1 ? 4 << kTfheMaxGrouping : 0);
  if (smem <= optin) {
    return a.g.k1 <= 2 ? launch_fourier_team<2>(a, smem, dev, sms, s)
                       : launch_fourier_team<kTfheMaxK1>(a, smem, dev, sms, s);
  }
  if (fourier_split::fits(a.g, a.grouping) && forced_fourier_kernel() != "per-bit") {
    // large rings: three programs per key bit over the batch, at most ~1 GiB of spectra in flight
    const int64_t words = fourier_split::scratch_words(a.g);
    const int64_t chunk = std::max<int64_t>(1, std::min<int64_t>(a.B, (int64_t(1) << 28) / words));
    CudaExec ex{s.stream};
    return fourier_split::run(ex, a, reinterpret_cast<uint32_t*>(s.scratch(chunk * words)), chunk, split_min_blocks(sms));
  }
  const int64_t k1n = static_cast<int64_t>(a.g.k1) << a.g.f.log_n, per = tfhe_fourier_scratch_doubles(a.g);
  double* buf = fft_scratch(s, a.B, k1n + per);
  a.torus = reinterpret_cast<int64_t*>(buf);
  a.scratch = buf + a.B * k1n;
  const unsigned grid = static_cast<unsigned>(a.B);
  fourier_rotate_init_kernel<<<grid, kFftTeam, 0, s.stream>>>(a);
  cudaError_t err = cudaGetLastError();
  const int steps = a.grouping > 1 ? a.n / a.grouping : a.n;
  for (int i = 0; i < steps && err == cudaSuccess; ++i) {
    fourier_rotate_step_kernel<<<grid, kFftTeam, 0, s.stream>>>(a, i);
    err = cudaGetLastError();
  }
  if (err != cudaSuccess) return err;
  fourier_rotate_finish_kernel<<<grid, kFftTeam, 0, s.stream>>>(a);
  return cudaGetLastError();
}

cudaError_t tfhe_fourier_key_bundles(const FourierRotateArgs& a, int j0, int C, double* out, const Stream& s) {
  if (a.B <= 0) return cudaSuccess;
  if (a.B * C > 0x7FFFFFFFLL) return cudaErrorInvalidConfiguration;
  return launch_kernel(fourier_key_bundle_kernel, static_cast<unsigned>(a.B * C), kFftTeam, 0, s.stream, a, j0, C, out);
}

cudaError_t tfhe_fourier_key_bundle(const FourierRotateArgs& a, int j, double* out, const Stream& s) {
  return tfhe_fourier_key_bundles(a, j, 1, out, s);
}

}  // namespace fhetorch::cuda
