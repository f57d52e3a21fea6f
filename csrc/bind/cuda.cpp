// The CUDA device of the bindings (csrc/bind/ops.h): the kernels of csrc/cuda/ enqueued on
// the current stream of the input's device, scratch and outputs from the caching allocator.
// Nothing here waits for the GPU.
// A CPU-only torch ships the c10/cuda headers without their generated config header; it
// only matters for Windows DLL exports, so skip it there (this lets the file be
// syntax-checked against such a torch: .ci/compile_cuda.sh).
#if !__has_include(<c10/cuda/impl/cuda_cmake_macros.h>) && !defined(C10_CUDA_NO_CMAKE_CONFIGURE_FILE)
#define C10_CUDA_NO_CMAKE_CONFIGURE_FILE
#endif
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include <deque>

#include "ops.h"
#include "../cuda/kernels.h"

namespace fhetorch::bind {
namespace {

class CudaDevice {
 public:
  explicit CudaDevice(const Tensor& first) : guard_(first.device()), options_(first.options().dtype(at::kInt)) {
    // The current stream of the current device (set by the guard): what
    // at::cuda::getCurrentCUDAStream() returns.
    ctx_.stream = c10::cuda::getCurrentCUDAStream().stream();
    ctx_.scratch = [this](int64_t words) {
      scratch_.push_back(at::empty({words}, options_));
      return scratch_.back().data_ptr<int32_t>();
    };
    // a pool stream other than the current one (the pool is shared: the current stream may be from it)
    ctx_.side = [this, index = first.device().index()]() {
      cudaStream_t s = c10::cuda::getStreamFromPool(false, index).stream();
      return s != ctx_.stream ? s : c10::cuda::getStreamFromPool(false, index).stream();
    };
  }
  CudaDevice(const CudaDevice&) = delete;
  CudaDevice& operator=(const CudaDevice&) = delete;

  template <class F>
  void run(const char* op, F&& f) {
    const cudaError_t err = f(ctx_);
    FT_CHECK(err == cudaSuccess, "fhetorch.", op, ": CUDA kernel launch failed: ", cudaGetErrorString(err));
  }
  // The fused kernels use 16-byte accesses: a contiguous input whose data does not start on
  // a 16-byte boundary (a view with an odd storage offset) is copied first. (A non-contiguous
  // one is passed on unchanged, for the check to refuse it as on the CPU.)
  Tensor aligned(const Tensor& t) const {
    return t.is_contiguous() && (reinterpret_cast<uintptr_t>(t.data_ptr()) & 15u) != 0 ? t.clone() : t;
  }

 private:
  c10::cuda::CUDAGuard guard_;
  at::TensorOptions options_;
  cuda::Stream ctx_;
  std::deque<Tensor> scratch_;
};

}  // namespace

TORCH_LIBRARY_IMPL(fhetorch, CUDA, m) { register_ops<CudaDevice>(m); }

}  // namespace fhetorch::bind
