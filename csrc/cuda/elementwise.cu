// Element-wise launchers: add/sub/mul/neg/axpby/mul_const, lincomb, tensor product, automorphism,
// keyswitch inner product, hoisted_mac, to_rns, crt_digits. The arithmetic is the element
// functions of csrc/elementwise.h and csrc/hoisted_mac.h, which the CPU loops
// (csrc/cpu/elementwise.cpp) call too. One thread per 4 elements (16-byte loads and stores)
// when sizes and pointers allow, one per element otherwise; 64-bit indexing throughout.
#include <cstdlib>

#include "kernels.h"
#include "util.cuh"

namespace fhetorch::cuda {
namespace {

constexpr int kBlock = 256;

__device__ __forceinline__ int64_t thread_index() {
  return static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
}

// Index into b of element i of a, b broadcast over a's leading dimensions.
struct BIndex {
  int mode;        // 0: same shape; 1: nb = b_rows * n; 2: general (i % nb)
  int64_t nb;
  int64_t b_rows;  // nb / n in mode 1
  __device__ int64_t operator()(int64_t i, int64_t row, const LimbOf& lo) const {
    if (mode == 0) return i;
    if (mode == 1) {
      const int64_t col = i - row * lo.n;
      const int64_t br = static_cast<uint64_t>(row) <= 0xFFFFFFFFull && b_rows <= 0xFFFFFFFFll
                             ? static_cast<int64_t>(static_cast<uint32_t>(row) % static_cast<uint32_t>(b_rows))
                             : row % b_rows;
      return br * lo.n + col;
    }
    return i % nb;
  }
};

BIndex make_bindex(int64_t total, int64_t nb, int64_t n) {
  if (nb == total) return BIndex{0, nb, 0};
  if (nb % n == 0) return BIndex{1, nb, nb / n};
  return BIndex{2, nb, 0};
}

struct EwArgs {
  const int32_t* a;
  const int32_t* b;
  const int32_t* ca;
  const int32_t* cb;
  int32_t* out;
  const int32_t* mod;
  int64_t total;
  LimbOf limb;
  BIndex bidx;
};

// VEC: elements 4t..4t+3 (all in one row since n % 4 == 0); else element t.
template <EwOp OP, bool VEC>
__global__ void __launch_bounds__(kBlock) ew_kernel(EwArgs g) {
  pdl_enter();
  const int64_t i = VEC ? 4 * thread_index() : thread_index();
  if (i >= g.total) return;
  const int64_t row = g.limb.row(i);
  const int l = g.limb.of_row(row);
  const int32_t q = ldg(g.mod + 2 * l), qinv = ldg(g.mod + 2 * l + 1);
  const int32_t ca = g.ca ? ldg(g.ca + l) : 0, cb = g.cb ? ldg(g.cb + l) : 0;
  if (VEC) {
    const int4 x = ldg4(g.a + i);
    const int4 y = ew_uses_b<OP>() ? ldg4(g.b + g.bidx(i, row, g.limb)) : make_int4(0, 0, 0, 0);
    int4 r;
#pragma unroll
    for (int k = 0; k < 4; ++k) elem(r, k) = ew_apply<OP>(elem(x, k), elem(y, k), q, qinv, ca, cb);
    st4(g.out + i, r);
  } else {
    const int32_t y = ew_uses_b<OP>() ? ldg(g.b + g.bidx(i, row, g.limb)) : 0;
    g.out[i] = ew_apply<OP>(ldg(g.a + i), y, q, qinv, ca, cb);
  }
}

// Launches kernel<true> over ceil(items / 4) threads when vec, else kernel<false> over items.
template <class A>
cudaError_t launch_vec(void (*kv)(A), void (*ks)(A), const A& args, int64_t items, bool vec, cudaStream_t stream) {
  const unsigned grid = grid_for(vec ? (items + 3) / 4 : items, kBlock);
  if (grid == 0) return cudaErrorInvalidConfiguration;
  return launch_kernel(vec ? kv : ks, grid, kBlock, 0, stream, args);
}

template <EwOp OP>
cudaError_t ew(const EwArgs& g, bool vec, cudaStream_t stream) {
  return launch_vec<EwArgs>(ew_kernel<OP, true>, ew_kernel<OP, false>, g, g.total, vec, stream);
}

// ---- lincomb: one pass over up to kLincombTerms terms ------------------------------------

struct LincombLaunch {
  LincombArgs g;
  LimbOf limb;
};

// VEC: elements 4t..4t+3 (one row). The loads of kLincombLoads terms are issued before their
// sums (unrolled loops guarded by the term count), so the reads overlap; loading all 16 at once
// needed 152 registers a thread on sm_90 (one block per SM), groups of 8 need 58.
constexpr int kLincombLoads = 8;
template <bool VEC>
__global__ void __launch_bounds__(kBlock) lincomb_kernel(const __grid_constant__ LincombLaunch a) {
  pdl_enter();
  const LincombArgs& g = a.g;
  const int64_t i = VEC ? 4 * thread_index() : thread_index();
  if (i >= g.total) return;
  const int64_t row = a.limb.row(i);
  const int l = a.limb.of_row(row);
  const int32_t q = ldg(g.mod + 2 * l), qinv = ldg(g.mod + 2 * l + 1);
  if (VEC) {
    int4 acc;
    if (g.acc) {
      acc = *reinterpret_cast<const int4*>(g.acc + i);  // may be out: a plain load
    } else {
      const int32_t s = lincomb_start(g, row, l);
      acc = make_int4(s, s, s, s);
    }
#pragma unroll
    for (int t0 = 0; t0 < kLincombTerms; t0 += kLincombLoads) {
      if (t0 >= g.terms) break;
      int4 x[kLincombLoads];
#pragma unroll
      for (int t = 0; t < kLincombLoads; ++t)
        if (t0 + t < g.terms) x[t] = ldg4(g.x[t0 + t] + i);
#pragma unroll
      for (int t = 0; t < kLincombLoads; ++t) {
        if (t0 + t < g.terms) {
          const int32_t c = ldg(g.consts + (t0 + t) * g.L + l);
#pragma unroll
          for (int k = 0; k < 4; ++k) elem(acc, k) = lincomb_term(elem(acc, k), elem(x[t], k), c, q, qinv);
        }
      }
    }
    st4(g.out + i, acc);
  } else {
    int32_t acc = g.acc ? g.acc[i] : lincomb_start(g, row, l);
    for (int t = 0; t < g.terms; ++t) acc = lincomb_term(acc, ldg(g.x[t] + i), ldg(g.consts + t * g.L + l), q, qinv);
    g.out[i] = acc;
  }
}

// ---- tensor product: sum_t a_t (batch, 2, plane) x b_t (batch or 1, 2, plane) -> (batch, 3, plane) ----

struct TpLaunch {
  TensorProductArgs g;
  int64_t plane;  // L * n
  LimbOf limb;    // limb of an in-plane index
};

template <bool VEC>
__global__ void __launch_bounds__(kBlock) tp_kernel(const __grid_constant__ TpLaunch p) {
  pdl_enter();
  const TensorProductArgs& g = p.g;
  const int64_t plane = p.plane, it = VEC ? 4 * thread_index() : thread_index();
  if (it >= g.batch * plane) return;
  const int64_t k = it / plane, e = it - k * plane;
  const int l = p.limb(e);
  const int32_t q = ldg(g.mod + 2 * l), qinv = ldg(g.mod + 2 * l + 1);
  int32_t* ok = g.out + k * 3 * plane + e;
  if constexpr (VEC) {
    int4 o[3];
#pragma unroll
    for (int c = 0; c < 3; ++c)  // acc may be out: plain loads
      o[c] = g.acc ? *reinterpret_cast<const int4*>(g.acc + k * 3 * plane + e + c * plane) : make_int4(0, 0, 0, 0);
#pragma unroll
    for (int t = 0; t < kTensorPairs; ++t) {
      if (t >= g.pairs) break;
      const int32_t* ak = g.a[t] + k * 2 * plane + e;
      const int32_t* bk = g.b[t] + ((g.b_shared >> t) & 1u ? 0 : k * 2 * plane) + e;
      const int4 a0 = ldg4(ak), a1 = ldg4(ak + plane), b0 = ldg4(bk), b1 = ldg4(bk + plane);
#pragma unroll
      for (int m = 0; m < 4; ++m) {
        int32_t d0, d1, d2;
        tensor_product_element(elem(a0, m), elem(a1, m), elem(b0, m), elem(b1, m), q, qinv, d0, d1, d2);
        elem(o[0], m) = add_mod(elem(o[0], m), d0, q);
        elem(o[1], m) = add_mod(elem(o[1], m), d1, q);
        elem(o[2], m) = add_mod(elem(o[2], m), d2, q);
      }
    }
#pragma unroll
    for (int c = 0; c < 3; ++c) st4(ok + c * plane, o[c]);
  } else {
    int32_t o0, o1, o2;
    tensor_product_sum_element(g, k, e, plane, q, qinv, o0, o1, o2);
    ok[0] = o0;
    ok[plane] = o1;
    ok[2 * plane] = o2;
  }
}

// ---- automorphism: out[r][k] = x[r][src(k)] ------------------------------------------------

struct AutArgs {
  const int32_t* x;
  int32_t* out;
  int64_t total;  // rows * n
  int log_n;
  uint32_t galois;
};

template <bool VEC>
__global__ void __launch_bounds__(kBlock) aut_kernel(AutArgs g) {
  pdl_enter();
  const int64_t i = VEC ? 4 * thread_index() : thread_index();
  if (i >= g.total) return;
  const int64_t base = (i >> g.log_n) << g.log_n;
  const uint32_t k = static_cast<uint32_t>(i - base);
  const int32_t* xr = g.x + base;
  if (VEC) {
    int4 v;
#pragma unroll
    for (int m = 0; m < 4; ++m) elem(v, m) = ldg_rotated(xr, k + m, g.galois, g.log_n);
    st4(g.out + i, v);
  } else {
    g.out[i] = ldg_rotated(xr, k, g.galois, g.log_n);
  }
}

// ---- one thread per (limb, coefficient) of a ciphertext's plane; the batch inside -----------

__global__ void __launch_bounds__(kBlock) keyswitch_inner_kernel(const __grid_constant__ InnerArgs g) {
  pdl_enter();
  const int64_t t = thread_index();
  if (t < static_cast<int64_t>(g.Lext) * g.n) keyswitch_inner_element(g, static_cast<int>(t / g.n), t % g.n);
}

// Read-only loads through the non-coherent cache, V-word accesses (16-byte aligned rows for V = 4,
// 8-byte for V = 2): hoisted_mac_run's memory on the GPU.
struct LdgMem {
  static __device__ __forceinline__ int32_t load1(const int32_t* p) { return ldg(p); }
  template <int V>
  static __device__ __forceinline__ void load(const int32_t* p, int32_t* o) {
    if constexpr (V == 4) {
      const int4 t = ldg4(p);
      o[0] = t.x, o[1] = t.y, o[2] = t.z, o[3] = t.w;
    } else if constexpr (V == 2) {
      const int2 t = __ldg(reinterpret_cast<const int2*>(p));
      o[0] = t.x, o[1] = t.y;
    } else {
      o[0] = ldg(p);
    }
  }
  template <int V>
  static __device__ __forceinline__ void store(int32_t* p, const int32_t* v) {
    if constexpr (V == 4) st4(p, make_int4(v[0], v[1], v[2], v[3]));
    else if constexpr (V == 2) *reinterpret_cast<int2*>(p) = make_int2(v[0], v[1]);
    else p[0] = v[0];
  }
};

// The accumulators (GMAX giants x 2 components x V words a thread) would hold the kernel at 128
// registers, 2 blocks an SM, where it waits on memory latency: those of giants GREG.. live in
// shared memory instead. Calls of <= 6 giants keep none in registers (64 registers, 32 or 48 KB a
// block, 4 blocks an SM), the others 2 (80 registers, 48 KB, 3 blocks); a full bootstrapping's 7
// calls have 2, 5, 4, 4, 8, 8 and 4 giants. The diagonals are loaded two giants at a time, two
// loads in flight (four at a time spill; docs/benchmarks.md, session 34).
template <int V, int GMAX, int GREG>
__global__ void __launch_bounds__(kBlock, GREG == 0 ? 4 : GREG <= 2 ? 3 : 2)
    hoisted_mac_vec_kernel(const __grid_constant__ MacArgs g) {
  __shared__ __align__(16) int32_t spare[GMAX > GREG ? 2 * (GMAX - GREG) * kBlock * V : 1];
  pdl_enter();
  const int64_t item = V * thread_index();
  if (item >= (static_cast<int64_t>(g.Lext) << g.log_n)) return;
  for (int64_t bb = 0; bb < g.B; ++bb)
    hoisted_mac_run<V, LdgMem, GMAX, GREG, 2>(g, bb, item, spare + V * threadIdx.x, kBlock * V);
}

// V coefficients a thread; the digits' gathers are scalar, the keys, acc and out V words wide.
template <int V>
__global__ void __launch_bounds__(kBlock) keyswitch_inner_sum_kernel(const __grid_constant__ InnerSumArgs g) {
  pdl_enter();
  const int64_t item = V * thread_index();
  if (item >= (static_cast<int64_t>(g.Lext) << g.log_n)) return;
  for (int64_t bb = 0; bb < g.B; ++bb) keyswitch_inner_sum_run<V, LdgMem>(g, bb, item);
}

// Whether every row hoisted_mac reads or writes allows V-word accesses: tensors whose row
// starts are multiples of 4 words past a 16-byte aligned base (n % 4 == 0).
bool mac_rows_aligned(const MacArgs& g) {
  if (g.n % 4 != 0 || !aligned16(g.d) || !aligned16(g.c) || !aligned16(g.out)) return false;
  for (int b = 0; b < g.babies; ++b) {
    if ((g.key_q[b] && !aligned16(g.key_q[b])) || (g.key_p[b] && !aligned16(g.key_p[b]))) return false;
    for (int k = 0; k < g.giants; ++k)
      if (g.pt[b][k] && !aligned16(g.pt[b][k])) return false;
  }
  return true;
}

// Coefficients per thread of hoisted_mac on the GPU: FHETORCH_MAC_VEC=1|2|4 (A/B timing), else 4.
int mac_vec_width() {
  static const int w = [] {
    const char* e = std::getenv("FHETORCH_MAC_VEC");
    const int v = e ? std::atoi(e) : 4;
    return v == 1 || v == 2 ? v : 4;
  }();
  return w;
}

// ---- conversions: one thread per coefficient of a row ------------------------------------------

struct RowArgs {
  const void* x;
  int32_t* out;
  const int32_t* mod;
  const int32_t* table;  // to_rns: r2 (L,); crt_digits: garner (L, L)
  int64_t total;         // rows * n
  int64_t n;
  int L;
};

__global__ void __launch_bounds__(kBlock) to_rns_kernel(RowArgs g) {
  pdl_enter();
  const int64_t t = thread_index();
  if (t >= g.total) return;
  const int64_t row = t / g.n, c = t - row * g.n;
  const int64_t v = static_cast<const int64_t*>(g.x)[t];
  int32_t* o = g.out + row * g.L * g.n + c;
  for (int l = 0; l < g.L; ++l) o[l * g.n] = to_mont(v, ldg(g.mod + 2 * l), ldg(g.mod + 2 * l + 1), ldg(g.table + l));
}

__global__ void __launch_bounds__(128) crt_digits_kernel(RowArgs g) {
  pdl_enter();
  const int64_t t = thread_index();
  if (t >= g.total) return;
  const int64_t off = (t / g.n) * g.L * g.n + t % g.n;
  crt_digits_element(static_cast<const int32_t*>(g.x) + off, g.out + off, g.n, g.L, g.mod, g.table);
}

template <class A>
cudaError_t launch(void (*kernel)(A), const A& args, int64_t threads, int block, cudaStream_t stream) {
  if (threads <= 0) return cudaSuccess;
  const unsigned grid = grid_for(threads, block);
  if (grid == 0) return cudaErrorInvalidConfiguration;
  return launch_kernel(kernel, grid, static_cast<unsigned>(block), 0, stream, args);
}

}  // namespace

cudaError_t elementwise(EwOp op, const int32_t* a, const int32_t* ca, const int32_t* b, const int32_t* cb,
                        int32_t* out, int64_t total, int64_t nb, int64_t n, int L, const int32_t* mod,
                        const Stream& s) {
  if (total <= 0) return cudaSuccess;
  // (the index map as a separate variable: a conditional inside this initializer crashed nvcc 13.0's front end)
  const BIndex bidx = make_bindex(total, b ? nb : total, n);
  const EwArgs g{a, b, ca, cb, out, mod, total, make_limb_of(n, L), bidx};
  const bool vec = n % 4 == 0 && (!b || nb % 4 == 0) && aligned16(a) && (!b || aligned16(b)) && aligned16(out);
  switch (op) {
    case EwOp::Add: return ew<EwOp::Add>(g, vec, s.stream);
    case EwOp::Sub: return ew<EwOp::Sub>(g, vec, s.stream);
    case EwOp::Mul: return ew<EwOp::Mul>(g, vec, s.stream);
    case EwOp::Neg: return ew<EwOp::Neg>(g, vec, s.stream);
    case EwOp::Axpby: return ew<EwOp::Axpby>(g, vec, s.stream);
    case EwOp::MulConst: return ew<EwOp::MulConst>(g, vec, s.stream);
  }
  return cudaErrorInvalidValue;
}

cudaError_t lincomb(const LincombArgs& g, const Stream& s) {
  if (g.total <= 0) return cudaSuccess;
  bool vec = g.n % 4 == 0 && aligned16(g.out) && (!g.acc || aligned16(g.acc));
  for (int t = 0; t < g.terms; ++t) vec = vec && aligned16(g.x[t]);
  const LincombLaunch a{g, make_limb_of(g.n, g.L)};
  return launch_vec<LincombLaunch>(lincomb_kernel<true>, lincomb_kernel<false>, a, g.total, vec, s.stream);
}

cudaError_t tensor_product(const TensorProductArgs& g, const Stream& s) {
  const int64_t plane = static_cast<int64_t>(g.L) * g.n;
  if (g.batch <= 0 || plane <= 0) return cudaSuccess;
  bool vec = g.n % 4 == 0 && aligned16(g.out) && (!g.acc || aligned16(g.acc));
  for (int t = 0; t < g.pairs; ++t) vec = vec && aligned16(g.a[t]) && aligned16(g.b[t]);
  const TpLaunch p{g, plane, make_limb_of(g.n, g.L)};
  return launch_vec<TpLaunch>(tp_kernel<true>, tp_kernel<false>, p, g.batch * plane, vec, s.stream);
}

cudaError_t automorphism(const int32_t* x, int32_t* out, int64_t rows, int log_n, uint32_t galois, const Stream& s) {
  if (rows <= 0) return cudaSuccess;
  if (log_n < 1 || log_n > 30) return cudaErrorInvalidValue;
  const AutArgs g{x, out, rows << log_n, log_n, galois};
  return launch_vec<AutArgs>(aut_kernel<true>, aut_kernel<false>, g, g.total, log_n >= 2 && aligned16(out), s.stream);
}

cudaError_t keyswitch_inner(const InnerArgs& g, const Stream& s) {
  return g.B <= 0 ? cudaSuccess : launch(keyswitch_inner_kernel, g, static_cast<int64_t>(g.Lext) * g.n, kBlock, s.stream);
}

cudaError_t hoisted_mac(const MacArgs& g, const Stream& s) {
  if (g.B <= 0) return cudaSuccess;
  const int64_t items = static_cast<int64_t>(g.Lext) << g.log_n;
  const int v = mac_rows_aligned(g) ? mac_vec_width() : 1;
  if (v == 4 && g.giants <= 4) return launch(hoisted_mac_vec_kernel<4, 4, 0>, g, items / 4, kBlock, s.stream);
  if (v == 4 && g.giants <= 6) return launch(hoisted_mac_vec_kernel<4, 6, 0>, g, items / 4, kBlock, s.stream);
  if (v == 4) return launch(hoisted_mac_vec_kernel<4, kMacGiants, 2>, g, items / 4, kBlock, s.stream);
  if (v == 2) return launch(hoisted_mac_vec_kernel<2, kMacGiants, kMacGiants>, g, items / 2, kBlock, s.stream);
  return launch(hoisted_mac_vec_kernel<1, kMacGiants, kMacGiants>, g, items, kBlock, s.stream);
}

cudaError_t keyswitch_inner_sum(const InnerSumArgs& g, const Stream& s) {
  if (g.B <= 0) return cudaSuccess;
  const int64_t items = static_cast<int64_t>(g.Lext) << g.log_n;
  bool vec = g.n % 4 == 0 && aligned16(g.acc) && aligned16(g.out);
  for (int k = 0; k < g.G; ++k) vec = vec && aligned16(g.key_q[k]) && aligned16(g.key_p[k]);
  if (vec) return launch(keyswitch_inner_sum_kernel<4>, g, items / 4, kBlock, s.stream);
  return launch(keyswitch_inner_sum_kernel<1>, g, items, kBlock, s.stream);
}

cudaError_t to_rns(const int64_t* x, int32_t* out, int64_t rows, int L, int64_t n, const int32_t* mod,
                   const int32_t* r2, const Stream& s) {
  return L <= 0 ? cudaSuccess : launch(to_rns_kernel, RowArgs{x, out, mod, r2, rows * n, n, L}, rows * n, kBlock, s.stream);
}

cudaError_t crt_digits(const int32_t* x, int32_t* out, int64_t rows, int L, int64_t n, const int32_t* mod,
                       const int32_t* garner, const Stream& s) {
  if (L > kMaxCrtLimbs) return cudaErrorInvalidValue;
  return L <= 0 ? cudaSuccess
                : launch(crt_digits_kernel, RowArgs{x, out, mod, garner, rows * n, n, L}, rows * n, 128, s.stream);
}

}  // namespace fhetorch::cuda
