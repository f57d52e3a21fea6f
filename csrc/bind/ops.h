// The bindings of the ops in schema.cpp, written once for both devices: each checks its
// arguments (common.h), allocates its output and calls the device's implementation, which
// argument-dependent lookup finds from the type of the device context (cpu::Threads:
// csrc/cpu/kernels.h; cuda::Stream: csrc/cuda/kernels.h). csrc/bind/cpu.cpp and cuda.cpp
// define the device (Dev) and register these for it.
//
// Dev provides: Dev(const Tensor& first_argument) (a device guard on CUDA); run(op, f), which
// calls f(ctx) and raises if the device reports a failure; aligned(t), t itself or a copy
// whose data starts on a 16-byte boundary (the fused CUDA kernels' 16-byte accesses).
#pragma once
#include <deque>

#include "common.h"
#include "tfhe_fft_ops.h"
#include "tfhe_ops.h"

namespace fhetorch::bind {

inline int32_t* out_ptr(Tensor& t) { return t.data_ptr<int32_t>(); }

template <class Dev>
Tensor ntt_op(const Tensor& x, const Tensor& mod, const Tensor& psi, at::OptionalIntArrayRef psi_rows) {
  const NttGeom g = check_ntt("ntt", x, mod, psi, nullptr, psi_rows);
  Dev dev(x);
  Tensor y = at::empty_like(x);
  dev.run("ntt", [&](auto& ctx) {
    return ntt(ptr(x), out_ptr(y), g.rows, g.L, g.log_n, ptr(mod), ptr(psi), g.psi_rows, ctx);
  });
  return y;
}

template <class Dev>
Tensor intt_op(const Tensor& x, const Tensor& mod, const Tensor& psi_inv, const Tensor& post,
               at::OptionalIntArrayRef psi_rows) {
  const NttGeom g = check_ntt("intt", x, mod, psi_inv, &post, psi_rows);
  Dev dev(x);
  Tensor y = at::empty_like(x);
  dev.run("intt", [&](auto& ctx) {
    return intt(ptr(x), out_ptr(y), g.rows, g.L, g.log_n, ptr(mod), ptr(psi_inv), ptr(post), g.psi_rows, ctx);
  });
  return y;
}

template <class Dev>
Tensor bconv_op(const Tensor& x, const Tensor& mod_in, const Tensor& mod_out, const Tensor& mat) {
  const BconvGeom g = check_bconv(x, mod_in, mod_out, mat);
  Dev dev(x);
  Tensor y = at::empty(g.out_shape, x.options());
  dev.run("bconv", [&](auto& ctx) {
    return bconv(ptr(x), out_ptr(y), g.batch, g.La, g.Lb, g.n, ptr(mod_in), ptr(mod_out), ptr(mat), ctx);
  });
  return y;
}

// add, sub, mul, neg, axpby, mul_const.
template <class Dev, EwOp OP>
Tensor elementwise_op(const char* op, const Tensor& a, const Tensor* ca, const Tensor* b, const Tensor* cb,
                      const Tensor& mod) {
  const EwGeom g = check_elementwise(op, a, b, ca, cb, mod);
  Dev dev(a);
  Tensor out = at::empty_like(a);
  dev.run(op, [&](auto& ctx) {
    return elementwise(OP, ptr(a), ca ? ptr(*ca) : nullptr, b ? ptr(*b) : nullptr, cb ? ptr(*cb) : nullptr,
                       out_ptr(out), a.numel(), g.nb, g.n, g.L, ptr(mod), ctx);
  });
  return out;
}
template <class Dev>
Tensor add_op(const Tensor& a, const Tensor& b, const Tensor& mod) {
  return elementwise_op<Dev, EwOp::Add>("add", a, nullptr, &b, nullptr, mod);
}
template <class Dev>
Tensor sub_op(const Tensor& a, const Tensor& b, const Tensor& mod) {
  return elementwise_op<Dev, EwOp::Sub>("sub", a, nullptr, &b, nullptr, mod);
}
template <class Dev>
Tensor mul_op(const Tensor& a, const Tensor& b, const Tensor& mod) {
  return elementwise_op<Dev, EwOp::Mul>("mul", a, nullptr, &b, nullptr, mod);
}
template <class Dev>
Tensor neg_op(const Tensor& a, const Tensor& mod) {
  return elementwise_op<Dev, EwOp::Neg>("neg", a, nullptr, nullptr, nullptr, mod);
}
template <class Dev>
Tensor axpby_op(const Tensor& a, const Tensor& ca, const Tensor& b, const Tensor& cb, const Tensor& mod) {
  return elementwise_op<Dev, EwOp::Axpby>("axpby", a, &ca, &b, &cb, mod);
}
template <class Dev>
Tensor mul_const_op(const Tensor& a, const Tensor& c, const Tensor& mod) {
  return elementwise_op<Dev, EwOp::MulConst>("mul_const", a, &c, nullptr, nullptr, mod);
}

// Passes of kLincombTerms terms; each pass after the first continues from out.
template <class Dev>
Tensor lincomb_op(at::TensorList xs, const Tensor& consts, const Tensor& mod, const std::optional<Tensor>& scalar) {
  LincombArgs g = check_lincomb(xs, consts, mod, scalar);
  Dev dev(xs[0]);
  Tensor out = at::empty_like(xs[0]);
  g.out = out_ptr(out);
  const int64_t T = static_cast<int64_t>(xs.size());
  for (int64_t t0 = 0; t0 < T; t0 += kLincombTerms) {
    LincombArgs pass = g;
    pass.terms = static_cast<int>(std::min<int64_t>(kLincombTerms, T - t0));
    for (int t = 0; t < pass.terms; ++t) pass.x[t] = ptr(xs[t0 + t]);
    pass.consts = g.consts + t0 * g.L;
    pass.acc = t0 ? g.out : nullptr;
    dev.run("lincomb", [&](auto& ctx) { return lincomb(pass, ctx); });
  }
  return out;
}

// Passes of kTensorPairs pairs; each pass after the first continues from out.
template <class Dev>
Tensor tensor_product_op(at::TensorList a, at::TensorList b, const Tensor& mod) {
  auto [g, shape] = check_tensor_product(a, b, mod);
  Dev dev(a[0]);
  Tensor out = at::empty(shape, a[0].options());
  g.out = out_ptr(out);
  const int64_t T = static_cast<int64_t>(a.size());
  for (int64_t t0 = 0; t0 < T; t0 += kTensorPairs) {
    TensorProductArgs pass = g;
    pass.pairs = static_cast<int>(std::min<int64_t>(kTensorPairs, T - t0));
    for (int t = 0; t < pass.pairs; ++t) {
      pass.a[t] = ptr(a[t0 + t]);
      pass.b[t] = ptr(b[t0 + t]);
      if (b[t0 + t].numel() != a[0].numel()) pass.b_shared |= 1u << t;
    }
    pass.acc = t0 ? g.out : nullptr;
    dev.run("tensor_product", [&](auto& ctx) { return tensor_product(pass, ctx); });
  }
  return out;
}

template <class Dev>
Tensor automorphism_op(const Tensor& x, int64_t galois) {
  const int log_n = check_automorphism(x, galois);
  Dev dev(x);
  Tensor out = at::empty_like(x);
  dev.run("automorphism", [&](auto& ctx) {
    return automorphism(ptr(x), out_ptr(out), x.numel() >> log_n, log_n, static_cast<uint32_t>(galois), ctx);
  });
  return out;
}

template <class Dev>
Tensor keyswitch_inner_op(const Tensor& d, const Tensor& key_q, const Tensor& key_p, int64_t q_start,
                          int64_t digit_start, const Tensor& mod) {
  InnerArgs g = check_keyswitch_inner(d, key_q, key_p, q_start, digit_start, mod);
  Dev dev(d);
  Tensor out = at::empty(shape_with(d, 3, {2, d.size(-2), d.size(-1)}), d.options());
  g.out = out_ptr(out);
  dev.run("keyswitch_inner", [&](auto& ctx) { return keyswitch_inner(g, ctx); });
  return out;
}

template <class Dev>
Tensor hoisted_mac_op(const Tensor& d, const Tensor& c, at::TensorList keys_q, at::TensorList keys_p,
                      at::IntArrayRef galois, int64_t q_start, int64_t digit_start, const Tensor& c_p,
                      at::TensorList pts, at::IntArrayRef pt_baby, at::IntArrayRef pt_giant, int64_t giants,
                      const Tensor& mod) {
  MacArgs g = check_hoisted_mac(d, c, keys_q, keys_p, galois, q_start, digit_start, c_p, pts, pt_baby, pt_giant,
                                giants, mod);
  Dev dev(d);
  Tensor out = at::empty(shape_with(d, 3, {giants, 2, d.size(-2), d.size(-1)}), d.options());
  g.out = out_ptr(out);
  dev.run("hoisted_mac", [&](auto& ctx) { return hoisted_mac(g, ctx); });
  return out;
}

template <class Dev>
Tensor keyswitch_inner_sum_op(const Tensor& d, at::TensorList keys_q, at::TensorList keys_p, at::IntArrayRef galois,
                              int64_t q_start, int64_t digit_start, const Tensor& addend, const Tensor& c_add,
                              const std::optional<Tensor>& acc, const Tensor& mod) {
  InnerSumArgs g = check_keyswitch_inner_sum(d, keys_q, keys_p, galois, q_start, digit_start, addend, c_add, acc, mod);
  Dev dev(d);
  Tensor out = at::empty(shape_with(d, 4, {2, d.size(-2), d.size(-1)}), d.options());
  g.out = out_ptr(out);
  dev.run("keyswitch_inner_sum", [&](auto& ctx) { return keyswitch_inner_sum(g, ctx); });
  return out;
}

// ---- fused key switching ---------------------------------------------------------------

// The fused ops' tensor inputs, 16-byte aligned (copies where needed) for as long as the op runs.
struct Aligned {
  std::deque<Tensor> held;  // references stay valid as it grows
  template <class Dev>
  const Tensor& operator()(Dev& dev, const Tensor& t) {
    held.push_back(dev.aligned(t));
    return held.back();
  }
};

template <class Dev>
Tensor mod_up_op(const Tensor& a_in, const Tensor& pre, const Tensor& mod_ext, const Tensor& psi_ext,
                 const Tensor& psi_inv_ext, const Tensor& mats, at::IntArrayRef bounds,
                 at::OptionalIntArrayRef psi_rows) {
  Dev dev(a_in);
  Aligned al;
  const Tensor& a = al(dev, a_in);
  ModUpArgs g = check_mod_up("mod_up", a, nullptr, pre, mod_ext, al(dev, psi_ext), al(dev, psi_inv_ext), mats, bounds,
                             psi_rows);
  Tensor out = at::empty(shape_with(a, 2, {g.beta, mod_ext.size(0), a.size(-1)}), a.options());
  dev.run("mod_up", [&](auto& ctx) { return mod_up(g, out_ptr(out), ctx); });
  return out;
}

// mod_up_keyswitch_inner's arguments (also keyswitch's first half), checked; a is aligned by the caller.
template <class Dev>
std::pair<ModUpArgs, KeyArgs> check_mod_up_key(const char* op, Dev& dev, Aligned& al, const Tensor& a,
                                               const Tensor& pre, const Tensor& mod_ext, const Tensor& psi_ext,
                                               const Tensor& psi_inv_ext, const Tensor& mats, at::IntArrayRef bounds,
                                               const Tensor& key_q, const Tensor& key_p, int64_t q_start,
                                               int64_t digit_start, const std::optional<Tensor>& addend,
                                               const std::optional<Tensor>& c_add, const std::optional<Tensor>& b,
                                               at::OptionalIntArrayRef psi_rows, const std::optional<Tensor>& acc,
                                               int64_t galois) {
  const Tensor* bp = b ? &al(dev, *b) : nullptr;
  ModUpArgs g = check_mod_up(op, a, bp, pre, mod_ext, al(dev, psi_ext), al(dev, psi_inv_ext), mats, bounds, psi_rows);
  g.galois = check_fused_galois(op, galois, a.size(-1));
  FT_CHECK(!(b && g.galois), "fhetorch.", op, ": a fused rotation (galois != 1) does not take b; rotate the product");
  const std::optional<Tensor> add = addend ? std::optional<Tensor>(al(dev, *addend)) : std::nullopt;
  const std::optional<Tensor> ac = acc ? std::optional<Tensor>(al(dev, *acc)) : std::nullopt;
  return {g, check_key(g, a, al(dev, key_q), al(dev, key_p), q_start, digit_start, add, c_add, b.has_value(), ac, op)};
}

template <class Dev>
Tensor mod_up_keyswitch_inner_op(const Tensor& a_in, const Tensor& pre, const Tensor& mod_ext, const Tensor& psi_ext,
                                 const Tensor& psi_inv_ext, const Tensor& mats, at::IntArrayRef bounds,
                                 const Tensor& key_q, const Tensor& key_p, int64_t q_start, int64_t digit_start,
                                 const std::optional<Tensor>& addend, const std::optional<Tensor>& c_add,
                                 const std::optional<Tensor>& b, at::OptionalIntArrayRef psi_rows,
                                 const std::optional<Tensor>& acc, int64_t galois) {
  const char* op = "mod_up_keyswitch_inner";
  Dev dev(a_in);
  Aligned al;
  const Tensor& a = al(dev, a_in);
  const auto up = check_mod_up_key(op, dev, al, a, pre, mod_ext, psi_ext, psi_inv_ext, mats, bounds, key_q, key_p,
                                   q_start, digit_start, addend, c_add, b, psi_rows, acc, galois);
  const ModUpArgs& g = up.first;
  const KeyArgs& k = up.second;
  Tensor out = at::empty(shape_with(a, b ? 3 : 2, {2, mod_ext.size(0), a.size(-1)}), a.options());
  dev.run(op, [&](auto& ctx) { return mod_up_keyswitch_inner(g, k, out_ptr(out), ctx); });
  return out;
}

template <class Dev>
Tensor switch_modulus_op(const Tensor& x_in, at::IntArrayRef drop_rows, at::IntArrayRef keep_rows, const Tensor& pre,
                         const Tensor& mod_drop, const Tensor& psi_inv_drop, const Tensor& mod_dst,
                         const Tensor& psi_dst, const Tensor& mat, const Tensor& c_keep, const Tensor& c_sub,
                         const std::optional<Tensor>& addend, at::OptionalIntArrayRef psi_inv_drop_rows,
                         at::OptionalIntArrayRef psi_dst_rows, int64_t galois) {
  Dev dev(x_in);
  Aligned al;
  const std::optional<Tensor> add = addend ? std::optional<Tensor>(al(dev, *addend)) : std::nullopt;
  SwitchGeom g =
      check_switch_modulus(al(dev, x_in), drop_rows, keep_rows, pre, mod_drop, al(dev, psi_inv_drop), mod_dst,
                           al(dev, psi_dst), mat, c_keep, c_sub, add, psi_inv_drop_rows, psi_dst_rows);
  g.args.galois = check_fused_galois("switch_modulus", galois, x_in.size(-1));
  Tensor out = at::empty(g.out_shape, x_in.options());
  dev.run("switch_modulus", [&](auto& ctx) { return switch_modulus(g.args, out_ptr(out), ctx); });
  return out;
}

// switch_modulus(mod_up_keyswitch_inner(a, ...), ...) in one op: u, the key product over level + P, is
// its own scratch (allocated here, so that the switch's checks see its shape).
template <class Dev>
Tensor keyswitch_op(const Tensor& a_in, const Tensor& pre, const Tensor& mod_ext, const Tensor& psi_ext,
                    const Tensor& psi_inv_ext, const Tensor& mats, at::IntArrayRef bounds, const Tensor& key_q,
                    const Tensor& key_p, int64_t q_start, int64_t digit_start, const std::optional<Tensor>& addend,
                    const std::optional<Tensor>& c_add, const std::optional<Tensor>& b,
                    at::OptionalIntArrayRef psi_rows, int64_t galois, at::IntArrayRef drop_rows,
                    at::IntArrayRef keep_rows, const Tensor& down_pre, const Tensor& mod_drop,
                    const Tensor& psi_inv_drop, const Tensor& mod_dst, const Tensor& psi_dst, const Tensor& mat,
                    const Tensor& c_keep, const Tensor& c_sub, const std::optional<Tensor>& down_addend,
                    at::OptionalIntArrayRef psi_inv_drop_rows, at::OptionalIntArrayRef psi_dst_rows) {
  const char* op = "keyswitch";
  Dev dev(a_in);
  Aligned al;
  const Tensor& a = al(dev, a_in);
  const auto up = check_mod_up_key(op, dev, al, a, pre, mod_ext, psi_ext, psi_inv_ext, mats, bounds, key_q, key_p,
                                   q_start, digit_start, addend, c_add, b, psi_rows, std::nullopt, galois);
  const ModUpArgs& g = up.first;
  const KeyArgs& k = up.second;
  Tensor u = at::empty(shape_with(a, b ? 3 : 2, {2, mod_ext.size(0), a.size(-1)}), a.options());
  const std::optional<Tensor> down = down_addend ? std::optional<Tensor>(al(dev, *down_addend)) : std::nullopt;
  SwitchGeom sw = check_switch_modulus(u, drop_rows, keep_rows, down_pre, mod_drop, al(dev, psi_inv_drop), mod_dst,
                                       al(dev, psi_dst), mat, c_keep, c_sub, down, psi_inv_drop_rows, psi_dst_rows, op);
  sw.args.galois = g.galois;
  Tensor out = at::empty(sw.out_shape, a.options());
  dev.run(op, [&](auto& ctx) { return keyswitch(g, k, sw.args, out_ptr(u), out_ptr(out), ctx); });
  return out;
}

// ---- conversions and samplers --------------------------------------------------------------

template <class Dev>
Tensor to_rns_op(const Tensor& x, const Tensor& mod, const Tensor& r2) {
  const RowsGeom g = check_to_rns(x, mod, r2);
  Dev dev(x);
  Tensor out = at::empty(g.out_shape, x.options().dtype(at::kInt));
  dev.run("to_rns", [&](auto& ctx) {
    return to_rns(x.data_ptr<int64_t>(), out_ptr(out), g.rows, g.L, g.n, ptr(mod), ptr(r2), ctx);
  });
  return out;
}

template <class Dev>
Tensor crt_digits_op(const Tensor& x, const Tensor& mod, const Tensor& garner) {
  const RowsGeom g = check_crt_digits(x, mod, garner);
  Dev dev(x);
  Tensor out = at::empty_like(x);
  dev.run("crt_digits", [&](auto& ctx) {
    return crt_digits(ptr(x), out_ptr(out), g.rows, g.L, g.n, ptr(mod), ptr(garner), ctx);
  });
  return out;
}

template <class Dev>
Tensor sample_uniform_op(const Tensor& key, int64_t stream, const Tensor& mod, int64_t rows, int64_t n) {
  const uint32_t* k = check_sampler_key(key, "sample_uniform");
  check_mod(mod, mod.size(0), "sample_uniform");
  check_devices("sample_uniform", {&key, &mod});
  const int L = as_int(mod.size(0), "sample_uniform", "L");
  Dev dev(key);
  Tensor out = at::empty({as_int(rows, "sample_uniform", "rows"), L, as_int(n, "sample_uniform", "n")}, key.options());
  dev.run("sample_uniform", [&](auto& ctx) {
    return sample_uniform(k, static_cast<uint64_t>(stream), out_ptr(out), out.numel(), L, n, ptr(mod), ctx);
  });
  return out;
}

// sample_ternary and sample_cbd: (n,) int64.
template <class Dev, bool CBD>
Tensor sample_small_op(const Tensor& key, int64_t stream, int64_t n) {
  const char* op = CBD ? "sample_cbd" : "sample_ternary";
  const uint32_t* k = check_sampler_key(key, op);
  Dev dev(key);
  Tensor out = at::empty({as_int(n, op, "n")}, key.options().dtype(at::kLong));
  dev.run(op, [&](auto& ctx) {
    return CBD ? sample_cbd(k, static_cast<uint64_t>(stream), out.data_ptr<int64_t>(), n, ctx)
               : sample_ternary(k, static_cast<uint64_t>(stream), out.data_ptr<int64_t>(), n, ctx);
  });
  return out;
}

// Registers every op for Dev (one list for both devices).
template <class Dev>
void register_ops(torch::Library& m) {
  m.impl("ntt", &ntt_op<Dev>);
  m.impl("intt", &intt_op<Dev>);
  m.impl("bconv", &bconv_op<Dev>);
  m.impl("add", &add_op<Dev>);
  m.impl("sub", &sub_op<Dev>);
  m.impl("mul", &mul_op<Dev>);
  m.impl("neg", &neg_op<Dev>);
  m.impl("axpby", &axpby_op<Dev>);
  m.impl("mul_const", &mul_const_op<Dev>);
  m.impl("lincomb", &lincomb_op<Dev>);
  m.impl("tensor_product", &tensor_product_op<Dev>);
  m.impl("automorphism", &automorphism_op<Dev>);
  m.impl("keyswitch_inner", &keyswitch_inner_op<Dev>);
  m.impl("hoisted_mac", &hoisted_mac_op<Dev>);
  m.impl("keyswitch_inner_sum", &keyswitch_inner_sum_op<Dev>);
  m.impl("mod_up", &mod_up_op<Dev>);
  m.impl("mod_up_keyswitch_inner", &mod_up_keyswitch_inner_op<Dev>);
  m.impl("switch_modulus", &switch_modulus_op<Dev>);
  m.impl("keyswitch", &keyswitch_op<Dev>);
  m.impl("to_rns", &to_rns_op<Dev>);
  m.impl("crt_digits", &crt_digits_op<Dev>);
  m.impl("sample_uniform", &sample_uniform_op<Dev>);
  m.impl("sample_ternary", &sample_small_op<Dev, false>);
  m.impl("sample_cbd", &sample_small_op<Dev, true>);
  register_tfhe_ops<Dev>(m);
  register_tfhe_fft_ops<Dev>(m);
}

}  // namespace fhetorch::bind
