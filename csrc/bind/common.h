// Argument checks shared by the CPU and CUDA bindings: each check_<op> validates the
// arguments of one op exactly as schema.cpp specifies and returns its geometry, so both
// bindings accept and reject the same inputs.
#pragma once
#include <torch/library.h>
#include <ATen/ATen.h>

#include "../hoisted_mac.h"

#include <algorithm>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace fhetorch::bind {

inline void check_residues(const at::Tensor& x, const char* op, const char* name) {
  TORCH_CHECK(x.scalar_type() == at::kInt, "fhetorch.", op, ": ", name, " must be int32, got ", x.scalar_type());
  TORCH_CHECK(x.is_contiguous(), "fhetorch.", op, ": ", name, " must be contiguous");
}

inline void check_mod(const at::Tensor& mod, int64_t L, const char* op) {
  check_residues(mod, op, "mod");
  TORCH_CHECK(mod.dim() == 2 && mod.size(0) == L && mod.size(1) == 2, "fhetorch.", op,
              ": mod must be (L, 2) with L = ", L, ", got ", mod.sizes());
}

inline void check_same_device(const at::Tensor& a, const at::Tensor& b, const char* op) {
  TORCH_CHECK(a.device() == b.device(), "fhetorch.", op, ": tensors on ", a.device(), " and ", b.device());
}

// Every tensor argument of an op must live on the device of its first one. (On CPU this
// always holds: a CUDA tensor among the arguments dispatches to the CUDA kernel.)
inline void check_devices(const char* op, std::initializer_list<const at::Tensor*> ts) {
  const at::Tensor* first = nullptr;
  for (const at::Tensor* t : ts) {
    if (!t) continue;
    if (!first) first = t;
    else check_same_device(*first, *t, op);
  }
}

// Error paths are out of line (csrc/bind/common.cpp, one definition for both bindings)
// and build their message as one std::string: on the H100 test machine (torch 2.11) the
// former inline TORCH_CHECK here, with mixed const char* / int64 message arguments, killed
// the interpreter with SIGSEGV instead of raising, on the CPU path as well.
[[noreturn]] void fail(const std::string& message);

// log2(n) for a power of two n >= 2; raises RuntimeError "fhetorch.<op>: N must be a power
// of two, got <n>" otherwise.
int log2_exact(int64_t n, const char* op);

// b is broadcast over the leading dimensions of a.
inline void check_broadcast(const at::Tensor& a, const at::Tensor& b, const char* op) {
  check_residues(b, op, "b");
  check_same_device(a, b, op);
  TORCH_CHECK(b.dim() <= a.dim() && b.numel() > 0 && a.numel() % b.numel() == 0 &&
                  a.sizes().slice(a.dim() - b.dim()) == b.sizes(),
              "fhetorch.", op, ": b of shape ", b.sizes(), " does not broadcast to ", a.sizes());
}

inline int64_t limbs_of(const at::Tensor& x) { return x.dim() >= 2 ? x.size(-2) : 1; }

// ---- per-op checks --------------------------------------------------------------------

// NTT tables with a row map: without `rows`, table (count, N) and limb i uses row i; with
// `rows` (count entries, at most kMaxTableRows), any (R, N) table, limb i using row rows[i]
// (so the ring's full tables serve every limb subset without copies). Returns the map
// (empty: row i). The CUDA kernels take it by value, as int16 (csrc/cuda/ntt_core.cuh TwRows).
constexpr int64_t kMaxTableRows = 256, kMaxTableRow = 32767;
inline std::vector<int> check_table_rows(const char* op, const char* name, const at::Tensor& table,
                                         at::OptionalIntArrayRef rows, int64_t count, int64_t n) {
  std::vector<int> out;
  if (!rows.has_value()) {
    TORCH_CHECK(table.sizes() == at::IntArrayRef({count, n}), "fhetorch.", op, ": ", name, " must be (", count,
                ", N)");
    return out;
  }
  TORCH_CHECK(table.dim() == 2 && table.size(1) == n && table.size(0) >= 1 && table.size(0) <= kMaxTableRow + 1,
              "fhetorch.", op, ": ", name, " must be (R, N) with R <= ", kMaxTableRow + 1);
  TORCH_CHECK(static_cast<int64_t>(rows->size()) == count && count <= kMaxTableRows, "fhetorch.", op, ": ", name,
              "'s rows must list one table row per limb (", count, "), at most ", kMaxTableRows);
  for (int64_t v : *rows) {
    TORCH_CHECK(v >= 0 && v < table.size(0), "fhetorch.", op, ": ", name, " row ", v, " outside [0, ",
                table.size(0), ")");
    out.push_back(static_cast<int>(v));
  }
  return out;
}

