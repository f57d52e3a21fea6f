// The CPU device of the bindings (csrc/bind/ops.h): the kernels of csrc/cpu/ on ATen's
// thread pool, scratch buffers from ATen.
#include <ATen/Parallel.h>

#include <deque>

#include "ops.h"
#include "../cpu/kernels.h"

namespace fhetorch::bind {
namespace {

class CpuDevice {
 public:
  explicit CpuDevice(const Tensor&) {
    ctx_.par = [](int64_t total, int64_t grain, const cpu::Range& f) {
      at::parallel_for(0, total, grain, [&](int64_t a, int64_t b) { f(a, b); });
    };
    ctx_.scratch = [this](int64_t words) {
      scratch_.push_back(at::empty({words}, at::TensorOptions().dtype(at::kInt)));
      return scratch_.back().data_ptr<int32_t>();
    };
  }
  CpuDevice(const CpuDevice&) = delete;
  CpuDevice& operator=(const CpuDevice&) = delete;

  template <class F>
  void run(const char*, F&& f) {
    f(ctx_);
  }
  Tensor aligned(const Tensor& t) const { return t; }

 private:
  cpu::Threads ctx_;
  std::deque<Tensor> scratch_;
};

}  // namespace

TORCH_LIBRARY_IMPL(fhetorch, CPU, m) { register_ops<CpuDevice>(m); }

}  // namespace fhetorch::bind
