// Argument checks shared by the CPU and CUDA bindings: each check_<op> validates the
// arguments of one op exactly as schema.cpp specifies and returns its geometry (or the
// kernel's argument struct), so both devices accept and refuse the same inputs with the
// same messages.
#pragma once
#include <torch/library.h>
#include <ATen/ATen.h>

#include "../elementwise.h"
#include "../hoisted_mac.h"
#include "../keyswitch.h"

#include <algorithm>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace fhetorch::bind {

using at::Tensor;

// Error messages are built here as one std::string, numbers by std::to_string, and raised
// out of line (fail, csrc/bind/common.cpp): on the H100 test machine (torch 2.11) a message
// that streamed an integer or a shape through TORCH_CHECK's ostream killed the interpreter
// with SIGSEGV instead of raising, on the CPU path as well (tests/_ops/test_cuda_parity.py,
// test_bad_shapes_are_errors). FT_CHECK(cond, parts...) is the one check of the bindings.
[[noreturn]] void fail(const std::string& message);

namespace text {
inline void put(std::string& s, const char* v) { s += v; }
inline void put(std::string& s, const std::string& v) { s += v; }
inline void put(std::string& s, c10::ScalarType v) { s += c10::toString(v); }
inline void put(std::string& s, const c10::Device& v) { s += v.str(); }
template <class T, std::enable_if_t<std::is_arithmetic_v<T>, int> = 0>
inline void put(std::string& s, T v) {
  s += std::to_string(v);
}
inline void put(std::string& s, c10::IntArrayRef v) {
  s += '[';
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  s += ']';
}
template <class... A>
std::string cat(const A&... parts) {
  std::string s;
  (put(s, parts), ...);
  return s;
}
}  // namespace text

#define FT_CHECK(cond, ...)                                         \
  do {                                                              \
    if (C10_UNLIKELY(!(cond))) ::fhetorch::bind::fail(::fhetorch::bind::text::cat(__VA_ARGS__)); \
  } while (0)

inline const int32_t* ptr(const Tensor& t) { return t.data_ptr<int32_t>(); }

inline void check_residues(const Tensor& x, const char* op, const char* name) {
  FT_CHECK(x.scalar_type() == at::kInt, "fhetorch.", op, ": ", name, " must be int32, got ", x.scalar_type());
  FT_CHECK(x.is_contiguous(), "fhetorch.", op, ": ", name, " must be contiguous");
}

// The words between consecutive planes of x (..., P), a plane P being its last `dims` dimensions
// ((L, N), or a ciphertext's (c, L, N)): int32, each plane dense and the leading dimensions
// collapsing to one stride (a contiguous x, or a view of some components of contiguous
// ciphertexts), which the ops read in place.
inline int64_t plane_stride(const Tensor& x, const char* op, const char* name, int64_t dims = 2) {
  FT_CHECK(x.scalar_type() == at::kInt, "fhetorch.", op, ": ", name, " must be int32, got ", x.scalar_type());
  FT_CHECK(x.dim() >= dims, "fhetorch.", op, ": ", name, " must have at least ", dims, " dimensions");
  int64_t plane = 1;
  for (int64_t i = x.dim() - 1; i >= x.dim() - dims; --i) {
    FT_CHECK(x.size(i) == 1 || x.stride(i) == plane, "fhetorch.", op, ": ", name,
             " must have dense planes of its last ", dims, " dimensions (pass .contiguous())");
    plane *= x.size(i);
  }
  int64_t stride = -1, next = -1;  // the planes' stride; the stride the next leading dimension must have
  for (int64_t i = x.dim() - dims - 1; i >= 0; --i) {
    if (x.size(i) == 1) continue;
    if (stride < 0) {
      stride = x.stride(i);
    } else {
      FT_CHECK(x.stride(i) == next, "fhetorch.", op, ": ", name,
               "'s leading dimensions must collapse to one stride (pass .contiguous())");
    }
    next = x.stride(i) * x.size(i);
  }
  if (stride < 0) return plane;
  FT_CHECK(stride >= plane, "fhetorch.", op, ": ", name, "'s planes must not overlap (pass .contiguous())");
  return stride;
}

inline void check_mod(const Tensor& mod, int64_t L, const char* op) {
  check_residues(mod, op, "mod");
  FT_CHECK(mod.dim() == 2 && mod.size(0) == L && mod.size(1) == 2, "fhetorch.", op,
              ": mod must be (L, 2) with L = ", L, ", got ", mod.sizes());
}

// Every tensor argument of an op must live on the device of its first one. (On CPU this
// always holds: a CUDA tensor among the arguments dispatches to the CUDA kernel.)
inline void check_devices(const char* op, std::initializer_list<const Tensor*> ts) {
  const Tensor* first = nullptr;
  for (const Tensor* t : ts) {
    if (!t) continue;
    if (!first) first = t;
    else FT_CHECK(first->device() == t->device(), "fhetorch.", op, ": tensors on ", first->device(), " and ",
                     t->device());
  }
}



// log2(n) for a power of two n >= 2; raises RuntimeError "fhetorch.<op>: N must be a power
// of two, got <n>" otherwise.
int log2_exact(int64_t n, const char* op);

// log2(n) for the fused key-switching ops: n a power of two in [2^kFusedMinLogN, 2^kFusedMaxLogN].
int fused_log2(int64_t n, const char* op);

// v as an int, refused if outside [0, 2^31).
inline int as_int(int64_t v, const char* op, const char* what) {
  FT_CHECK(v >= 0 && v <= INT32_MAX, "fhetorch.", op, ": ", what, " out of range: ", v);
  return static_cast<int>(v);
}

