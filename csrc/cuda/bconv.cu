// The bconv op (design: bconv_core.cuh; oracle: csrc/cpu/bconv.cpp).
#include "kernels.h"
#include "bconv_core.cuh"
#include "program.cuh"

namespace fhetorch::cuda {

cudaError_t bconv(const int32_t* x, int32_t* y, int64_t batch, int La, int Lb, int64_t n, const int32_t* mod_in,
                  const int32_t* mod_out, const int32_t* mat, const Stream& s) {
  CudaExec ex{s.stream};
  return run_bconv_batch(ex, x, y, batch, La, Lb, n, mod_in, mod_out, mat);
}

}  // namespace fhetorch::cuda