struct NttGeom {
  int64_t L, n, rows;
  int log_n;
  std::vector<int> psi_rows;  // table row of each limb (empty: row l)
};

inline NttGeom check_ntt(const at::Tensor& x, const at::Tensor& mod, const at::Tensor& psi,
                         at::OptionalIntArrayRef psi_rows) {
  check_residues(x, "ntt", "x");
  const int64_t L = limbs_of(x), n = x.size(-1);
  const int log_n = log2_exact(n, "ntt");
  check_mod(mod, L, "ntt");
  check_residues(psi, "ntt", "psi");
  std::vector<int> rows = check_table_rows("ntt", "psi", psi, psi_rows, L, n);
  check_devices("ntt", {&x, &mod, &psi});
  return {L, n, x.numel() / n, log_n, std::move(rows)};
}

inline NttGeom check_intt(const at::Tensor& x, const at::Tensor& mod, const at::Tensor& psi_inv,
                          const at::Tensor& post, at::OptionalIntArrayRef psi_rows) {
  check_residues(x, "intt", "x");
  const int64_t L = limbs_of(x), n = x.size(-1);
  const int log_n = log2_exact(n, "intt");
  check_mod(mod, L, "intt");
  check_residues(psi_inv, "intt", "psi_inv");
  check_residues(post, "intt", "post");
  std::vector<int> rows = check_table_rows("intt", "psi_inv", psi_inv, psi_rows, L, n);
  TORCH_CHECK(post.numel() == L, "fhetorch.intt: post must have L entries");
  check_devices("intt", {&x, &mod, &psi_inv, &post});
  return {L, n, x.numel() / n, log_n, std::move(rows)};
}

struct BconvGeom {
  int64_t La, Lb, n, batch;
  std::vector<int64_t> out_shape;
};

inline BconvGeom check_bconv(const at::Tensor& x, const at::Tensor& mod_in, const at::Tensor& mod_out,
                             const at::Tensor& mat) {
  check_residues(x, "bconv", "x");
  const int64_t La = limbs_of(x), n = x.size(-1), Lb = mod_out.size(0);
  TORCH_CHECK(La <= 256, "fhetorch.bconv: at most 256 input limbs");
  check_mod(mod_in, La, "bconv");
  check_mod(mod_out, Lb, "bconv");
  check_residues(mat, "bconv", "mat");
  TORCH_CHECK(mat.sizes() == at::IntArrayRef({Lb, La}), "fhetorch.bconv: mat must be (Lb, La)");
  check_devices("bconv", {&x, &mod_in, &mod_out, &mat});
  auto shape = x.sizes().vec();
  shape[shape.size() - 2] = Lb;
  return {La, Lb, n, La * n > 0 ? x.numel() / (La * n) : 0, std::move(shape)};
}

struct EwGeom {
  int64_t L, n;
};

// add / sub / mul: a (..., L, N), b broadcast over a's leading dimensions.
inline EwGeom check_binary(const char* name, const at::Tensor& a, const at::Tensor& b, const at::Tensor& mod) {
  check_residues(a, name, "a");
  check_broadcast(a, b, name);
  const int64_t L = limbs_of(a), n = a.size(-1);
  check_mod(mod, L, name);
  check_devices(name, {&a, &b, &mod});
  return {L, n};
}

