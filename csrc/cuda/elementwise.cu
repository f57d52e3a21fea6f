// Element-wise launchers: add/sub/mul/neg/axpby/mul_const, tensor product, automorphism,
// keyswitch inner product, to_rns, crt_digits (bodies: elementwise_core.cuh; oracle:
// csrc/cpu/elementwise.cpp). One thread per 4 elements (16-byte loads and stores) when
// sizes and pointers allow, one per element otherwise; 64-bit indexing throughout.
#include "kernels.h"
#include "elementwise_core.cuh"

namespace fhetorch::cuda {
namespace {

using namespace ew_detail;

constexpr int kBlock = 256;

FT_HD int64_t thread_index() {
#if defined(__CUDA_ARCH__)
  return static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
#else
  return 0;
#endif
}

template <Op OP, bool VEC>
__global__ void __launch_bounds__(kBlock) ew_kernel(EwArgs g) { ew_thread<OP, VEC>(g, thread_index()); }
template <bool VEC>
__global__ void __launch_bounds__(kBlock) tp_kernel(TpArgs g) { tp_thread<VEC>(g, thread_index()); }
template <bool VEC>
__global__ void __launch_bounds__(kBlock) aut_kernel(AutArgs g) { aut_thread<VEC>(g, thread_index()); }
template <bool VEC>
__global__ void __launch_bounds__(kBlock) ks_kernel(KsArgs g) { ks_thread<VEC>(g, thread_index()); }
__global__ void __launch_bounds__(kBlock) mac_kernel(const __grid_constant__ MacArgs g) {
  const int64_t t = thread_index();
  if (t < static_cast<int64_t>(g.Lext) << g.log_n) hoisted_mac_element(g, t);
}
__global__ void __launch_bounds__(kBlock) rns_kernel(RnsArgs g) { rns_thread(g, thread_index()); }
__global__ void __launch_bounds__(128) crt_kernel(CrtArgs g) { crt_thread(g, thread_index()); }

// Launches kernel<true> over ceil(items / 4) threads when vec, else kernel<false> over items.
template <class A>
cudaError_t launch_vec(void (*kv)(A), void (*ks)(A), const A& args, int64_t items, bool vec, cudaStream_t stream) {
  const unsigned grid = grid_for(vec ? (items + 3) / 4 : items, kBlock);
  if (grid == 0) return cudaErrorInvalidConfiguration;
  (vec ? kv : ks)<<<grid, kBlock, 0, stream>>>(args);
  FT_LAUNCH_CHECK();
  return cudaSuccess;
}

template <Op OP>
cudaError_t ew(const EwArgs& g, bool vec, cudaStream_t stream) {
  return launch_vec<EwArgs>(ew_kernel<OP, true>, ew_kernel<OP, false>, g, g.total, vec, stream);
}

}  // namespace

cudaError_t binary(Binary op, const int32_t* a, const int32_t* b, int32_t* out, int64_t total, int64_t nb, int64_t n,
                   int L, const int32_t* mod, cudaStream_t stream) {
  if (total <= 0) return cudaSuccess;
  EwArgs g{a, b, nullptr, nullptr, out, mod, total, make_limb_of(n, L), make_bindex(total, nb, n)};
  const bool vec = n % 4 == 0 && nb % 4 == 0 && aligned16(a) && aligned16(b) && aligned16(out);
  switch (op) {
    case Binary::Add: return ew<Op::Add>(g, vec, stream);
    case Binary::Sub: return ew<Op::Sub>(g, vec, stream);
    case Binary::Mul: return ew<Op::Mul>(g, vec, stream);
  }
  return cudaErrorInvalidValue;
}

cudaError_t neg(const int32_t* a, int32_t* out, int64_t total, int64_t n, int L, const int32_t* mod,
                cudaStream_t stream) {
  if (total <= 0) return cudaSuccess;
  EwArgs g{a, nullptr, nullptr, nullptr, out, mod, total, make_limb_of(n, L), BIndex{0, total, 0}};
  const bool vec = n % 4 == 0 && aligned16(a) && aligned16(out);
  return ew<Op::Neg>(g, vec, stream);
}

cudaError_t axpby(const int32_t* a, const int32_t* ca, const int32_t* b, const int32_t* cb, int32_t* out,
                  int64_t total, int64_t nb, int64_t n, int L, const int32_t* mod, cudaStream_t stream) {
  if (total <= 0) return cudaSuccess;
  if (b == nullptr) {
    EwArgs g{a, nullptr, ca, nullptr, out, mod, total, make_limb_of(n, L), BIndex{0, total, 0}};
    const bool vec = n % 4 == 0 && aligned16(a) && aligned16(out);
    return ew<Op::MulConst>(g, vec, stream);
  }
  EwArgs g{a, b, ca, cb, out, mod, total, make_limb_of(n, L), make_bindex(total, nb, n)};
  const bool vec = n % 4 == 0 && nb % 4 == 0 && aligned16(a) && aligned16(b) && aligned16(out);
  return ew<Op::Axpby>(g, vec, stream);
}

cudaError_t tensor_product(const int32_t* a, const int32_t* b, int32_t* out, int64_t batch, bool b_broadcast,
                           int64_t n, int L, const int32_t* mod, cudaStream_t stream) {
  const int64_t plane = static_cast<int64_t>(L) * n;
  if (batch <= 0 || plane <= 0) return cudaSuccess;
  TpArgs g{a, b, out, mod, plane, batch, make_limb_of(n, L), b_broadcast};
  const bool vec = n % 4 == 0 && aligned16(a) && aligned16(b) && aligned16(out);
  return launch_vec<TpArgs>(tp_kernel<true>, tp_kernel<false>, g, batch * plane, vec, stream);
}

cudaError_t automorphism(const int32_t* x, int32_t* out, int64_t rows, int log_n, uint32_t galois,
                         cudaStream_t stream) {
  if (rows <= 0) return cudaSuccess;
  if (log_n < 1 || log_n > 30) return cudaErrorInvalidValue;
  AutArgs g{x, out, rows << log_n, log_n, galois};
  const bool vec = log_n >= 2 && aligned16(out);
  return launch_vec<AutArgs>(aut_kernel<true>, aut_kernel<false>, g, g.total, vec, stream);
}

cudaError_t keyswitch_inner(const int32_t* d, const int32_t* key_q, const int32_t* key_p, int32_t* out, int beta,
                            int L, int Lq, int K, int Lq_key, int q_start, int digit_start, int64_t n,
                            const int32_t* mod, cudaStream_t stream) {
  const int64_t items = static_cast<int64_t>(L) * n;
  if (items <= 0) return cudaSuccess;
  KsArgs g{d, key_q, key_p, out, mod, n, make_limb_of(n, L), beta, L, Lq, K, Lq_key, q_start, digit_start};
  const bool vec = n % 4 == 0 && aligned16(d) && aligned16(key_q) && aligned16(key_p) && aligned16(out);
  return launch_vec<KsArgs>(ks_kernel<true>, ks_kernel<false>, g, items, vec, stream);
}

cudaError_t hoisted_mac(const MacArgs& args, cudaStream_t stream) {
  const unsigned grid = grid_for(static_cast<int64_t>(args.Lext) << args.log_n, kBlock);
  if (grid == 0) return cudaErrorInvalidConfiguration;
  mac_kernel<<<grid, kBlock, 0, stream>>>(args);
  FT_LAUNCH_CHECK();
  return cudaSuccess;
}

cudaError_t to_rns(const int64_t* x, int32_t* out, int64_t rows, int L, int64_t n, const int32_t* mod,
                   const int32_t* r2, cudaStream_t stream) {
  const int64_t total = rows * n;
  if (total <= 0 || L <= 0) return cudaSuccess;
  RnsArgs g{x, out, mod, r2, total, make_limb_of(n, 1), L};
  const unsigned grid = grid_for(total, kBlock);
  if (grid == 0) return cudaErrorInvalidConfiguration;
  rns_kernel<<<grid, kBlock, 0, stream>>>(g);
  FT_LAUNCH_CHECK();
  return cudaSuccess;
}

cudaError_t crt_digits(const int32_t* x, int32_t* out, int64_t rows, int L, int64_t n, const int32_t* mod,
                       const int32_t* garner, cudaStream_t stream) {
  const int64_t total = rows * n;
  if (total <= 0 || L <= 0) return cudaSuccess;
  if (L > 256) return cudaErrorInvalidValue;
  CrtArgs g{x, out, mod, garner, total, make_limb_of(n, 1), L};
  const unsigned grid = grid_for(total, 128);
  if (grid == 0) return cudaErrorInvalidConfiguration;
  crt_kernel<<<grid, 128, 0, stream>>>(g);
  FT_LAUNCH_CHECK();
  return cudaSuccess;
}

}  // namespace fhetorch::cuda
