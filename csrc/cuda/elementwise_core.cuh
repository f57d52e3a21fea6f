// Per-thread bodies of the element-wise CUDA kernels (oracle: csrc/cpu/elementwise.cpp).
// Thread `t` (a 64-bit global index) handles 4 consecutive elements when the launcher
// found 16-byte alignment (VEC) and one element otherwise. The bodies are __host__
// __device__ so a host-side emulation can run them.
#pragma once
#include <cstdint>
#include "util.cuh"

namespace fhetorch::cuda::ew_detail {

enum class Op { Add, Sub, Mul, Neg, Axpby, MulConst };

// b index of element i for b broadcast over the leading dimensions of a.
struct BIndex {
  int mode;         // 0: same shape; 1: nb = b_rows * n; 2: general (i % nb)
  int64_t nb;
  int64_t b_rows;   // nb / n in mode 1
  FT_HD int64_t operator()(int64_t i, int64_t row, const LimbOf& lo) const {
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

inline BIndex make_bindex(int64_t total, int64_t nb, int64_t n) {
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

template <Op OP>
FT_HD int32_t ew_apply(int32_t x, int32_t y, int32_t q, int32_t qinv, int32_t ca, int32_t cb) {
  switch (OP) {
    case Op::Add: return add_mod(x, y, q);
    case Op::Sub: return sub_mod(x, y, q);
    case Op::Mul: return mont_mul(x, y, q, qinv);
    case Op::Neg: return neg_mod(x, q);
    case Op::Axpby: return add_mod(mont_mul(x, ca, q, qinv), mont_mul(y, cb, q, qinv), q);
    case Op::MulConst: return mont_mul(x, ca, q, qinv);
  }
  return 0;
}

template <Op OP>
__host__ __device__ constexpr bool uses_b() { return OP == Op::Add || OP == Op::Sub || OP == Op::Mul || OP == Op::Axpby; }
template <Op OP>
__host__ __device__ constexpr bool uses_c() { return OP == Op::Axpby || OP == Op::MulConst; }

// VEC: elements 4t..4t+3 (all in one row since n % 4 == 0); else element t.
template <Op OP, bool VEC>
FT_HD void ew_thread(const EwArgs& g, int64_t t) {
  const int64_t i = VEC ? 4 * t : t;
  if (i >= g.total) return;
  const int64_t row = g.limb.row(i);
  const int l = g.limb.of_row(row);
  const int32_t q = ldg(g.mod + 2 * l), qinv = ldg(g.mod + 2 * l + 1);
  const int32_t ca = uses_c<OP>() ? ldg(g.ca + l) : 0;
  const int32_t cb = OP == Op::Axpby ? ldg(g.cb + l) : 0;
  if (VEC) {
    int4 x = ldg4(g.a + i), y = make_int4(0, 0, 0, 0), r;
    if (uses_b<OP>()) y = ldg4(g.b + g.bidx(i, row, g.limb));
    r.x = ew_apply<OP>(x.x, y.x, q, qinv, ca, cb);
    r.y = ew_apply<OP>(x.y, y.y, q, qinv, ca, cb);
    r.z = ew_apply<OP>(x.z, y.z, q, qinv, ca, cb);
    r.w = ew_apply<OP>(x.w, y.w, q, qinv, ca, cb);
    st4(g.out + i, r);
  } else {
    const int32_t y = uses_b<OP>() ? ldg(g.b + g.bidx(i, row, g.limb)) : 0;
    g.out[i] = ew_apply<OP>(ldg(g.a + i), y, q, qinv, ca, cb);
  }
}

// ---- tensor product: a (batch, 2, plane), b (batch or 1, 2, plane) -> (batch, 3, plane)

struct TpArgs {
  const int32_t* a;
  const int32_t* b;
  int32_t* out;
  const int32_t* mod;
  int64_t plane, batch;  // plane = L * n
  LimbOf limb;           // limb of an in-plane index
  bool b_broadcast;
};

FT_HD void tp_one(int32_t a0, int32_t a1, int32_t b0, int32_t b1, int32_t q, int32_t qinv, int32_t& o0,
                  int32_t& o1, int32_t& o2) {
  o0 = mont_mul(a0, b0, q, qinv);
  o1 = add_mod(mont_mul(a0, b1, q, qinv), mont_mul(a1, b0, q, qinv), q);
  o2 = mont_mul(a1, b1, q, qinv);
}

template <bool VEC>
FT_HD void tp_thread(const TpArgs& g, int64_t t) {
  const int64_t it = VEC ? 4 * t : t;
  if (it >= g.batch * g.plane) return;
  const int64_t k = it / g.plane, e = it - k * g.plane;
  const int l = g.limb(e);
  const int32_t q = ldg(g.mod + 2 * l), qinv = ldg(g.mod + 2 * l + 1);
  const int32_t* ak = g.a + k * 2 * g.plane + e;
  const int32_t* bk = g.b + (g.b_broadcast ? 0 : k * 2 * g.plane) + e;
  int32_t* ok = g.out + k * 3 * g.plane + e;
  if (VEC) {
    int4 a0 = ldg4(ak), a1 = ldg4(ak + g.plane), b0 = ldg4(bk), b1 = ldg4(bk + g.plane), o0, o1, o2;
    tp_one(a0.x, a1.x, b0.x, b1.x, q, qinv, o0.x, o1.x, o2.x);
    tp_one(a0.y, a1.y, b0.y, b1.y, q, qinv, o0.y, o1.y, o2.y);
    tp_one(a0.z, a1.z, b0.z, b1.z, q, qinv, o0.z, o1.z, o2.z);
    tp_one(a0.w, a1.w, b0.w, b1.w, q, qinv, o0.w, o1.w, o2.w);
    st4(ok, o0);
    st4(ok + g.plane, o1);
    st4(ok + 2 * g.plane, o2);
  } else {
    tp_one(ldg(ak), ldg(ak + g.plane), ldg(bk), ldg(bk + g.plane), q, qinv, ok[0], ok[g.plane], ok[2 * g.plane]);
  }
}

// ---- automorphism: out[r][k] = x[r][src(k)] ------------------------------------------

struct AutArgs {
  const int32_t* x;
  int32_t* out;
  int64_t total;  // rows * n
  int log_n;
  uint32_t galois;
};

template <bool VEC>
FT_HD void aut_thread(const AutArgs& g, int64_t t) {
  const int64_t i = VEC ? 4 * t : t;
  if (i >= g.total) return;
  const int64_t n = int64_t(1) << g.log_n;
  const int64_t base = (i >> g.log_n) << g.log_n;
  const uint32_t k = static_cast<uint32_t>(i - base);
  const int32_t* xr = g.x + base;
  if (VEC) {
    int4 v;
    v.x = ldg(xr + automorphism_source(k, g.galois, g.log_n));
    v.y = ldg(xr + automorphism_source(k + 1, g.galois, g.log_n));
    v.z = ldg(xr + automorphism_source(k + 2, g.galois, g.log_n));
    v.w = ldg(xr + automorphism_source(k + 3, g.galois, g.log_n));
    st4(g.out + i, v);
  } else {
    g.out[i] = ldg(xr + automorphism_source(k, g.galois, g.log_n));
  }
  (void)n;
}

// ---- keyswitch inner product ---------------------------------------------------------

struct KsArgs {
  const int32_t* d;      // (beta, L, n)
  const int32_t* key_q;  // (digits, 2, Lq_key, n)
  const int32_t* key_p;  // (digits, 2, K, n)
  int32_t* out;          // (2, L, n)
  const int32_t* mod;
  int64_t n;
  LimbOf limb;           // limb of an index into (L, n); L here is the row count
  int beta, L, Lq, K, Lq_key, q_start, digit_start;
};

template <bool VEC>
FT_HD void ks_thread(const KsArgs& g, int64_t t) {
  const int64_t it = VEC ? 4 * t : t;
  if (it >= static_cast<int64_t>(g.L) * g.n) return;
  const int64_t lrow = g.limb.row(it);
  const int l = static_cast<int>(lrow);
  const int64_t c = it - lrow * g.n;
  const int32_t q = ldg(g.mod + 2 * l), qinv = ldg(g.mod + 2 * l + 1);
  const bool in_q = l < g.Lq;
  const int64_t stride = (in_q ? static_cast<int64_t>(g.Lq_key) : g.K) * g.n;
  int32_t acc0[4] = {0, 0, 0, 0}, acc1[4] = {0, 0, 0, 0};
  for (int j = 0; j < g.beta; ++j) {
    const int64_t dig = g.digit_start + j;
    const int32_t* dv = g.d + (static_cast<int64_t>(j) * g.L + l) * g.n + c;
    const int32_t* k0 = in_q ? g.key_q + ((dig * 2) * g.Lq_key + g.q_start + l) * g.n + c
                             : g.key_p + ((dig * 2) * g.K + (l - g.Lq)) * g.n + c;
    if (VEC) {
      const int4 d4 = ldg4(dv), a4 = ldg4(k0), b4 = ldg4(k0 + stride);
      const int32_t dd[4] = {d4.x, d4.y, d4.z, d4.w}, ka[4] = {a4.x, a4.y, a4.z, a4.w},
                    kb[4] = {b4.x, b4.y, b4.z, b4.w};
#pragma unroll
      for (int m = 0; m < 4; ++m) {
        acc0[m] = add_mod(acc0[m], mont_mul(dd[m], ka[m], q, qinv), q);
        acc1[m] = add_mod(acc1[m], mont_mul(dd[m], kb[m], q, qinv), q);
      }
    } else {
      const int32_t dd = ldg(dv);
      acc0[0] = add_mod(acc0[0], mont_mul(dd, ldg(k0), q, qinv), q);
      acc1[0] = add_mod(acc1[0], mont_mul(dd, ldg(k0 + stride), q, qinv), q);
    }
  }
  int32_t* o0 = g.out + static_cast<int64_t>(l) * g.n + c;
  int32_t* o1 = g.out + (static_cast<int64_t>(g.L) + l) * g.n + c;
  if (VEC) {
    st4(o0, make_int4(acc0[0], acc0[1], acc0[2], acc0[3]));
    st4(o1, make_int4(acc1[0], acc1[1], acc1[2], acc1[3]));
  } else {
    *o0 = acc0[0];
    *o1 = acc1[0];
  }
}

// ---- to_rns: int64 (rows, n) -> (rows, L, n) Montgomery form --------------------------

struct RnsArgs {
  const int64_t* x;
  int32_t* out;
  const int32_t* mod;
  const int32_t* r2;
  int64_t total;  // rows * n
  LimbOf rowof;   // row of an element of x (L unused)
  int L;
};

// v * 2^32 mod q, canonical: v = h * 2^32 + lo, and h * 2^32 = smr(h * r2) (mod q).
FT_HD int32_t to_mont(int64_t v, int32_t q, int32_t qinv, int32_t r2) {
  const int32_t h = static_cast<int32_t>(v >> 32);
  const uint32_t lo = static_cast<uint32_t>(v);
  const uint32_t uq = static_cast<uint32_t>(q);
  const uint32_t a = static_cast<uint32_t>(canon(smr(static_cast<int64_t>(h) * r2, q, qinv), q));
  uint32_t s = a + lo % uq;  // < 2q < 2^32
  if (s >= uq) s -= uq;
  return mont_mul(static_cast<int32_t>(s), r2, q, qinv);
}

FT_HD void rns_thread(const RnsArgs& g, int64_t t) {
  if (t >= g.total) return;
  const int64_t row = g.rowof.row(t), c = t - row * g.rowof.n;
  const int64_t v = g.x[t];
  int32_t* o = g.out + row * g.L * g.rowof.n + c;
  for (int l = 0; l < g.L; ++l) o[l * g.rowof.n] = to_mont(v, ldg(g.mod + 2 * l), ldg(g.mod + 2 * l + 1), ldg(g.r2 + l));
}

// ---- crt_digits: (rows, L, n) -> centred mixed-radix digits ---------------------------

struct CrtArgs {
  const int32_t* x;
  int32_t* out;
  const int32_t* mod;
  const int32_t* garner;  // (L, L)
  int64_t total;          // rows * n
  LimbOf rowof;
  int L;
};

FT_HD void crt_thread(const CrtArgs& g, int64_t t) {
  if (t >= g.total) return;
  const int64_t n = g.rowof.n, row = g.rowof.row(t), c = t - row * n;
  const int32_t* xr = g.x + row * g.L * n + c;
  int32_t* orow = g.out + row * g.L * n + c;
  int32_t v[256];
  for (int k = 0; k < g.L; ++k) {
    const int32_t q = ldg(g.mod + 2 * k), qinv = ldg(g.mod + 2 * k + 1);
    const int32_t* gk = g.garner + static_cast<int64_t>(k) * g.L;
    int32_t r = xr[k * n];
    for (int i = 0; i < k; ++i) r = sub_mod(r, mont_mul(v[i], ldg(gk + i), q, qinv), q);
    v[k] = centre(mont_mul(r, ldg(gk + k), q, qinv), q);
    orow[k * n] = v[k];
  }
}

}  // namespace fhetorch::cuda::ew_detail