inline EwGeom check_neg(const at::Tensor& a, const at::Tensor& mod) {
  check_residues(a, "neg", "a");
  const int64_t L = limbs_of(a), n = a.size(-1);
  check_mod(mod, L, "neg");
  check_devices("neg", {&a, &mod});
  return {L, n};
}

// axpby (b, cb given) and mul_const (b = cb = nullptr).
inline EwGeom check_axpby(const char* name, const at::Tensor& a, const at::Tensor& ca, const at::Tensor* b,
                          const at::Tensor* cb, const at::Tensor& mod) {
  check_residues(a, name, "a");
  const int64_t L = limbs_of(a), n = a.size(-1);
  check_mod(mod, L, name);
  check_residues(ca, name, "ca");
  TORCH_CHECK(ca.numel() == L, "fhetorch.", name, ": constants must have L entries");
  if (b) {
    check_broadcast(a, *b, name);
    check_residues(*cb, name, "cb");
    TORCH_CHECK(cb->numel() == L, "fhetorch.", name, ": constants must have L entries");
  }
  check_devices(name, {&a, &ca, b, cb, &mod});
  return {L, n};
}

struct TensorProductGeom {
  int64_t L, n, plane, batch;
  bool b_broadcast;
  std::vector<int64_t> out_shape;
};

inline TensorProductGeom check_tensor_product(const at::Tensor& a, const at::Tensor& b, const at::Tensor& mod) {
  check_residues(a, "tensor_product", "a");
  check_broadcast(a, b, "tensor_product");
  TORCH_CHECK(a.dim() >= 3 && a.size(-3) == 2, "fhetorch.tensor_product: a must be (..., 2, L, N)");
  const int64_t L = a.size(-2), n = a.size(-1), plane = L * n, batch = plane > 0 ? a.numel() / (2 * plane) : 0;
  const bool bb = b.numel() != a.numel();
  TORCH_CHECK(!bb || b.numel() == 2 * plane, "fhetorch.tensor_product: b must be a's shape or (2, L, N)");
  check_mod(mod, L, "tensor_product");
  check_devices("tensor_product", {&a, &b, &mod});
  auto shape = a.sizes().vec();
  shape[shape.size() - 3] = 3;
  return {L, n, plane, batch, bb, std::move(shape)};
}

// Returns log2(N).
inline int check_automorphism(const at::Tensor& x, int64_t galois) {
  check_residues(x, "automorphism", "x");
  const int64_t n = x.size(-1);
  const int log_n = log2_exact(n, "automorphism");
  TORCH_CHECK(galois % 2 == 1 && galois > 0 && galois < 2 * n, "fhetorch.automorphism: galois element must be odd in (0, 2N)");
  return log_n;
}

struct KeySwitchGeom {
  int64_t beta, L, n, K, Lq, Lq_key;
};

inline KeySwitchGeom check_keyswitch_inner(const at::Tensor& d, const at::Tensor& key_q, const at::Tensor& key_p,
                                           int64_t q_start, int64_t digit_start, const at::Tensor& mod) {
  check_residues(d, "keyswitch_inner", "d");
  check_residues(key_q, "keyswitch_inner", "key_q");
  check_residues(key_p, "keyswitch_inner", "key_p");
  TORCH_CHECK(d.dim() == 3 && key_q.dim() == 4 && key_p.dim() == 4 && key_q.size(1) == 2 && key_p.size(1) == 2,
              "fhetorch.keyswitch_inner: d must be (beta, L, N) and keys (digits, 2, limbs, N)");
  const int64_t beta = d.size(0), L = d.size(1), n = d.size(2), K = key_p.size(2), Lq = L - K, Lq_key = key_q.size(2);
  TORCH_CHECK(Lq >= 0 && q_start >= 0 && q_start + Lq <= Lq_key && digit_start >= 0 &&
                  digit_start + beta <= key_q.size(0) && key_p.size(0) == key_q.size(0) && key_q.size(3) == n &&
                  key_p.size(3) == n,
              "fhetorch.keyswitch_inner: key and digit shapes do not match");
  check_mod(mod, L, "keyswitch_inner");
  check_devices("keyswitch_inner", {&d, &key_q, &key_p, &mod});
  return {beta, L, n, K, Lq, Lq_key};
}

