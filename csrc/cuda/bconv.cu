// The bconv op (design: bconv_core.cuh; oracle: csrc/cpu/bconv.cpp): one group per
// polynomial of the batch.
#include "kernels.h"
#include "bconv_core.cuh"
#include "program.cuh"

namespace fhetorch::cuda {
namespace {

struct BatchArgs {
  const int32_t* x;  // (batch, La, n)
  int32_t* y;        // (batch, Lb, n)
  const int32_t* mod_in;
  const int32_t* mod_out;
  const int32_t* mat;  // (Lb, La)
  int64_t n;
  int batch, La, Lb;
  bool vec;
  BcGrid grid;
};

struct BatchMap {
  using Args = BatchArgs;
  FT_HD static BcGrid grid(const Args& a) { return a.grid; }
  FT_HD static int groups(const Args& a) { return a.batch; }
  FT_HD static int64_t n(const Args& a) { return a.n; }
  FT_HD static bool vec(const Args& a) { return a.vec; }
  FT_HD static int n_in(const Args& a, int) { return a.La; }
  FT_HD static int n_out(const Args& a, int) { return a.Lb; }
  FT_HD static const int32_t* in_row(const Args& a, int g, int k) { return a.x + (static_cast<int64_t>(g) * a.La + k) * a.n; }
  FT_HD static const int32_t* in_mod(const Args& a, int, int k) { return a.mod_in + 2 * k; }
  FT_HD static int32_t* out_row(const Args& a, int g, int o) { return a.y + (static_cast<int64_t>(g) * a.Lb + o) * a.n; }
  FT_HD static const int32_t* out_mod(const Args& a, int, int o) { return a.mod_out + 2 * o; }
  FT_HD static const int32_t* mat_row(const Args& a, int, int o) { return a.mat + static_cast<int64_t>(o) * a.La; }
};

}  // namespace

cudaError_t bconv(const int32_t* x, int32_t* y, int64_t batch, int La, int Lb, int64_t n, const int32_t* mod_in,
                  const int32_t* mod_out, const int32_t* mat, const Stream& s) {
  if (batch <= 0 || n <= 0 || Lb <= 0) return cudaSuccess;
  if (La <= 0 || La > 256 || batch > 0x7FFFFFFF) return cudaErrorInvalidValue;
  const BatchArgs a{x, y, mod_in, mod_out, mat, n, static_cast<int>(batch), La, Lb,
                    n % 4 == 0 && aligned16(x) && aligned16(y), bconv_grid(batch, n, Lb)};
  CudaExec ex{s.stream};
  return run_bconv<BatchMap>(ex, a, La);
}

}  // namespace fhetorch::cuda