// b is broadcast over the leading dimensions of a.
inline void check_broadcast(const Tensor& a, const Tensor& b, const char* op) {
  check_residues(b, op, "b");
  FT_CHECK(b.dim() <= a.dim() && b.numel() > 0 && a.numel() % b.numel() == 0 &&
                  a.sizes().slice(a.dim() - b.dim()) == b.sizes(),
              "fhetorch.", op, ": b of shape ", b.sizes(), " does not broadcast to ", a.sizes());
}

inline int64_t limbs_of(const Tensor& x) { return x.dim() >= 2 ? x.size(-2) : 1; }

// x's shape with its trailing `drop` dimensions replaced by `tail`.
inline std::vector<int64_t> shape_with(const Tensor& x, int64_t drop, std::initializer_list<int64_t> tail) {
  std::vector<int64_t> s(x.sizes().begin(), x.sizes().end() - drop);
  s.insert(s.end(), tail);
  return s;
}

// Product of x's dimensions before its last `trailing` ones (the batch of an op).
inline int64_t batch_of(const Tensor& x, int64_t trailing) {
  int64_t b = 1;
  for (int64_t i = 0; i + trailing < x.dim(); ++i) b *= x.size(i);
  return b;
}

// An NTT table and its optional row map (csrc/table_rows.h): without `rows`, `table` must be
// (count, N) and limb l reads row l; with `rows` (one entry per limb, count <= kMaxTableRows),
// any (R, N) table with R <= kMaxTableRow + 1, limb l reading row rows[l] (so the ring's full
// tables serve every limb subset without copies). Returns the map (count 0 without one).
inline TableRows check_table_rows(const char* op, const char* name, const Tensor& table, at::OptionalIntArrayRef rows,
                                  int64_t count, int64_t n) {
  TableRows out{};
  if (!rows.has_value()) {
    FT_CHECK(table.sizes() == at::IntArrayRef({count, n}), "fhetorch.", op, ": ", name, " must be (", count,
                ", N), got ", table.sizes());
    return out;
  }
  FT_CHECK(table.dim() == 2 && table.size(1) == n && table.size(0) >= 1 && table.size(0) <= kMaxTableRow + 1,
              "fhetorch.", op, ": ", name, " must be (R, N) with R <= ", kMaxTableRow + 1, ", got ", table.sizes());
  FT_CHECK(static_cast<int64_t>(rows->size()) == count && count <= kMaxTableRows, "fhetorch.", op, ": ", name,
              "'s rows must list one table row per limb (", count, "), at most ", kMaxTableRows, "; got ",
              rows->size());
  out.count = static_cast<int>(count);
  for (int64_t l = 0; l < count; ++l) {
    const int64_t v = (*rows)[l];
    FT_CHECK(v >= 0 && v < table.size(0), "fhetorch.", op, ": ", name, " row ", v, " outside [0, ", table.size(0),
                ")");
    out.row[l] = static_cast<int16_t>(v);
  }
  return out;
}

// ---- per-op checks --------------------------------------------------------------------

struct NttGeom {
  int64_t rows;
  int L, log_n;
  TableRows psi_rows;
};

// ntt (post null, table "psi") and intt (table "psi_inv").
inline NttGeom check_ntt(const char* op, const Tensor& x, const Tensor& mod, const Tensor& psi, const Tensor* post,
                         at::OptionalIntArrayRef psi_rows) {
  const char* table = post ? "psi_inv" : "psi";
  check_residues(x, op, "x");
  const int64_t L = limbs_of(x), n = x.size(-1);
  const int log_n = log2_exact(n, op);
  check_mod(mod, L, op);
  check_residues(psi, op, table);
  NttGeom g{x.numel() / n, as_int(L, op, "L"), log_n, check_table_rows(op, table, psi, psi_rows, L, n)};
  if (post) {
    check_residues(*post, op, "post");
    FT_CHECK(post->numel() == L, "fhetorch.", op, ": post must have L entries");
  }
  check_devices(op, {&x, &mod, &psi, post});
  return g;
}

struct BconvGeom {
  int64_t batch, n;
  int La, Lb;
  std::vector<int64_t> out_shape;
};

inline BconvGeom check_bconv(const Tensor& x, const Tensor& mod_in, const Tensor& mod_out, const Tensor& mat) {
  check_residues(x, "bconv", "x");
  const int64_t La = limbs_of(x), n = x.size(-1), Lb = mod_out.size(0);
  FT_CHECK(La <= 256, "fhetorch.bconv: at most 256 input limbs");
  check_mod(mod_in, La, "bconv");
  check_mod(mod_out, Lb, "bconv");
  check_residues(mat, "bconv", "mat");
  FT_CHECK(mat.sizes() == at::IntArrayRef({Lb, La}), "fhetorch.bconv: mat must be (Lb, La)");
  check_devices("bconv", {&x, &mod_in, &mod_out, &mat});
  return {La * n > 0 ? x.numel() / (La * n) : 0, n, static_cast<int>(La), as_int(Lb, "bconv", "Lb"),
          shape_with(x, x.dim() >= 2 ? 2 : 1, {Lb, n})};
}

struct EwGeom {
  int64_t n, nb;
  int L;
};

// The element-wise ops: a (..., L, N); b (add, sub, mul, axpby) broadcast over a's leading
// dimensions; ca, cb (axpby, mul_const) L constants.
inline EwGeom check_elementwise(const char* op, const Tensor& a, const Tensor* b, const Tensor* ca, const Tensor* cb,
                                const Tensor& mod) {
  check_residues(a, op, "a");
  const int64_t L = limbs_of(a), n = a.size(-1);
  check_mod(mod, L, op);
  if (b) check_broadcast(a, *b, op);
  for (const Tensor* c : {ca, cb}) {
    if (!c) continue;
    check_residues(*c, op, "constants");
    FT_CHECK(c->numel() == L, "fhetorch.", op, ": constants must have L entries");
  }
  check_devices(op, {&a, b, ca, cb, &mod});
  return {n, b ? b->numel() : 1, as_int(L, op, "L")};
}

