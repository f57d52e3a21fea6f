// The CUDA implementation of the device API (csrc/kernels.h): each function enqueues its
// kernels on the stream without synchronising and returns the first launch error
// (cudaSuccess otherwise). All pointers are device pointers to contiguous data, the fused
// ops' 16-byte aligned (the binding copies misaligned inputs). Host arrays (digit bounds,
// dropped and kept rows, table row maps, hoisted_mac's tables) travel in the launch
// parameters, so nothing is copied to the device and every launch can be captured in a CUDA
// graph.
#pragma once
#include <cstdint>
#include <functional>
#include <cuda_runtime.h>

#include "../kernels.h"

namespace fhetorch::cuda {

// What an op may use from its caller (the binding): the stream to enqueue on; `scratch`,
// which lends device memory of that many int32 words from the caching allocator (in stream
// order: valid for the work enqueued by this op); `side`, a second stream of the device for
// work beside the stream's, which the op must join back into `stream` before it returns (its
// scratch is then safe: every later use is ordered after the join).
struct Stream {
  cudaStream_t stream;
  std::function<int32_t*(int64_t words)> scratch;
  std::function<cudaStream_t()> side;
};

FHETORCH_DECLARE_KERNELS(cudaError_t, Stream)

// Internal to tfhe_fourier_blind_rotate: the register-scheduled rotation (csrc/cuda/fourier_rotate.cu)
// for N = 2^10, 2^11 at k = 1, level 1, where its shared memory fits the device's opt-in limit.
bool fourier_rotate_in_registers(const FourierRotateArgs& a, int64_t optin);
cudaError_t tfhe_fourier_rotate_registers(const FourierRotateArgs& a, int dev, int sms, const Stream& s);
// The key bundles of groups [j0, j0 + C) of every ciphertext into out (B, C, k1, level, k1, N/2) complex
// (csrc/cuda/tfhe_fft.cu): the multi-bit register rotation reads them.
cudaError_t tfhe_fourier_key_bundles(const FourierRotateArgs& a, int j0, int C, double* out, const Stream& s);

}  // namespace fhetorch::cuda
