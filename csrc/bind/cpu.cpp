// CPU implementations of the ops in schema.cpp: argument checks, output allocation and a
// split of the work over threads; the arithmetic lives in csrc/cpu/.
#include <ATen/Parallel.h>
#include "common.h"
#include "../cpu/kernels.h"

namespace fhetorch::bind {
namespace {

using at::Tensor;

template <typename F>
void split(int64_t total, int64_t grain, F&& f) {
  at::parallel_for(0, total, grain, [&](int64_t a, int64_t b) { f(a, b); });
}

int64_t limbs_of(const Tensor& x) { return x.dim() >= 2 ? x.size(-2) : 1; }

Tensor ntt(const Tensor& x, const Tensor& mod, const Tensor& psi) {
  check_residues(x, "ntt", "x");
  const int64_t L = limbs_of(x), n = x.size(-1);
  const int log_n = log2_exact(n, "ntt");
  check_mod(mod, L, "ntt");
  check_residues(psi, "ntt", "psi");
  TORCH_CHECK(psi.sizes() == at::IntArrayRef({L, n}), "fhetorch.ntt: psi must be (L, N)");
  Tensor y = x.clone();
  int32_t* p = y.data_ptr<int32_t>();
  split(y.numel() / n, 1, [&](int64_t a, int64_t b) {
    cpu::ntt_rows(p, a, b, L, log_n, mod.data_ptr<int32_t>(), psi.data_ptr<int32_t>());
  });
  return y;
}

Tensor intt(const Tensor& x, const Tensor& mod, const Tensor& psi_inv, const Tensor& post) {
  check_residues(x, "intt", "x");
  const int64_t L = limbs_of(x), n = x.size(-1);
  const int log_n = log2_exact(n, "intt");
  check_mod(mod, L, "intt");
  check_residues(psi_inv, "intt", "psi_inv");
  check_residues(post, "intt", "post");
  TORCH_CHECK(psi_inv.sizes() == at::IntArrayRef({L, n}), "fhetorch.intt: psi_inv must be (L, N)");
  TORCH_CHECK(post.numel() == L, "fhetorch.intt: post must have L entries");
  Tensor y = x.clone();
  int32_t* p = y.data_ptr<int32_t>();
  split(y.numel() / n, 1, [&](int64_t a, int64_t b) {
    cpu::intt_rows(p, a, b, L, log_n, mod.data_ptr<int32_t>(), psi_inv.data_ptr<int32_t>(),
                   post.data_ptr<int32_t>());
  });
  return y;
}

Tensor bconv(const Tensor& x, const Tensor& mod_in, const Tensor& mod_out, const Tensor& mat) {
  check_residues(x, "bconv", "x");
  const int64_t La = limbs_of(x), n = x.size(-1), Lb = mod_out.size(0);
  TORCH_CHECK(La <= 256, "fhetorch.bconv: at most 256 input limbs");
  check_mod(mod_in, La, "bconv");
  check_mod(mod_out, Lb, "bconv");
  check_residues(mat, "bconv", "mat");
  TORCH_CHECK(mat.sizes() == at::IntArrayRef({Lb, La}), "fhetorch.bconv: mat must be (Lb, La)");
  auto shape = x.sizes().vec();
  shape[shape.size() - 2] = Lb;
  Tensor y = at::empty(shape, x.options());
  const int64_t batch = x.numel() / (La * n);
  split(batch * n, 256, [&](int64_t a, int64_t b) {
    cpu::bconv(x.data_ptr<int32_t>(), y.data_ptr<int32_t>(), a, b, La, Lb, n, mod_in.data_ptr<int32_t>(),
               mod_out.data_ptr<int32_t>(), mat.data_ptr<int32_t>());
  });
  return y;
}

Tensor binary(cpu::Binary op, const char* name, const Tensor& a, const Tensor& b, const Tensor& mod) {
  check_residues(a, name, "a");
  check_broadcast(a, b, name);
  const int64_t L = limbs_of(a), n = a.size(-1);
  check_mod(mod, L, name);
  Tensor out = at::empty_like(a);
  split(a.numel(), 4096, [&](int64_t i0, int64_t i1) {
    cpu::binary(op, a.data_ptr<int32_t>(), b.data_ptr<int32_t>(), out.data_ptr<int32_t>(), i0, i1,
                b.numel(), n, L, mod.data_ptr<int32_t>());
  });
  return out;
}
Tensor add(const Tensor& a, const Tensor& b, const Tensor& mod) { return binary(cpu::Binary::Add, "add", a, b, mod); }
Tensor sub(const Tensor& a, const Tensor& b, const Tensor& mod) { return binary(cpu::Binary::Sub, "sub", a, b, mod); }
Tensor mul(const Tensor& a, const Tensor& b, const Tensor& mod) { return binary(cpu::Binary::Mul, "mul", a, b, mod); }

Tensor neg(const Tensor& a, const Tensor& mod) {
  check_residues(a, "neg", "a");
  const int64_t L = limbs_of(a), n = a.size(-1);
  check_mod(mod, L, "neg");
  Tensor out = at::empty_like(a);
  split(a.numel(), 4096, [&](int64_t i0, int64_t i1) {
    cpu::neg(a.data_ptr<int32_t>(), out.data_ptr<int32_t>(), i0, i1, n, L, mod.data_ptr<int32_t>());
  });
  return out;
}

Tensor axpby_impl(const Tensor& a, const Tensor& ca, const Tensor* b, const Tensor* cb, const Tensor& mod,
                  const char* name) {
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
  Tensor out = at::empty_like(a);
  split(a.numel(), 4096, [&](int64_t i0, int64_t i1) {
    cpu::axpby(a.data_ptr<int32_t>(), ca.data_ptr<int32_t>(), b ? b->data_ptr<int32_t>() : nullptr,
               b ? cb->data_ptr<int32_t>() : nullptr, out.data_ptr<int32_t>(), i0, i1,
               b ? b->numel() : 1, n, L, mod.data_ptr<int32_t>());
  });
  return out;
}
Tensor axpby(const Tensor& a, const Tensor& ca, const Tensor& b, const Tensor& cb, const Tensor& mod) {
  return axpby_impl(a, ca, &b, &cb, mod, "axpby");
}
Tensor mul_const(const Tensor& a, const Tensor& c, const Tensor& mod) {
  return axpby_impl(a, c, nullptr, nullptr, mod, "mul_const");
}

Tensor tensor_product(const Tensor& a, const Tensor& b, const Tensor& mod) {
  check_residues(a, "tensor_product", "a");
  check_broadcast(a, b, "tensor_product");
  TORCH_CHECK(a.dim() >= 3 && a.size(-3) == 2, "fhetorch.tensor_product: a must be (..., 2, L, N)");
  const int64_t L = a.size(-2), n = a.size(-1), plane = L * n, batch = a.numel() / (2 * plane);
  const bool bb = b.numel() != a.numel();
  TORCH_CHECK(!bb || b.numel() == 2 * plane, "fhetorch.tensor_product: b must be a's shape or (2, L, N)");
  check_mod(mod, L, "tensor_product");
  auto shape = a.sizes().vec();
  shape[shape.size() - 3] = 3;
  Tensor out = at::empty(shape, a.options());
  split(batch * plane, 4096, [&](int64_t i0, int64_t i1) {
    cpu::tensor_product(a.data_ptr<int32_t>(), b.data_ptr<int32_t>(), out.data_ptr<int32_t>(), i0, i1, plane,
                        batch, bb, n, L, mod.data_ptr<int32_t>());
  });
  return out;
}

Tensor automorphism(const Tensor& x, int64_t galois) {
  check_residues(x, "automorphism", "x");
  const int64_t n = x.size(-1);
  const int log_n = log2_exact(n, "automorphism");
  TORCH_CHECK(galois % 2 == 1 && galois > 0 && galois < 2 * n, "fhetorch.automorphism: galois element must be odd in (0, 2N)");
  Tensor out = at::empty_like(x);
  split(x.numel() / n, 1, [&](int64_t a, int64_t b) {
    cpu::automorphism(x.data_ptr<int32_t>(), out.data_ptr<int32_t>(), a, b, log_n, static_cast<uint32_t>(galois));
  });
  return out;
}

Tensor keyswitch_inner(const Tensor& d, const Tensor& key_q, const Tensor& key_p, int64_t q_start,
                       int64_t digit_start, const Tensor& mod) {
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
  Tensor out = at::empty({2, L, n}, d.options());
  split(L * n, 1024, [&](int64_t i0, int64_t i1) {
    cpu::keyswitch_inner(d.data_ptr<int32_t>(), key_q.data_ptr<int32_t>(), key_p.data_ptr<int32_t>(),
                         out.data_ptr<int32_t>(), i0, i1, beta, L, Lq, K, Lq_key, q_start, digit_start, n,
                         mod.data_ptr<int32_t>());
  });
  return out;
}

Tensor to_rns(const Tensor& x, const Tensor& mod, const Tensor& r2) {
  TORCH_CHECK(x.scalar_type() == at::kLong && x.is_contiguous(), "fhetorch.to_rns: x must be contiguous int64");
  const int64_t L = mod.size(0), n = x.size(-1);
  check_mod(mod, L, "to_rns");
  check_residues(r2, "to_rns", "r2");
  auto shape = x.sizes().vec();
  shape.insert(shape.end() - 1, L);
  Tensor out = at::empty(shape, x.options().dtype(at::kInt));
  split(x.numel(), 1024, [&](int64_t i0, int64_t i1) {
    cpu::to_rns(x.data_ptr<int64_t>(), out.data_ptr<int32_t>(), i0, i1, L, n, mod.data_ptr<int32_t>(),
                r2.data_ptr<int32_t>());
  });
  return out;
}

Tensor crt_digits(const Tensor& x, const Tensor& mod, const Tensor& garner) {
  check_residues(x, "crt_digits", "x");
  const int64_t L = limbs_of(x), n = x.size(-1);
  TORCH_CHECK(L <= 256, "fhetorch.crt_digits: at most 256 limbs");
  check_mod(mod, L, "crt_digits");
  check_residues(garner, "crt_digits", "garner");
  TORCH_CHECK(garner.sizes() == at::IntArrayRef({L, L}), "fhetorch.crt_digits: garner must be (L, L)");
  Tensor out = at::empty_like(x);
  split(x.numel() / L, 256, [&](int64_t i0, int64_t i1) {
    cpu::crt_digits(x.data_ptr<int32_t>(), out.data_ptr<int32_t>(), i0, i1, L, n, mod.data_ptr<int32_t>(),
                    garner.data_ptr<int32_t>());
  });
  return out;
}

const uint32_t* key_words(const Tensor& key, const char* op) {
  check_residues(key, op, "key");
  TORCH_CHECK(key.numel() == 8, "fhetorch.", op, ": key must have 8 int32 words");
  return reinterpret_cast<const uint32_t*>(key.data_ptr<int32_t>());
}

Tensor sample_uniform(const Tensor& key, int64_t stream, const Tensor& mod, int64_t rows, int64_t n) {
  const uint32_t* k = key_words(key, "sample_uniform");
  const int64_t L = mod.size(0);
  check_mod(mod, L, "sample_uniform");
  Tensor out = at::empty({rows, L, n}, key.options());
  split(out.numel(), 1024, [&](int64_t i0, int64_t i1) {
    cpu::sample_uniform(k, static_cast<uint64_t>(stream), out.data_ptr<int32_t>(), i0, i1, L, n,
                        mod.data_ptr<int32_t>());
  });
  return out;
}

Tensor sample_ternary(const Tensor& key, int64_t stream, int64_t n) {
  const uint32_t* k = key_words(key, "sample_ternary");
  Tensor out = at::empty({n}, key.options().dtype(at::kLong));
  split(n, 1024, [&](int64_t i0, int64_t i1) {
    cpu::sample_ternary(k, static_cast<uint64_t>(stream), out.data_ptr<int64_t>(), i0, i1);
  });
  return out;
}

Tensor sample_cbd(const Tensor& key, int64_t stream, int64_t n) {
  const uint32_t* k = key_words(key, "sample_cbd");
  Tensor out = at::empty({n}, key.options().dtype(at::kLong));
  split(n, 1024, [&](int64_t i0, int64_t i1) {
    cpu::sample_cbd(k, static_cast<uint64_t>(stream), out.data_ptr<int64_t>(), i0, i1);
  });
  return out;
}

}  // namespace

TORCH_LIBRARY_IMPL(fhetorch, CPU, m) {
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
  m.impl("to_rns", &to_rns);
  m.impl("crt_digits", &crt_digits);
  m.impl("sample_uniform", &sample_uniform);
  m.impl("sample_ternary", &sample_ternary);
  m.impl("sample_cbd", &sample_cbd);
}

}  // namespace fhetorch::bind