// lincomb: xs (T >= 1 tensors of one shape (..., L, N)), consts (T, L), scalar (L,) or none.
// Returns the first pass's arguments (terms and x filled by the binding, pass by pass).
inline LincombArgs check_lincomb(at::TensorList xs, const Tensor& consts, const Tensor& mod,
                                 const std::optional<Tensor>& scalar) {
  const char* op = "lincomb";
  FT_CHECK(!xs.empty(), "fhetorch.lincomb: xs must hold at least one tensor");
  const Tensor& x0 = xs[0];
  check_residues(x0, op, "xs");
  FT_CHECK(x0.dim() >= 1, "fhetorch.lincomb: xs must be (..., L, N)");
  const int64_t L = limbs_of(x0), n = x0.size(-1), T = static_cast<int64_t>(xs.size());
  for (size_t t = 1; t < xs.size(); ++t) {
    check_residues(xs[t], op, "xs");
    FT_CHECK(xs[t].sizes() == x0.sizes(), "fhetorch.lincomb: xs[", t, "] has shape ", xs[t].sizes(), ", xs[0] ",
             x0.sizes(), "; every term must have one shape");
    check_devices(op, {&x0, &xs[t]});
  }
  check_mod(mod, L, op);
  check_residues(consts, op, "consts");
  FT_CHECK(consts.sizes() == at::IntArrayRef({T, L}), "fhetorch.lincomb: consts must be (T, L) = (", T, ", ", L,
           ") for ", T, " terms of ", L, " limbs, got ", consts.sizes());
  const Tensor* sc = scalar ? &*scalar : nullptr;
  if (sc) {
    check_residues(*sc, op, "scalar");
    FT_CHECK(sc->dim() == 1 && sc->size(0) == L, "fhetorch.lincomb: scalar must be (L,) with L = ", L, ", got ",
             sc->sizes());
  }
  check_devices(op, {&x0, &consts, &mod, sc});
  LincombArgs g{};
  g.consts = ptr(consts);
  g.scalar = sc ? ptr(*sc) : nullptr;
  g.mod = ptr(mod);
  g.total = x0.numel();
  g.n = n;
  g.L = as_int(L, op, "L");
  g.K = x0.dim() >= 3 ? as_int(x0.size(-3), op, "K") : 1;
  return g;
}

// tensor_product: pairs (a[t], b[t]), every a[t] ciphertexts of a[0]'s shape (..., 2, L, N), b[t]
// of a[0]'s shape or one ciphertext (2, L, N) for the batch. Returns the first pass's arguments
// (pointers filled by the binding, pass by pass) and the output shape (..., 3, L, N).
inline std::pair<TensorProductArgs, std::vector<int64_t>> check_tensor_product(at::TensorList a, at::TensorList b,
                                                                               const Tensor& mod) {
  const char* op = "tensor_product";
  FT_CHECK(!a.empty() && a.size() == b.size(), "fhetorch.tensor_product: a and b must list the same number (>= 1) "
           "of ciphertexts, got ", a.size(), " and ", b.size());
  const Tensor& a0 = a[0];
  check_residues(a0, op, "a");
  FT_CHECK(a0.dim() >= 3 && a0.size(-3) == 2, "fhetorch.tensor_product: a must be (..., 2, L, N), got ", a0.sizes());
  const int64_t L = a0.size(-2), n = a0.size(-1), plane = L * n;
  for (size_t t = 0; t < a.size(); ++t) {
    check_residues(a[t], op, "a");
    FT_CHECK(a[t].sizes() == a0.sizes(), "fhetorch.tensor_product: a[", t, "] has shape ", a[t].sizes(), ", a[0] ",
             a0.sizes(), "; every pair must have one shape");
    check_broadcast(a0, b[t], op);
    FT_CHECK(b[t].numel() == a0.numel() || b[t].numel() == 2 * plane, "fhetorch.tensor_product: b[", t,
             "] must be a's shape or (2, L, N), got ", b[t].sizes());
    check_devices(op, {&a0, &a[t], &b[t]});
  }
  check_mod(mod, L, op);
  check_devices(op, {&a0, &mod});
  TensorProductArgs g{};
  g.mod = ptr(mod);
  g.batch = batch_of(a0, 3);
  g.n = n;
  g.L = as_int(L, op, "L");
  return {g, shape_with(a0, 3, {3, L, n})};
}

// Whether g is a galois element of the ring of degree n: odd, in (0, 2N).
inline bool is_galois_element(int64_t g, int64_t n) { return g % 2 == 1 && g > 0 && g < 2 * n; }

// A fused rotation's galois element for the key-switching ops: odd in (0, 2N); 1 (none) -> 0.
inline uint32_t check_fused_galois(const char* op, int64_t galois, int64_t n) {
  FT_CHECK(is_galois_element(galois, n), "fhetorch.", op,
           ": galois must be an odd galois element in (0, 2N) (1: no rotation), got ", galois);
  return galois == 1 ? 0u : static_cast<uint32_t>(galois);
}

// Returns log2(N).
inline int check_automorphism(const Tensor& x, int64_t galois) {
  check_residues(x, "automorphism", "x");
  const int64_t n = x.size(-1);
  const int log_n = log2_exact(n, "automorphism");
  FT_CHECK(is_galois_element(galois, n), "fhetorch.automorphism: galois element must be odd in (0, 2N)");
  return log_n;
}