// ---- hoisted_mac -----------------------------------------------------------------------

// Checks hoisted_mac's arguments and fills the kernel's tables (csrc/hoisted_mac.h); the
// caller sets args.out.
inline MacArgs check_hoisted_mac(const at::Tensor& d, const at::Tensor& c, at::TensorList keys_q,
                                 at::TensorList keys_p, at::IntArrayRef galois, int64_t q_start, int64_t digit_start,
                                 const at::Tensor& c_p, at::TensorList pts, at::IntArrayRef pt_baby,
                                 at::IntArrayRef pt_giant, int64_t giants, const at::Tensor& mod) {
  const char* op = "hoisted_mac";
  check_residues(d, op, "d");
  check_residues(c, op, "c");
  check_residues(c_p, op, "c_p");
  TORCH_CHECK(d.dim() == 3 && c.dim() == 3 && c.size(0) == 2 && c.size(2) == d.size(2),
              "fhetorch.hoisted_mac: d must be (beta, L + K, N) and c (2, L, N)");
  const int64_t beta = d.size(0), Lext = d.size(1), n = d.size(2), L = c.size(1), K = Lext - L;
  const int log_n = log2_exact(n, op);
  TORCH_CHECK(K >= 0 && beta >= 1 && c_p.numel() == L, "fhetorch.hoisted_mac: c_p must hold L values and d at least c's limbs");
  check_mod(mod, Lext, op);
  const int64_t babies = static_cast<int64_t>(galois.size());
  TORCH_CHECK(babies >= 1 && babies <= kMacBabies && static_cast<int64_t>(keys_q.size()) == babies &&
                  static_cast<int64_t>(keys_p.size()) == babies,
              "fhetorch.hoisted_mac: 1 to ", kMacBabies, " baby steps, one key pair (keys_q, keys_p) each");
  TORCH_CHECK(giants >= 1 && giants <= kMacGiants, "fhetorch.hoisted_mac: giants must be in [1, ", kMacGiants, "]");
  TORCH_CHECK(pts.size() == pt_baby.size() && pts.size() == pt_giant.size(),
              "fhetorch.hoisted_mac: pts, pt_baby and pt_giant must have one entry per diagonal");
  check_devices(op, {&d, &c, &c_p, &mod});
  TORCH_CHECK(d.numel() < (int64_t(1) << 31) && giants * 2 * Lext * n < (int64_t(1) << 31),
              "fhetorch.hoisted_mac: d and the output must hold fewer than 2^31 values");
  MacArgs a{};
  a.d = d.data_ptr<int32_t>();
  a.c = c.data_ptr<int32_t>();
  a.c_p = c_p.data_ptr<int32_t>();
  a.mod = mod.data_ptr<int32_t>();
  a.n = n;
  a.log_n = log_n;
  a.beta = static_cast<int>(beta);
  a.L = static_cast<int>(L);
  a.Lext = static_cast<int>(Lext);
  a.q_start = static_cast<int>(q_start);
  a.digit_start = static_cast<int>(digit_start);
  a.babies = static_cast<int>(babies);
  a.giants = static_cast<int>(giants);
  for (int64_t b = 0; b < babies; ++b) {
    const int64_t gal = galois[b];
    TORCH_CHECK(gal > 0 && gal < 2 * n && gal % 2 == 1, "fhetorch.hoisted_mac: galois elements must be odd, in (0, 2N)");
    a.galois[b] = static_cast<uint32_t>(gal);
    if (gal == 1) continue;
    const at::Tensor &kq = keys_q[b], &kp = keys_p[b];
    check_residues(kq, op, "keys_q");
    check_residues(kp, op, "keys_p");
    check_devices(op, {&d, &kq, &kp});
    TORCH_CHECK(kq.dim() == 4 && kp.dim() == 4 && kq.size(1) == 2 && kp.size(1) == 2 && kp.size(2) == K &&
                    kq.size(3) == n && kp.size(3) == n && kp.size(0) == kq.size(0) &&
                    digit_start >= 0 && digit_start + beta <= kq.size(0) && q_start >= 0 &&
                    q_start + L <= kq.size(2),
                "fhetorch.hoisted_mac: key ", b, " does not cover the digits and limbs of d");
    TORCH_CHECK(kq.numel() < (int64_t(1) << 31), "fhetorch.hoisted_mac: keys must hold fewer than 2^31 values");
    a.key_q[b] = kq.data_ptr<int32_t>();
    a.key_p[b] = kp.data_ptr<int32_t>();
    a.lq_key[b] = static_cast<int>(kq.size(2));
  }
  for (size_t k = 0; k < pts.size(); ++k) {
    const int64_t b = pt_baby[k], g = pt_giant[k];
    TORCH_CHECK(b >= 0 && b < babies && g >= 0 && g < giants, "fhetorch.hoisted_mac: diagonal ", k,
                " names baby ", b, " and giant ", g, " out of range");
    TORCH_CHECK(a.pt[b][g] == nullptr, "fhetorch.hoisted_mac: two diagonals for baby ", b, ", giant ", g);
    check_residues(pts[k], op, "pts");
    check_devices(op, {&d, &pts[k]});
    TORCH_CHECK(pts[k].dim() == 2 && pts[k].size(0) == Lext && pts[k].size(1) == n,
                "fhetorch.hoisted_mac: each diagonal must be (L + K, N)");
    a.pt[b][g] = pts[k].data_ptr<int32_t>();
  }
  return a;
}

