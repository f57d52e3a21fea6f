// The CPU implementation of the device API (csrc/kernels.h), each function running its whole
// op. The element-wise arithmetic comes from the shared headers (csrc/elementwise.h,
// hoisted_mac.h, chacha.h), so the CUDA kernels compute the same; NTT, base conversion and the
// fused key switching are the plain algorithms the CUDA programs are checked against bit for
// bit (on the GPU, and on the host through tests/cuda_emu).
#pragma once
#include <cstdint>
#include <functional>

#include "../kernels.h"

namespace fhetorch::cpu {

using Range = std::function<void(int64_t, int64_t)>;

// What an op may use from its caller (the binding): `par` runs f on subranges covering
// [0, total), in parallel, each at least `grain` items long where possible; `scratch` lends a
// buffer of that many int32 words, valid until the op returns.
struct Threads {
  std::function<void(int64_t total, int64_t grain, const Range& f)> par;
  std::function<int32_t*(int64_t words)> scratch;
};

FHETORCH_DECLARE_KERNELS(void, Threads)

// The transforms of rows [r0, r1) of x in place (the building blocks of the fused ops): row r
// with limb l = r % L of mod (and post), row table_row(psi_rows, l) of the twiddle table.
void ntt_rows(int32_t* x, int64_t r0, int64_t r1, int L, int log_n, const int32_t* mod, const int32_t* psi,
              const TableRows& psi_rows);
void intt_rows(int32_t* x, int64_t r0, int64_t r1, int L, int log_n, const int32_t* mod, const int32_t* psi_inv,
               const int32_t* post, const TableRows& psi_rows);
// One coefficient of bconv: inputs x[j * n], j < La -> outputs y[i * n], i < Lb, with
// matrix row i at mat + i * mat_stride.
void bconv_coefficient(const int32_t* x, int32_t* y, int La, int Lb, int64_t n, const int32_t* mod_in,
                       const int32_t* mod_out, const int32_t* mat, int64_t mat_stride);

}  // namespace fhetorch::cpu