// keyswitch_inner: d (..., beta, Lext, N) -> out (..., 2, Lext, N); the caller sets out.
inline InnerArgs check_keyswitch_inner(const Tensor& d, const Tensor& key_q, const Tensor& key_p, int64_t q_start,
                                       int64_t digit_start, const Tensor& mod) {
  const char* op = "keyswitch_inner";
  check_residues(d, op, "d");
  check_residues(key_q, op, "key_q");
  check_residues(key_p, op, "key_p");
  FT_CHECK(d.dim() >= 3 && key_q.dim() == 4 && key_p.dim() == 4 && key_q.size(1) == 2 && key_p.size(1) == 2,
              "fhetorch.keyswitch_inner: d must be (..., beta, L + K, N) and keys (digits, 2, limbs, N)");
  const int64_t beta = d.size(-3), Lext = d.size(-2), n = d.size(-1), K = key_p.size(2), Lq = Lext - K;
  const int64_t Lq_key = key_q.size(2);
  FT_CHECK(Lq >= 0 && q_start >= 0 && q_start + Lq <= Lq_key && digit_start >= 0 &&
                  digit_start + beta <= key_q.size(0) && key_p.size(0) == key_q.size(0) && key_q.size(3) == n &&
                  key_p.size(3) == n,
              "fhetorch.keyswitch_inner: key and digit shapes do not match");
  check_mod(mod, Lext, op);
  check_devices(op, {&d, &key_q, &key_p, &mod});
  return InnerArgs{ptr(d), ptr(key_q), ptr(key_p), nullptr, ptr(mod), batch_of(d, 3), n, as_int(beta, op, "beta"),
                   as_int(Lext, op, "L + K"), static_cast<int>(Lq), as_int(K, op, "K"), as_int(Lq_key, op, "Lq_key"),
                   as_int(q_start, op, "q_start"), as_int(digit_start, op, "digit_start")};
}

// Checks hoisted_mac's arguments and fills the kernel's tables (csrc/hoisted_mac.h); the
// caller sets args.out, (..., giants, 2, L + K, N).
inline MacArgs check_hoisted_mac(const Tensor& d, const Tensor& c, at::TensorList keys_q, at::TensorList keys_p,
                                 at::IntArrayRef galois, int64_t q_start, int64_t digit_start, const Tensor& c_p,
                                 at::TensorList pts, at::IntArrayRef pt_baby, at::IntArrayRef pt_giant,
                                 int64_t giants, const Tensor& mod) {
  const char* op = "hoisted_mac";
  check_residues(d, op, "d");
  check_residues(c, op, "c");
  check_residues(c_p, op, "c_p");
  FT_CHECK(d.dim() >= 3 && c.dim() == d.dim() && c.size(-3) == 2 && c.size(-1) == d.size(-1) &&
                  d.sizes().slice(0, d.dim() - 3) == c.sizes().slice(0, c.dim() - 3),
              "fhetorch.hoisted_mac: d must be (..., beta, L + K, N) and c (..., 2, L, N), with the same batch");
  const int64_t beta = d.size(-3), Lext = d.size(-2), n = d.size(-1), L = c.size(-2), K = Lext - L;
  const int log_n = log2_exact(n, op);
  FT_CHECK(K >= 0 && beta >= 1 && c_p.numel() == L, "fhetorch.hoisted_mac: c_p must hold L values and d at least c's limbs");
  check_mod(mod, Lext, op);
  const int64_t babies = static_cast<int64_t>(galois.size());
  FT_CHECK(babies >= 1 && babies <= kMacBabies && static_cast<int64_t>(keys_q.size()) == babies &&
                  static_cast<int64_t>(keys_p.size()) == babies,
              "fhetorch.hoisted_mac: 1 to ", kMacBabies, " baby steps, one key pair (keys_q, keys_p) each");
  FT_CHECK(giants >= 1 && giants <= kMacGiants, "fhetorch.hoisted_mac: giants must be in [1, ", kMacGiants, "]");
  FT_CHECK(pts.size() == pt_baby.size() && pts.size() == pt_giant.size(),
              "fhetorch.hoisted_mac: pts, pt_baby and pt_giant must have one entry per diagonal");
  check_devices(op, {&d, &c, &c_p, &mod});
  FT_CHECK(beta * Lext * n < (int64_t(1) << 31) && giants * 2 * Lext * n < (int64_t(1) << 31),
              "fhetorch.hoisted_mac: a ciphertext's d and output must hold fewer than 2^31 values");
  MacArgs a{};
  a.d = ptr(d);
  a.c = ptr(c);
  a.c_p = ptr(c_p);
  a.mod = ptr(mod);
  a.B = batch_of(d, 3);
  a.n = n;
  a.log_n = log_n;
  a.beta = static_cast<int>(beta);
  a.L = static_cast<int>(L);
  a.Lext = static_cast<int>(Lext);
  a.q_start = as_int(q_start, op, "q_start");
  a.digit_start = as_int(digit_start, op, "digit_start");
  a.babies = static_cast<int>(babies);
  a.giants = static_cast<int>(giants);
  for (int64_t b = 0; b < babies; ++b) {
    const int64_t gal = galois[b];
    FT_CHECK(is_galois_element(gal, n), "fhetorch.hoisted_mac: galois elements must be odd, in (0, 2N)");
    a.galois[b] = static_cast<uint32_t>(gal);
    if (gal == 1) continue;
    const Tensor &kq = keys_q[b], &kp = keys_p[b];
    check_residues(kq, op, "keys_q");
    check_residues(kp, op, "keys_p");
    check_devices(op, {&d, &kq, &kp});
    FT_CHECK(kq.dim() == 4 && kp.dim() == 4 && kq.size(1) == 2 && kp.size(1) == 2 && kp.size(2) == K &&
                    kq.size(3) == n && kp.size(3) == n && kp.size(0) == kq.size(0) &&
                    digit_start + beta <= kq.size(0) && q_start + L <= kq.size(2),
                "fhetorch.hoisted_mac: key ", b, " does not cover the digits and limbs of d");
    FT_CHECK(kq.numel() < (int64_t(1) << 31), "fhetorch.hoisted_mac: keys must hold fewer than 2^31 values");
    a.key_q[b] = ptr(kq);
    a.key_p[b] = ptr(kp);
    a.lq_key[b] = static_cast<int>(kq.size(2));
  }
  for (size_t k = 0; k < pts.size(); ++k) {
    const int64_t b = pt_baby[k], g = pt_giant[k];
    FT_CHECK(b >= 0 && b < babies && g >= 0 && g < giants, "fhetorch.hoisted_mac: diagonal ", k,
                " names baby ", b, " and giant ", g, " out of range");
    FT_CHECK(a.pt[b][g] == nullptr, "fhetorch.hoisted_mac: two diagonals for baby ", b, ", giant ", g);
    check_residues(pts[k], op, "pts");
    check_devices(op, {&d, &pts[k]});
    FT_CHECK(pts[k].dim() == 2 && pts[k].size(0) == Lext && pts[k].size(1) == n,
                "fhetorch.hoisted_mac: each diagonal must be (L + K, N)");
    a.pt[b][g] = ptr(pts[k]);
  }
  return a;
}