// ---- fused key switching ---------------------------------------------------------------

constexpr int64_t kMaxDigits = 64;       // mod_up: beta <= 64
constexpr int64_t kMaxSwitchRows = 256;  // switch_modulus: D, Ld <= 256
constexpr int64_t kMaxSwitchSrc = 32767; // switch_modulus: Ls (row indices fit int16)

struct ModUpGeom {
  int64_t L, Lext, K, n, beta, alpha_max;
  int log_n;
  std::vector<int> lo;  // beta + 1 digit bounds
  std::vector<int> psi_rows;  // table row of each ext limb (empty: row i)
};

inline ModUpGeom check_mod_up(const char* op, const at::Tensor& a, const at::Tensor& pre, const at::Tensor& mod_ext,
                              const at::Tensor& psi_ext, const at::Tensor& psi_inv_ext, const at::Tensor& mats,
                              at::IntArrayRef bounds, at::OptionalIntArrayRef psi_rows) {
  for (auto [t, name] : {std::pair<const at::Tensor*, const char*>{&a, "a"}, {&pre, "pre"}, {&mod_ext, "mod_ext"},
                         {&psi_ext, "psi_ext"}, {&psi_inv_ext, "psi_inv_ext"}, {&mats, "mats"}})
    check_residues(*t, op, name);
  TORCH_CHECK(a.dim() == 2, "fhetorch.", op, ": a must be (L, N)");
  ModUpGeom g;
  g.L = a.size(0);
  g.n = a.size(1);
  g.log_n = log2_exact(g.n, op);
  TORCH_CHECK(mod_ext.dim() == 2 && mod_ext.size(1) == 2 && mod_ext.size(0) >= g.L && g.L >= 1,
              "fhetorch.", op, ": mod_ext must be (L + K, 2) with L >= 1");
  g.Lext = mod_ext.size(0);
  g.K = g.Lext - g.L;
  g.psi_rows = check_table_rows(op, "psi_ext", psi_ext, psi_rows, g.Lext, g.n);
  TORCH_CHECK(psi_inv_ext.sizes() == psi_ext.sizes(), "fhetorch.", op, ": psi_inv_ext must have psi_ext's shape");
  TORCH_CHECK(pre.numel() == g.L, "fhetorch.", op, ": pre must have L entries");
  const int64_t nb = static_cast<int64_t>(bounds.size());
  TORCH_CHECK(nb >= 2 && nb - 1 <= kMaxDigits, "fhetorch.", op, ": bounds must list 2 to ", kMaxDigits + 1, " values");
  g.beta = nb - 1;
  TORCH_CHECK(bounds[0] == 0 && bounds[nb - 1] == g.L, "fhetorch.", op, ": bounds must run from 0 to L");
  int64_t widest = 0;
  for (int64_t j = 0; j < g.beta; ++j) {
    TORCH_CHECK(bounds[j] < bounds[j + 1], "fhetorch.", op, ": bounds must increase strictly");
    widest = std::max<int64_t>(widest, bounds[j + 1] - bounds[j]);
  }
  for (int64_t v : bounds) g.lo.push_back(static_cast<int>(v));
  TORCH_CHECK(mats.dim() == 3 && mats.size(0) == g.beta && mats.size(1) == g.Lext && mats.size(2) >= widest &&
                  mats.size(2) <= 256,
              "fhetorch.", op, ": mats must be (beta, L + K, alpha_max) with every digit's size <= alpha_max <= 256");
  g.alpha_max = mats.size(2);
  check_devices(op, {&a, &pre, &mod_ext, &psi_ext, &psi_inv_ext, &mats});
  return g;
}

