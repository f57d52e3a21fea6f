// CUDA implementations of the ops in schema.cpp: the same argument checks as the CPU
// binding (common.h), outputs from the caching allocator, and the kernels of csrc/cuda/
// enqueued on the current stream of the input's device. Nothing here waits for the GPU.
// A CPU-only torch ships the c10/cuda headers without their generated config header; it
// only matters for Windows DLL exports, so skip it there (this lets the file be
// syntax-checked against such a torch).
#if !__has_include(<c10/cuda/impl/cuda_cmake_macros.h>) && !defined(C10_CUDA_NO_CMAKE_CONFIGURE_FILE)
#define C10_CUDA_NO_CMAKE_CONFIGURE_FILE
#endif
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include "common.h"
#include "../cuda/kernels.h"

namespace fhetorch::bind {
namespace {

using at::Tensor;

// The current stream of the current device (set by the CUDAGuard of each op); this is what
// at::cuda::getCurrentCUDAStream() returns.
cudaStream_t stream() { return c10::cuda::getCurrentCUDAStream().stream(); }

void check_launch(cudaError_t err, const char* op) {
  TORCH_CHECK(err == cudaSuccess, "fhetorch.", op, ": CUDA kernel launch failed: ", cudaGetErrorString(err));
}

int as_int(int64_t v, const char* op, const char* what) {
  TORCH_CHECK(v >= 0 && v <= INT32_MAX, "fhetorch.", op, ": ", what, " out of range: ", v);
  return static_cast<int>(v);
}

const int32_t* ptr(const Tensor& t) { return t.data_ptr<int32_t>(); }
int32_t* mptr(Tensor& t) { return t.data_ptr<int32_t>(); }

const int* rows_ptr(const std::vector<int>& rows) { return rows.empty() ? nullptr : rows.data(); }

Tensor ntt(const Tensor& x, const Tensor& mod, const Tensor& psi, at::OptionalIntArrayRef psi_rows) {
  const NttGeom g = check_ntt(x, mod, psi, psi_rows);
  const c10::cuda::CUDAGuard guard(x.device());
  Tensor y = at::empty_like(x);
  check_launch(cuda::ntt(ptr(x), mptr(y), g.rows, as_int(g.L, "ntt", "L"), g.log_n, ptr(mod), ptr(psi), stream(),
                         rows_ptr(g.psi_rows)),
               "ntt");
  return y;
}

Tensor intt(const Tensor& x, const Tensor& mod, const Tensor& psi_inv, const Tensor& post,
            at::OptionalIntArrayRef psi_rows) {
  const NttGeom g = check_intt(x, mod, psi_inv, post, psi_rows);
  const c10::cuda::CUDAGuard guard(x.device());
  Tensor y = at::empty_like(x);
  check_launch(cuda::intt(ptr(x), mptr(y), g.rows, as_int(g.L, "intt", "L"), g.log_n, ptr(mod), ptr(psi_inv),
                          ptr(post), stream(), rows_ptr(g.psi_rows)),
               "intt");
  return y;
}

Tensor bconv(const Tensor& x, const Tensor& mod_in, const Tensor& mod_out, const Tensor& mat) {
  const BconvGeom g = check_bconv(x, mod_in, mod_out, mat);
  const c10::cuda::CUDAGuard guard(x.device());
  Tensor y = at::empty(g.out_shape, x.options());
  check_launch(cuda::bconv(ptr(x), mptr(y), g.batch, as_int(g.La, "bconv", "La"), as_int(g.Lb, "bconv", "Lb"), g.n,
                           ptr(mod_in), ptr(mod_out), ptr(mat), stream()),
               "bconv");
  return y;
}

Tensor binary(cuda::Binary op, const char* name, const Tensor& a, const Tensor& b, const Tensor& mod) {
  const EwGeom g = check_binary(name, a, b, mod);
  const c10::cuda::CUDAGuard guard(a.device());
  Tensor out = at::empty_like(a);
  check_launch(cuda::binary(op, ptr(a), ptr(b), mptr(out), a.numel(), b.numel(), g.n, as_int(g.L, name, "L"),
                            ptr(mod), stream()),
               name);
  return out;
}
Tensor add(const Tensor& a, const Tensor& b, const Tensor& mod) { return binary(cuda::Binary::Add, "add", a, b, mod); }
Tensor sub(const Tensor& a, const Tensor& b, const Tensor& mod) { return binary(cuda::Binary::Sub, "sub", a, b, mod); }
Tensor mul(const Tensor& a, const Tensor& b, const Tensor& mod) { return binary(cuda::Binary::Mul, "mul", a, b, mod); }

Tensor neg(const Tensor& a, const Tensor& mod) {
  const EwGeom g = check_neg(a, mod);
  const c10::cuda::CUDAGuard guard(a.device());
  Tensor out = at::empty_like(a);
  check_launch(cuda::neg(ptr(a), mptr(out), a.numel(), g.n, as_int(g.L, "neg", "L"), ptr(mod), stream()), "neg");
  return out;
}

Tensor axpby_impl(const Tensor& a, const Tensor& ca, const Tensor* b, const Tensor* cb, const Tensor& mod,
                  const char* name) {
  const EwGeom g = check_axpby(name, a, ca, b, cb, mod);
  const c10::cuda::CUDAGuard guard(a.device());
  Tensor out = at::empty_like(a);
  check_launch(cuda::axpby(ptr(a), ptr(ca), b ? ptr(*b) : nullptr, cb ? ptr(*cb) : nullptr, mptr(out), a.numel(),
                           b ? b->numel() : 1, g.n, as_int(g.L, name, "L"), ptr(mod), stream()),
               name);
  return out;
}
Tensor axpby(const Tensor& a, const Tensor& ca, const Tensor& b, const Tensor& cb, const Tensor& mod) {
  return axpby_impl(a, ca, &b, &cb, mod, "axpby");
}
Tensor mul_const(const Tensor& a, const Tensor& c, const Tensor& mod) {
  return axpby_impl(a, c, nullptr, nullptr, mod, "mul_const");
}

Tensor tensor_product(const Tensor& a, const Tensor& b, const Tensor& mod) {
  const TensorProductGeom g = check_tensor_product(a, b, mod);
  const c10::cuda::CUDAGuard guard(a.device());
  Tensor out = at::empty(g.out_shape, a.options());
  check_launch(cuda::tensor_product(ptr(a), ptr(b), mptr(out), g.batch, g.b_broadcast, g.n,
                                    as_int(g.L, "tensor_product", "L"), ptr(mod), stream()),
               "tensor_product");
  return out;
}

Tensor automorphism(const Tensor& x, int64_t galois) {
  const int log_n = check_automorphism(x, galois);
  const c10::cuda::CUDAGuard guard(x.device());
  Tensor out = at::empty_like(x);
  check_launch(cuda::automorphism(ptr(x), mptr(out), x.numel() >> log_n, log_n, static_cast<uint32_t>(galois),
                                  stream()),
               "automorphism");
  return out;
}

Tensor keyswitch_inner(const Tensor& d, const Tensor& key_q, const Tensor& key_p, int64_t q_start,
                       int64_t digit_start, const Tensor& mod) {
  const KeySwitchGeom g = check_keyswitch_inner(d, key_q, key_p, q_start, digit_start, mod);
  const char* op = "keyswitch_inner";
  const c10::cuda::CUDAGuard guard(d.device());
  Tensor out = at::empty({2, g.L, g.n}, d.options());
  check_launch(cuda::keyswitch_inner(ptr(d), ptr(key_q), ptr(key_p), mptr(out), as_int(g.beta, op, "beta"),
                                     as_int(g.L, op, "L"), as_int(g.Lq, op, "Lq"), as_int(g.K, op, "K"),
                                     as_int(g.Lq_key, op, "Lq_key"), as_int(q_start, op, "q_start"),
                                     as_int(digit_start, op, "digit_start"), g.n, ptr(mod), stream()),
               op);
  return out;
}

Tensor hoisted_mac(const Tensor& d, const Tensor& c, at::TensorList keys_q, at::TensorList keys_p,
                   at::IntArrayRef galois, int64_t q_start, int64_t digit_start, const Tensor& c_p, at::TensorList pts,
                   at::IntArrayRef pt_baby, at::IntArrayRef pt_giant, int64_t giants, const Tensor& mod) {
  MacArgs a = check_hoisted_mac(d, c, keys_q, keys_p, galois, q_start, digit_start, c_p, pts, pt_baby, pt_giant,
                                giants, mod);
  const c10::cuda::CUDAGuard guard(d.device());
  Tensor out = at::empty({giants, 2, d.size(1), d.size(2)}, d.options());
  a.out = mptr(out);
  check_launch(cuda::hoisted_mac(a, stream()), "hoisted_mac");
  return out;
}

// ---- fused key switching -----------------------------------------------------------------

// The fused kernels use 16-byte accesses: an input whose data does not start on a 16-byte
// boundary (a view with an odd storage offset) is copied first.
Tensor aligned16(const Tensor& t) {
  return (reinterpret_cast<uintptr_t>(t.data_ptr()) & 15u) == 0 ? t : t.clone();
}

void check_fused_size(int log_n, const char* op) {
  if (log_n < 10 || log_n > 17) {
    fail(std::string("fhetorch.") + op + ": the CUDA kernels need 2^10 <= N <= 2^17, got N = 2^" +
         std::to_string(log_n) + " (fhetorch.rlwe falls back to the unfused ops there)");
  }
}

cuda::ModUpTables mod_up_tables(const Tensor& pre, const Tensor& mod_ext, const Tensor& psi_ext,
                                const Tensor& psi_inv_ext, const Tensor& mats, const ModUpGeom& g) {
  return cuda::ModUpTables{ptr(pre), ptr(mod_ext), ptr(psi_ext), ptr(psi_inv_ext), ptr(mats),
                           static_cast<int>(g.alpha_max), rows_ptr(g.psi_rows)};
}

Tensor mod_up(const Tensor& a_in, const Tensor& pre, const Tensor& mod_ext, const Tensor& psi_ext_in,
              const Tensor& psi_inv_ext_in, const Tensor& mats, at::IntArrayRef bounds, at::OptionalIntArrayRef psi_rows) {
  const char* op = "mod_up";
  const ModUpGeom g = check_mod_up(op, a_in, pre, mod_ext, psi_ext_in, psi_inv_ext_in, mats, bounds, psi_rows);
  check_fused_size(g.log_n, op);
  const c10::cuda::CUDAGuard guard(a_in.device());
  const Tensor a = aligned16(a_in), psi_ext = aligned16(psi_ext_in), psi_inv_ext = aligned16(psi_inv_ext_in);
  Tensor out = at::empty({g.beta, g.Lext, g.n}, a.options());
  Tensor t = at::empty({g.L, g.n}, a.options());
  check_launch(cuda::mod_up(ptr(a), mptr(out), mptr(t), as_int(g.L, op, "L"), as_int(g.K, op, "K"), g.log_n,
                            mod_up_tables(pre, mod_ext, psi_ext, psi_inv_ext, mats, g), g.lo.data(),
                            static_cast<int>(g.beta), stream()),
               op);
  return out;
}

Tensor mod_up_keyswitch(const Tensor& a_in, const Tensor& pre, const Tensor& mod_ext, const Tensor& psi_ext_in,
                        const Tensor& psi_inv_ext_in, const Tensor& mats, at::IntArrayRef bounds,
                        const Tensor& key_q_in, const Tensor& key_p_in, int64_t q_start, int64_t digit_start,
                        const std::optional<Tensor>& addend_in, const std::optional<Tensor>& c_add,
                        const std::optional<Tensor>& b_in, at::OptionalIntArrayRef psi_rows) {
  const char* op = "mod_up_keyswitch";
  const ModUpKsGeom g = check_mod_up_keyswitch(a_in, pre, mod_ext, psi_ext_in, psi_inv_ext_in, mats, bounds, key_q_in,
                                               key_p_in, q_start, digit_start, addend_in, c_add, b_in, psi_rows);
  const ModUpGeom& m = g.m;
  check_fused_size(m.log_n, op);
  const c10::cuda::CUDAGuard guard(a_in.device());
  const Tensor a = aligned16(a_in), psi_ext = aligned16(psi_ext_in), psi_inv_ext = aligned16(psi_inv_ext_in);
  const Tensor key_q = aligned16(key_q_in), key_p = aligned16(key_p_in);
  const Tensor addend = addend_in ? aligned16(*addend_in) : Tensor();
  const Tensor b = b_in ? aligned16(*b_in) : Tensor();
  Tensor out = at::empty({2, m.Lext, m.n}, a.options());
  Tensor t = at::empty({m.L, m.n}, a.options());
  Tensor d = at::empty({m.beta * m.Lext - m.L, m.n}, a.options());
  const cuda::KeyTables key{ptr(key_q), ptr(key_p), as_int(g.Lq_key, op, "Lq_key"), as_int(q_start, op, "q_start"),
                            as_int(digit_start, op, "digit_start"), addend_in ? ptr(addend) : nullptr,
                            c_add ? ptr(*c_add) : nullptr, static_cast<int>(g.La), b_in ? ptr(b) : nullptr};
  check_launch(cuda::mod_up_keyswitch(ptr(a), mptr(out), mptr(t), mptr(d), as_int(m.L, op, "L"), as_int(m.K, op, "K"),
                                      m.log_n, mod_up_tables(pre, mod_ext, psi_ext, psi_inv_ext, mats, m),
                                      m.lo.data(), static_cast<int>(m.beta), key, stream()),
               op);
  return out;
}

Tensor switch_modulus(const Tensor& x_in, at::IntArrayRef drop_rows, at::IntArrayRef keep_rows, const Tensor& pre,
                      const Tensor& mod_drop, const Tensor& psi_inv_drop_in, const Tensor& mod_dst,
                      const Tensor& psi_dst_in, const Tensor& mat, const Tensor& c_keep, const Tensor& c_sub,
                      const std::optional<Tensor>& addend_in, at::OptionalIntArrayRef psi_inv_drop_rows,
                      at::OptionalIntArrayRef psi_dst_rows) {
  const char* op = "switch_modulus";
  const SwitchGeom g = check_switch_modulus(x_in, drop_rows, keep_rows, pre, mod_drop, psi_inv_drop_in, mod_dst,
                                            psi_dst_in, mat, c_keep, c_sub, addend_in, psi_inv_drop_rows,
                                            psi_dst_rows);
  check_fused_size(g.log_n, op);
  const c10::cuda::CUDAGuard guard(x_in.device());
  Tensor out = at::empty(g.out_shape, x_in.options());
  if (g.B == 0) return out;
  const Tensor x = aligned16(x_in), psi_inv_drop = aligned16(psi_inv_drop_in), psi_dst = aligned16(psi_dst_in);
  const Tensor addend = addend_in ? aligned16(*addend_in) : Tensor();
  Tensor t = at::empty({g.B * g.D, g.n}, x.options());
  Tensor y = at::empty({g.B * g.Ld, g.n}, x.options());
  const cuda::SwitchTables tb{ptr(pre), ptr(mod_drop), ptr(psi_inv_drop), ptr(mod_dst), ptr(psi_dst),
                              ptr(mat), ptr(c_keep), ptr(c_sub), rows_ptr(g.psi_inv_drop_rows),
                              rows_ptr(g.psi_dst_rows)};
  check_launch(cuda::switch_modulus(ptr(x), mptr(out), mptr(t), mptr(y), g.B, as_int(g.Ls, op, "Ls"), g.log_n,
                                    g.drop.data(), static_cast<int>(g.D), g.keep.data(), static_cast<int>(g.Ld), tb,
                                    addend_in ? ptr(addend) : nullptr, g.Ba, stream()),
               op);
  return out;
}

Tensor to_rns(const Tensor& x, const Tensor& mod, const Tensor& r2) {
  const ToRnsGeom g = check_to_rns(x, mod, r2);
  const c10::cuda::CUDAGuard guard(x.device());
  Tensor out = at::empty(g.out_shape, x.options().dtype(at::kInt));
  const int64_t rows = g.n > 0 ? x.numel() / g.n : 0;
  check_launch(cuda::to_rns(x.data_ptr<int64_t>(), mptr(out), rows, as_int(g.L, "to_rns", "L"), g.n, ptr(mod),
                            ptr(r2), stream()),
               "to_rns");
  return out;
}

Tensor crt_digits(const Tensor& x, const Tensor& mod, const Tensor& garner) {
  const EwGeom g = check_crt_digits(x, mod, garner);
  const c10::cuda::CUDAGuard guard(x.device());
  Tensor out = at::empty_like(x);
  const int64_t rows = g.n > 0 && g.L > 0 ? x.numel() / (g.L * g.n) : 0;
  check_launch(cuda::crt_digits(ptr(x), mptr(out), rows, as_int(g.L, "crt_digits", "L"), g.n, ptr(mod),
                                ptr(garner), stream()),
               "crt_digits");
  return out;
}

Tensor sample_uniform(const Tensor& key, int64_t stream_id, const Tensor& mod, int64_t rows, int64_t n) {
  const uint32_t* k = check_key(key, "sample_uniform");
  const int64_t L = check_sample_uniform(key, mod);
  const c10::cuda::CUDAGuard guard(key.device());
  Tensor out = at::empty({rows, L, n}, key.options());
  check_launch(cuda::sample_uniform(k, static_cast<uint64_t>(stream_id), mptr(out), out.numel(),
                                    as_int(L, "sample_uniform", "L"), n, ptr(mod), stream()),
               "sample_uniform");
  return out;
}

Tensor sample_ternary(const Tensor& key, int64_t stream_id, int64_t n) {
  const uint32_t* k = check_key(key, "sample_ternary");
  const c10::cuda::CUDAGuard guard(key.device());
  Tensor out = at::empty({n}, key.options().dtype(at::kLong));
  check_launch(cuda::sample_ternary(k, static_cast<uint64_t>(stream_id), out.data_ptr<int64_t>(), n, stream()),
               "sample_ternary");
  return out;
}

Tensor sample_cbd(const Tensor& key, int64_t stream_id, int64_t n) {
  const uint32_t* k = check_key(key, "sample_cbd");
  const c10::cuda::CUDAGuard guard(key.device());
  Tensor out = at::empty({n}, key.options().dtype(at::kLong));
  check_launch(cuda::sample_cbd(k, static_cast<uint64_t>(stream_id), out.data_ptr<int64_t>(), n, stream()),
               "sample_cbd");
  return out;
}

}  // namespace

TORCH_LIBRARY_IMPL(fhetorch, CUDA, m) {
  m.impl("ntt", &ntt);
  m.impl("intt", &intt);
  m.impl("bconv", &bconv);
  m.impl("add", &add);
  m.impl("sub", &sub);
  m.impl("mul", &mul);
  m.impl("neg", &neg);
  m.impl("axpby", &axpby);
  m.impl("mul_const", &mul_const);
  m.impl("tensor_product", &tensor_product);
  m.impl("automorphism", &automorphism);
  m.impl("keyswitch_inner", &keyswitch_inner);
  m.impl("hoisted_mac", &hoisted_mac);
  m.impl("mod_up", &mod_up);
  m.impl("mod_up_keyswitch", &mod_up_keyswitch);
  m.impl("switch_modulus", &switch_modulus);
  m.impl("to_rns", &to_rns);
  m.impl("crt_digits", &crt_digits);
  m.impl("sample_uniform", &sample_uniform);
  m.impl("sample_ternary", &sample_ternary);
  m.impl("sample_cbd", &sample_cbd);
}

}  // namespace fhetorch::bind