// Checks keyswitch_inner_sum's arguments and fills its tables (csrc/hoisted_mac.h); the caller
// sets args.out, (..., 2, L + K, N).
inline InnerSumArgs check_keyswitch_inner_sum(const Tensor& d, at::TensorList keys_q, at::TensorList keys_p,
                                              at::IntArrayRef galois, int64_t q_start, int64_t digit_start,
                                              const Tensor& addend, const Tensor& c_add,
                                              const std::optional<Tensor>& acc, const Tensor& mod) {
  const char* op = "keyswitch_inner_sum";
  check_residues(d, op, "d");
  const int64_t addend_stride = plane_stride(addend, op, "addend");  // read in place: the giants' y0 of (..., G, 2, La, N)
  check_residues(c_add, op, "c_add");
  FT_CHECK(d.dim() >= 4 && addend.dim() == d.dim() - 1 && addend.size(-1) == d.size(-1) &&
               addend.sizes().slice(0, addend.dim() - 2) == d.sizes().slice(0, d.dim() - 3),
           "fhetorch.keyswitch_inner_sum: d must be (..., G, beta, L + K, N) and addend (..., G, La, N)");
  const int64_t G = d.size(-4), beta = d.size(-3), Lext = d.size(-2), n = d.size(-1), La = addend.size(-2);
  const int log_n = log2_exact(n, op);
  FT_CHECK(G >= 1 && G <= kMacGiants && static_cast<int64_t>(galois.size()) == G &&
               static_cast<int64_t>(keys_q.size()) == G && static_cast<int64_t>(keys_p.size()) == G,
           "fhetorch.keyswitch_inner_sum: 1 to ", kMacGiants, " terms (d's dimension -4), one galois element and "
           "key pair (keys_q, keys_p) each");
  FT_CHECK(c_add.numel() == La && La <= Lext,
           "fhetorch.keyswitch_inner_sum: c_add must hold addend's La <= L + K values");
  check_mod(mod, Lext, op);
  check_devices(op, {&d, &addend, &c_add, &mod});
  FT_CHECK(G * beta * Lext * n < (int64_t(1) << 31), "fhetorch.keyswitch_inner_sum: a ciphertext's d must hold "
           "fewer than 2^31 values");
  InnerSumArgs a{};
  if (acc) {
    check_residues(*acc, op, "acc");
    check_devices(op, {&d, &*acc});
    FT_CHECK(acc->sizes() == at::IntArrayRef(shape_with(d, 4, {2, Lext, n})),
             "fhetorch.keyswitch_inner_sum: acc must be (..., 2, L + K, N)");
    a.acc = ptr(*acc);
  }
  a.d = ptr(d);
  a.addend = ptr(addend);
  a.addend_stride = addend_stride;
  a.c_add = ptr(c_add);
  a.mod = ptr(mod);
  a.B = batch_of(d, 4);
  a.n = n;
  a.log_n = log_n;
  a.G = static_cast<int>(G);
  a.beta = static_cast<int>(beta);
  a.Lext = static_cast<int>(Lext);
  a.La = static_cast<int>(La);
  a.q_start = as_int(q_start, op, "q_start");
  a.digit_start = as_int(digit_start, op, "digit_start");
  int64_t K = -1;
  for (int64_t k = 0; k < G; ++k) {
    const int64_t gal = galois[k];
    FT_CHECK(is_galois_element(gal, n), "fhetorch.keyswitch_inner_sum: galois elements must be odd, in (0, 2N)");
    const Tensor &kq = keys_q[k], &kp = keys_p[k];
    check_residues(kq, op, "keys_q");
    check_residues(kp, op, "keys_p");
    check_devices(op, {&d, &kq, &kp});
    FT_CHECK(kq.dim() == 4 && kp.dim() == 4 && kq.size(1) == 2 && kp.size(1) == 2 && kq.size(3) == n &&
                 kp.size(3) == n && kp.size(0) == kq.size(0) && (K < 0 || kp.size(2) == K),
             "fhetorch.keyswitch_inner_sum: keys must be (digits, 2, limbs, N) with the same special limbs");
    K = kp.size(2);
    FT_CHECK(K <= Lext && digit_start + beta <= kq.size(0) && q_start + (Lext - K) <= kq.size(2),
             "fhetorch.keyswitch_inner_sum: key ", k, " does not cover the digits and limbs of d");
    FT_CHECK(kq.numel() < (int64_t(1) << 31), "fhetorch.keyswitch_inner_sum: keys must hold fewer than 2^31 values");
    a.galois[k] = static_cast<uint32_t>(gal);
    a.key_q[k] = ptr(kq);
    a.key_p[k] = ptr(kp);
    a.lq_key[k] = static_cast<int>(kq.size(2));
  }
  a.Lq = static_cast<int>(Lext - K);
  FT_CHECK(La <= a.Lq, "fhetorch.keyswitch_inner_sum: the addend covers at most the L level limbs");
  return a;
}