struct ModUpKsGeom {
  ModUpGeom m;
  int64_t Lq_key, La;  // La: limbs of the addend (0: none)
};

inline ModUpKsGeom check_mod_up_keyswitch(const at::Tensor& a, const at::Tensor& pre, const at::Tensor& mod_ext,
                                          const at::Tensor& psi_ext, const at::Tensor& psi_inv_ext,
                                          const at::Tensor& mats, at::IntArrayRef bounds, const at::Tensor& key_q,
                                          const at::Tensor& key_p, int64_t q_start, int64_t digit_start,
                                          const std::optional<at::Tensor>& addend,
                                          const std::optional<at::Tensor>& c_add,
                                          const std::optional<at::Tensor>& b, at::OptionalIntArrayRef psi_rows) {
  const char* op = "mod_up_keyswitch";
  if (b) {
    check_residues(a, op, "a");
    check_residues(*b, op, "b");
    TORCH_CHECK(a.dim() == 3 && a.size(0) == 2 && b->sizes() == a.sizes(), "fhetorch.", op,
                ": with b, a and b must be ciphertexts (2, L, N) of one shape");
    TORCH_CHECK(!addend.has_value() && c_add.has_value(), "fhetorch.", op,
                ": with b, the addend is the tensor product's (d0, d1): pass c_add and no addend");
    check_devices(op, {&a, &*b});
  }
  const at::Tensor a1 = b ? a.select(0, 1) : a;
  ModUpKsGeom g{check_mod_up(op, a1, pre, mod_ext, psi_ext, psi_inv_ext, mats, bounds, psi_rows), 0, 0};
  const ModUpGeom& m = g.m;
  if (b) {
    check_residues(*c_add, op, "c_add");
    TORCH_CHECK(c_add->numel() == m.L, "fhetorch.", op, ": with b, c_add must have L entries");
    check_devices(op, {&a, &*c_add});
    g.La = m.L;
  }
  check_residues(key_q, op, "key_q");
  check_residues(key_p, op, "key_p");
  TORCH_CHECK(key_q.dim() == 4 && key_p.dim() == 4 && key_q.size(1) == 2 && key_p.size(1) == 2 &&
                  key_p.size(0) == key_q.size(0) && key_q.size(3) == m.n && key_p.size(3) == m.n &&
                  key_p.size(2) == m.K,
              "fhetorch.", op, ": keys must be (digits, 2, limbs, N) with K = L + K - L special limbs in key_p");
  g.Lq_key = key_q.size(2);
  TORCH_CHECK(q_start >= 0 && q_start + m.L <= g.Lq_key && digit_start >= 0 && digit_start + m.beta <= key_q.size(0),
              "fhetorch.", op, ": q_start / digit_start out of the key's range");
  TORCH_CHECK(b.has_value() || addend.has_value() == c_add.has_value(), "fhetorch.", op,
              ": addend and c_add go together");
  if (addend) {
    check_residues(*addend, op, "addend");
    check_residues(*c_add, op, "c_add");
    TORCH_CHECK(addend->dim() == 3 && addend->size(0) == 2 && addend->size(1) <= m.Lext && addend->size(2) == m.n,
                "fhetorch.", op, ": addend must be (2, La, N) with La <= L + K");
    g.La = addend->size(1);
    TORCH_CHECK(c_add->numel() == g.La, "fhetorch.", op, ": c_add must have La entries");
    check_devices(op, {&a, &*addend, &*c_add});
  }
  check_devices(op, {&a, &key_q, &key_p});
  return g;
}

struct SwitchGeom {
  int64_t B, Ls, D, Ld, n, Ba;  // Ba: polynomials with an addend (0: none)
  int log_n;
  std::vector<int> drop, keep;
  std::vector<int> psi_inv_drop_rows, psi_dst_rows;  // table rows (empty: row i)
  std::vector<int64_t> out_shape;
};

inline SwitchGeom check_switch_modulus(const at::Tensor& x, at::IntArrayRef drop_rows, at::IntArrayRef keep_rows,
                                       const at::Tensor& pre, const at::Tensor& mod_drop,
                                       const at::Tensor& psi_inv_drop, const at::Tensor& mod_dst,
                                       const at::Tensor& psi_dst, const at::Tensor& mat, const at::Tensor& c_keep,
                                       const at::Tensor& c_sub, const std::optional<at::Tensor>& addend,
                                       at::OptionalIntArrayRef psi_inv_drop_rows,
                                       at::OptionalIntArrayRef psi_dst_rows) {
  const char* op = "switch_modulus";
  for (auto [t, name] : {std::pair<const at::Tensor*, const char*>{&x, "x"}, {&pre, "pre"}, {&mod_drop, "mod_drop"},
                         {&psi_inv_drop, "psi_inv_drop"}, {&mod_dst, "mod_dst"}, {&psi_dst, "psi_dst"},
                         {&mat, "mat"}, {&c_keep, "c_keep"}, {&c_sub, "c_sub"}})
    check_residues(*t, op, name);
  TORCH_CHECK(x.dim() >= 2, "fhetorch.", op, ": x must be (..., Ls, N)");
  SwitchGeom g;
  g.Ls = x.size(-2);
  g.n = x.size(-1);
  g.log_n = log2_exact(g.n, op);
  g.B = g.Ls > 0 ? x.numel() / (g.Ls * g.n) : 0;
  g.D = static_cast<int64_t>(drop_rows.size());
  g.Ld = static_cast<int64_t>(keep_rows.size());
  TORCH_CHECK(g.Ls >= 1 && g.Ls <= kMaxSwitchSrc, "fhetorch.", op, ": Ls must be in [1, ", kMaxSwitchSrc, "]");
  TORCH_CHECK(g.D >= 1 && g.D <= kMaxSwitchRows && g.Ld >= 1 && g.Ld <= kMaxSwitchRows, "fhetorch.", op,
              ": drop_rows and keep_rows must have 1 to ", kMaxSwitchRows, " entries");
  for (int64_t v : drop_rows) {
    TORCH_CHECK(v >= 0 && v < g.Ls, "fhetorch.", op, ": drop row ", v, " outside [0, Ls)");
    g.drop.push_back(static_cast<int>(v));
  }
  for (int64_t v : keep_rows) {
    TORCH_CHECK(v >= -1 && v < g.Ls, "fhetorch.", op, ": keep row ", v, " outside [-1, Ls)");
    g.keep.push_back(static_cast<int>(v));
  }
  TORCH_CHECK(pre.numel() == g.D, "fhetorch.", op, ": pre must have D entries");
  check_mod(mod_drop, g.D, op);
  check_mod(mod_dst, g.Ld, op);
  g.psi_inv_drop_rows = check_table_rows(op, "psi_inv_drop", psi_inv_drop, psi_inv_drop_rows, g.D, g.n);
  g.psi_dst_rows = check_table_rows(op, "psi_dst", psi_dst, psi_dst_rows, g.Ld, g.n);
  TORCH_CHECK(mat.sizes() == at::IntArrayRef({g.Ld, g.D}), "fhetorch.", op, ": mat must be (Ld, D)");
  TORCH_CHECK(c_keep.numel() == g.Ld && c_sub.numel() == g.Ld, "fhetorch.", op, ": c_keep and c_sub must have Ld entries");
  g.Ba = 0;
  if (addend) {
    check_residues(*addend, op, "addend");
    const bool two = addend->dim() == 2, three = addend->dim() == 3;
    TORCH_CHECK((two || three) && addend->size(-2) == g.Ld && addend->size(-1) == g.n &&
                    (two || addend->size(0) <= g.B),
                "fhetorch.", op, ": addend must be (Ld, N) or (Ba, Ld, N) with Ba <= the polynomials of x");
    g.Ba = two ? 1 : addend->size(0);
    TORCH_CHECK(g.Ba <= g.B, "fhetorch.", op, ": addend has more polynomials than x");
    check_devices(op, {&x, &*addend});
  }
  check_devices(op, {&x, &pre, &mod_drop, &psi_inv_drop, &mod_dst, &psi_dst, &mat, &c_keep, &c_sub});
  g.out_shape = x.sizes().vec();
  g.out_shape[g.out_shape.size() - 2] = g.Ld;
  return g;
}