// ---- fused key switching ---------------------------------------------------------------

// mod_up's arguments (and those mod_up_keyswitch_inner shares): a (..., L, N), or with b
// (tensor-product mode) a (..., 2, L, N) and b of a's shape or (2, L, N). Output shape:
// mod_up (..., beta, L + K, N).
inline ModUpArgs check_mod_up(const char* op, const Tensor& a, const Tensor* b, const Tensor& pre,
                              const Tensor& mod_ext, const Tensor& psi_ext, const Tensor& psi_inv_ext,
                              const Tensor& mats, at::IntArrayRef bounds, at::OptionalIntArrayRef psi_rows) {
  for (auto [t, name] : {std::pair<const Tensor*, const char*>{&pre, "pre"}, {&mod_ext, "mod_ext"},
                         {&psi_ext, "psi_ext"}, {&psi_inv_ext, "psi_inv_ext"}, {&mats, "mats"}})
    check_residues(*t, op, name);
  ModUpArgs g{};
  if (!b) g.a_stride = plane_stride(a, op, "a");  // read in place: a component of a batch needs no copy
  if (b) {
    check_residues(a, op, "a");
    check_residues(*b, op, "b");
    FT_CHECK(a.dim() >= 3 && a.size(-3) == 2 && (b->sizes() == a.sizes() || b->sizes() == a.sizes().slice(a.dim() - 3)),
                "fhetorch.", op, ": with b, a must be ciphertexts (..., 2, L, N) and b of a's shape or (2, L, N)");
    check_devices(op, {&a, b});
    g.b = ptr(*b);
    g.b_stride = b->numel() == a.numel() ? 2 * a.size(-2) * a.size(-1) : 0;
  }
  FT_CHECK(a.dim() >= 2, "fhetorch.", op, ": a must be (..., L, N)");
  const int64_t L = a.size(-2), n = a.size(-1);
  g.a = ptr(a);
  g.B = batch_of(a, b ? 3 : 2);
  g.log_n = fused_log2(n, op);
  FT_CHECK(mod_ext.dim() == 2 && mod_ext.size(1) == 2 && mod_ext.size(0) >= L && L >= 1,
              "fhetorch.", op, ": mod_ext must be (L + K, 2) with L >= 1");
  const int64_t Lext = mod_ext.size(0);
  g.L = as_int(L, op, "L");
  g.K = as_int(Lext - L, op, "K");
  g.psi_rows = check_table_rows(op, "psi_ext", psi_ext, psi_rows, Lext, n);
  FT_CHECK(psi_inv_ext.sizes() == psi_ext.sizes(), "fhetorch.", op, ": psi_inv_ext must have psi_ext's shape ",
              psi_ext.sizes(), ", got ", psi_inv_ext.sizes());
  FT_CHECK(pre.numel() == L, "fhetorch.", op, ": pre must have L entries");
  const int64_t nb = static_cast<int64_t>(bounds.size());
  FT_CHECK(nb >= 2 && nb - 1 <= kMaxDigits, "fhetorch.", op, ": bounds must list 2 to ", kMaxDigits + 1, " values");
  g.beta = static_cast<int>(nb - 1);
  FT_CHECK(bounds[0] == 0 && bounds[nb - 1] == L, "fhetorch.", op, ": bounds must run from 0 to L");
  int64_t widest = 0;
  for (int j = 0; j < g.beta; ++j) {
    FT_CHECK(bounds[j] < bounds[j + 1], "fhetorch.", op, ": bounds must increase strictly");
    widest = std::max<int64_t>(widest, bounds[j + 1] - bounds[j]);
  }
  for (int j = 0; j <= g.beta; ++j) g.lo[j] = static_cast<int>(bounds[j]);
  FT_CHECK(mats.dim() == 3 && mats.size(0) == g.beta && mats.size(1) == Lext && mats.size(2) >= widest &&
                  mats.size(2) <= kMaxDigitLimbs,
              "fhetorch.", op, ": mats must be (beta, L + K, alpha_max) with every digit's size <= alpha_max <= ",
              kMaxDigitLimbs);
  g.alpha_max = static_cast<int>(mats.size(2));
  g.pre = ptr(pre);
  g.mod_ext = ptr(mod_ext);
  g.psi_ext = ptr(psi_ext);
  g.psi_inv_ext = ptr(psi_inv_ext);
  g.mats = ptr(mats);
  check_devices(op, {&a, &pre, &mod_ext, &psi_ext, &psi_inv_ext, &mats});
  return g;
}