struct ToRnsGeom {
  int64_t L, n;
  std::vector<int64_t> out_shape;
};

inline ToRnsGeom check_to_rns(const at::Tensor& x, const at::Tensor& mod, const at::Tensor& r2) {
  TORCH_CHECK(x.scalar_type() == at::kLong && x.is_contiguous(), "fhetorch.to_rns: x must be contiguous int64");
  const int64_t L = mod.size(0), n = x.size(-1);
  check_mod(mod, L, "to_rns");
  check_residues(r2, "to_rns", "r2");
  check_devices("to_rns", {&x, &mod, &r2});
  auto shape = x.sizes().vec();
  shape.insert(shape.end() - 1, L);
  return {L, n, std::move(shape)};
}

inline EwGeom check_crt_digits(const at::Tensor& x, const at::Tensor& mod, const at::Tensor& garner) {
  check_residues(x, "crt_digits", "x");
  const int64_t L = limbs_of(x), n = x.size(-1);
  TORCH_CHECK(L <= 256, "fhetorch.crt_digits: at most 256 limbs");
  check_mod(mod, L, "crt_digits");
  check_residues(garner, "crt_digits", "garner");
  TORCH_CHECK(garner.sizes() == at::IntArrayRef({L, L}), "fhetorch.crt_digits: garner must be (L, L)");
  check_devices("crt_digits", {&x, &mod, &garner});
  return {L, n};
}

// The 8 key words of a sampler, as raw words (on the key's device).
inline const uint32_t* check_key(const at::Tensor& key, const char* op) {
  check_residues(key, op, "key");
  TORCH_CHECK(key.numel() == 8, "fhetorch.", op, ": key must have 8 int32 words");
  return reinterpret_cast<const uint32_t*>(key.data_ptr<int32_t>());
}

// Returns L.
inline int64_t check_sample_uniform(const at::Tensor& key, const at::Tensor& mod) {
  const int64_t L = mod.size(0);
  check_mod(mod, L, "sample_uniform");
  check_devices("sample_uniform", {&key, &mod});
  return L;
}

}  // namespace fhetorch::bind