// mod_up_keyswitch_inner's key and addend; out (..., 2, L + K, N) with a's batch.
inline KeyArgs check_key(const ModUpArgs& m, const Tensor& a, const Tensor& key_q, const Tensor& key_p,
                         int64_t q_start, int64_t digit_start, const std::optional<Tensor>& addend,
                         const std::optional<Tensor>& c_add, bool tensor_mode, const std::optional<Tensor>& acc,
                         const char* op = "mod_up_keyswitch_inner") {
  check_residues(key_q, op, "key_q");
  check_residues(key_p, op, "key_p");
  const int64_t n = a.size(-1);
  FT_CHECK(key_q.dim() == 4 && key_p.dim() == 4 && key_q.size(1) == 2 && key_p.size(1) == 2 &&
                  key_p.size(0) == key_q.size(0) && key_q.size(3) == n && key_p.size(3) == n &&
                  key_p.size(2) == m.K,
              "fhetorch.", op, ": keys must be (digits, 2, limbs, N) with the K special limbs in key_p");
  FT_CHECK(q_start >= 0 && q_start + m.L <= key_q.size(2) && digit_start >= 0 &&
                  digit_start + m.beta <= key_q.size(0),
              "fhetorch.", op, ": q_start / digit_start out of the key's range");
  check_devices(op, {&a, &key_q, &key_p});
  KeyArgs k{ptr(key_q), ptr(key_p), as_int(key_q.size(2), op, "Lq_key"), static_cast<int>(q_start),
            static_cast<int>(digit_start), nullptr, nullptr, 0};
  if (tensor_mode) {
    FT_CHECK(!addend.has_value() && c_add.has_value(), "fhetorch.", op,
                ": with b, the addend is the tensor product's (d0, d1): pass c_add and no addend");
    k.La = m.L;
  } else {
    FT_CHECK(addend.has_value() == c_add.has_value(), "fhetorch.", op, ": addend and c_add go together");
    if (addend) {
      k.addend_stride = plane_stride(*addend, op, "addend", 3);  // read in place: (d0, d1) of a batch's (d0, d1, d2)
      const int64_t d = addend->dim();
      FT_CHECK(d == a.dim() + 1 && addend->sizes().slice(0, d - 3) == a.sizes().slice(0, a.dim() - 2) &&
                      (addend->size(-3) == 2 || addend->size(-3) == 1) && addend->size(-2) <= m.L + m.K &&
                      addend->size(-1) == n,
                  "fhetorch.", op, ": addend must be (..., 2, La, N) or (..., 1, La, N) with a's batch and La <= L + K");
      k.addend = ptr(*addend);
      k.La = static_cast<int>(addend->size(-2));
      k.Ka = static_cast<int>(addend->size(-3));
      check_devices(op, {&a, &*addend});
    }
  }
  if (c_add) {
    check_residues(*c_add, op, "c_add");
    FT_CHECK(c_add->numel() == k.La, "fhetorch.", op, ": c_add must have La entries (L with b)");
    check_devices(op, {&a, &*c_add});
    k.c_add = ptr(*c_add);
  }
  if (acc) {
    check_residues(*acc, op, "acc");
    const int64_t bd = tensor_mode ? 3 : 2;  // a's trailing dimensions that are not its batch
    FT_CHECK(acc->dim() == a.dim() - bd + 3 && acc->sizes().slice(0, acc->dim() - 3) == a.sizes().slice(0, a.dim() - bd) &&
                    acc->size(-3) == 2 && acc->size(-2) == m.L + m.K && acc->size(-1) == n,
                "fhetorch.", op, ": acc must be the result's shape (..., 2, L + K, N)");
    check_devices(op, {&a, &*acc});
    k.acc = ptr(*acc);
  }
  return k;
}

struct SwitchGeom {
  SwitchArgs args;
  std::vector<int64_t> out_shape;
};

inline SwitchGeom check_switch_modulus(const Tensor& x, at::IntArrayRef drop_rows, at::IntArrayRef keep_rows,
                                       const Tensor& pre, const Tensor& mod_drop, const Tensor& psi_inv_drop,
                                       const Tensor& mod_dst, const Tensor& psi_dst, const Tensor& mat,
                                       const Tensor& c_keep, const Tensor& c_sub, const std::optional<Tensor>& addend,
                                       at::OptionalIntArrayRef psi_inv_drop_rows, at::OptionalIntArrayRef psi_dst_rows,
                                       const char* op = "switch_modulus") {
  for (auto [t, name] : {std::pair<const Tensor*, const char*>{&x, "x"}, {&pre, "pre"}, {&mod_drop, "mod_drop"},
                         {&psi_inv_drop, "psi_inv_drop"}, {&mod_dst, "mod_dst"}, {&psi_dst, "psi_dst"},
                         {&mat, "mat"}, {&c_keep, "c_keep"}, {&c_sub, "c_sub"}})
    check_residues(*t, op, name);
  FT_CHECK(x.dim() >= 2, "fhetorch.", op, ": x must be (..., Ls, N)");
  SwitchArgs g{};
  const int64_t Ls = x.size(-2), n = x.size(-1), D = static_cast<int64_t>(drop_rows.size());
  const int64_t Ld = static_cast<int64_t>(keep_rows.size());
  g.log_n = fused_log2(n, op);
  FT_CHECK(Ls >= 1 && Ls <= kMaxSwitchSrc, "fhetorch.", op, ": Ls must be in [1, ", kMaxSwitchSrc, "]");
  FT_CHECK(D >= 1 && D <= kMaxSwitchRows && Ld >= 1 && Ld <= kMaxSwitchRows, "fhetorch.", op,
              ": drop_rows and keep_rows must have 1 to ", kMaxSwitchRows, " entries");
  for (int64_t k = 0; k < D; ++k) {
    FT_CHECK(drop_rows[k] >= 0 && drop_rows[k] < Ls, "fhetorch.", op, ": drop row ", drop_rows[k], " outside [0, Ls)");
    g.drop[k] = static_cast<int16_t>(drop_rows[k]);
  }
  for (int64_t i = 0; i < Ld; ++i) {
    FT_CHECK(keep_rows[i] >= -1 && keep_rows[i] < Ls, "fhetorch.", op, ": keep row ", keep_rows[i],
                " outside [-1, Ls)");
    g.keep[i] = static_cast<int16_t>(keep_rows[i]);
  }
  FT_CHECK(pre.numel() == D, "fhetorch.", op, ": pre must have D entries");
  check_mod(mod_drop, D, op);
  check_mod(mod_dst, Ld, op);
  g.psi_inv_drop_rows = check_table_rows(op, "psi_inv_drop", psi_inv_drop, psi_inv_drop_rows, D, n);
  g.psi_dst_rows = check_table_rows(op, "psi_dst", psi_dst, psi_dst_rows, Ld, n);
  FT_CHECK(mat.sizes() == at::IntArrayRef({Ld, D}), "fhetorch.", op, ": mat must be (Ld, D)");
  FT_CHECK(c_keep.numel() == Ld && c_sub.numel() == Ld, "fhetorch.", op, ": c_keep and c_sub must have Ld entries");
  // Groups of K polynomials (x's dimension -3): an addend of x's rank adds Ka <= K
  // polynomials per group, one of rank one less adds one.
  const bool grouped = x.dim() >= 3;
  g.K = grouped ? as_int(x.size(-3), op, "the group size") : 1;
  g.Ka = 0;
  if (addend) {
    check_residues(*addend, op, "addend");
    const int64_t d = addend->dim();
    const bool full = grouped && d == x.dim();
    FT_CHECK((full || d == std::max<int64_t>(x.dim() - 1, 2)) && addend->size(-2) == Ld &&
                    addend->size(-1) == n &&
                    addend->sizes().slice(0, d - (full ? 3 : 2)) == x.sizes().slice(0, x.dim() - (grouped ? 3 : 2)) &&
                    (!full || (addend->size(-3) >= 1 && addend->size(-3) <= g.K)),
                "fhetorch.", op, ": addend must be (..., Ka, Ld, N) with x's leading dimensions and Ka <= x.size(-3), "
                "or (..., Ld, N) (Ka = 1); x is ", x.sizes(), ", addend ", addend->sizes());
    g.Ka = full ? static_cast<int>(addend->size(-3)) : 1;
    g.addend = ptr(*addend);
    check_devices(op, {&x, &*addend});
  }
  check_devices(op, {&x, &pre, &mod_drop, &psi_inv_drop, &mod_dst, &psi_dst, &mat, &c_keep, &c_sub});
  g.x = ptr(x);
  g.pre = ptr(pre);
  g.mod_drop = ptr(mod_drop);
  g.psi_inv_drop = ptr(psi_inv_drop);
  g.mod_dst = ptr(mod_dst);
  g.psi_dst = ptr(psi_dst);
  g.mat = ptr(mat);
  g.c_keep = ptr(c_keep);
  g.c_sub = ptr(c_sub);
  g.B = batch_of(x, 2);
  g.Ls = static_cast<int>(Ls);
  g.D = static_cast<int>(D);
  g.Ld = static_cast<int>(Ld);
  return {g, shape_with(x, 2, {Ld, n})};
}

struct RowsGeom {
  int64_t rows, n;
  int L;
  std::vector<int64_t> out_shape;
};

// to_rns: x (..., N) int64 -> (..., L, N).
inline RowsGeom check_to_rns(const Tensor& x, const Tensor& mod, const Tensor& r2) {
  FT_CHECK(x.scalar_type() == at::kLong && x.is_contiguous() && x.dim() >= 1,
              "fhetorch.to_rns: x must be contiguous int64 (..., N)");
  const int64_t L = mod.size(0), n = x.size(-1);
  check_mod(mod, L, "to_rns");
  check_residues(r2, "to_rns", "r2");
  FT_CHECK(r2.numel() == L, "fhetorch.to_rns: r2 must have L entries");
  check_devices("to_rns", {&x, &mod, &r2});
  return {batch_of(x, 1), n, as_int(L, "to_rns", "L"), shape_with(x, 1, {L, n})};
}

// crt_digits: x (..., L, N) -> the same shape.
inline RowsGeom check_crt_digits(const Tensor& x, const Tensor& mod, const Tensor& garner) {
  check_residues(x, "crt_digits", "x");
  const int64_t L = limbs_of(x), n = x.size(-1);
  FT_CHECK(L <= kMaxCrtLimbs, "fhetorch.crt_digits: at most ", kMaxCrtLimbs, " limbs");
  check_mod(mod, L, "crt_digits");
  check_residues(garner, "crt_digits", "garner");
  FT_CHECK(garner.sizes() == at::IntArrayRef({L, L}), "fhetorch.crt_digits: garner must be (L, L)");
  check_devices("crt_digits", {&x, &mod, &garner});
  return {L * n > 0 ? x.numel() / (L * n) : 0, n, static_cast<int>(L), x.sizes().vec()};
}

// The 8 key words of a sampler, as raw words (on the key's device).
inline const uint32_t* check_sampler_key(const Tensor& key, const char* op) {
  check_residues(key, op, "key");
  FT_CHECK(key.numel() == 8, "fhetorch.", op, ": key must have 8 int32 words");
  return reinterpret_cast<const uint32_t*>(ptr(key));
}

}  // namespace fhetorch::bind
