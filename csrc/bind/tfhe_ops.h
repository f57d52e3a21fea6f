// The bindings of the TFHE ops (schema.cpp, "tfhe_*"), written once for both devices as
// ops.h's are: check the arguments, allocate the output, call the device's implementation.
// Values mod q are int64 in [0, q); the kernels never read outside their tensors whatever the
// values (the library validates messages and LUT indices in Python, where the data is).
#pragma once
#include <string>

#include "common.h"
#include "../tfhe.h"

namespace fhetorch::bind {

inline void tfhe_need(bool ok, const char* op, const std::string& what) {
  if (!ok) fail(std::string("fhetorch.") + op + ": " + what);
}

inline std::string tfhe_shape(const Tensor& t) {
  std::string s = "(";
  for (int64_t i = 0; i < t.dim(); ++i) s += (i ? ", " : "") + std::to_string(t.size(i));
  return s + ")";
}

// x^-1 mod 2^32 for odd x, by Newton's iteration (each step doubles the correct low bits: 1 -> 32 in 5).
inline uint32_t tfhe_inverse_mod_2_32(uint32_t x) {
  uint32_t inv = 1;
  for (int k = 0; k < 5; ++k) inv *= 2u - x * inv;
  return inv;
}

// moduli = [q0, q1]: two distinct odd primes below 2^31 (not checked for primality here:
// the parameters are) -> the kernels' constants.
inline TfheMod tfhe_mod(at::IntArrayRef moduli, const char* op) {
  tfhe_need(moduli.size() == 2, op, "moduli must be [q0, q1], got " + std::to_string(moduli.size()) + " entries");
  TfheMod m{};
  for (int i = 0; i < 2; ++i) {
    const int64_t q = moduli[i];
    tfhe_need(q > 2 && q < (int64_t(1) << 31) && (q & 1), op,
              "moduli must be odd primes below 2^31, got " + std::to_string(q));
    m.q[i] = static_cast<int32_t>(q);
    m.qinv[i] = static_cast<int32_t>(tfhe_inverse_mod_2_32(static_cast<uint32_t>(q)));
  }
  tfhe_need(moduli[0] != moduli[1], op, "moduli must be two distinct primes");
  m.q_full = moduli[0] * moduli[1];
  // q0^-1 mod q1 by the extended Euclidean algorithm
  int64_t a = moduli[0] % moduli[1], b = moduli[1], x0 = 1, x1 = 0;
  while (b != 0) {
    const int64_t t = a / b;
    int64_t r = a - t * b; a = b; b = r;
    r = x0 - t * x1; x0 = x1; x1 = r;
  }
  tfhe_need(a == 1, op, "moduli must be coprime");
  m.q0_inv = ((x0 % moduli[1]) + moduli[1]) % moduli[1];
  m.q0_inv_mont = static_cast<int32_t>((m.q0_inv << 32) % moduli[1]);  // q0_inv < 2^31: fits
  return m;
}

inline void tfhe_check_int64(const Tensor& t, const char* op, const char* name, int64_t min_dim) {
  tfhe_need(t.scalar_type() == at::kLong && t.is_contiguous() && t.dim() >= min_dim, op,
            std::string(name) + " must be a contiguous int64 tensor of at least " + std::to_string(min_dim) +
                " dimensions, got " + tfhe_shape(t));
}

inline void tfhe_check_gadget(int64_t base_log, int64_t level, const char* op) {
  tfhe_need(base_log >= 1 && base_log <= 23 && level >= 1 && base_log * level <= 60, op,
            "base_log must be in [1, 23] and level >= 1 with base_log * level <= 60, got base_log " +
                std::to_string(base_log) + ", level " + std::to_string(level));
}

// The ring tables of the polynomial ops: glwe (..., k1, N), ggsw (..., k1, level, k1, 2, N).
inline TfheRing tfhe_ring(const char* op, int64_t k1, int64_t n, const Tensor& psi, const Tensor& psi_inv,
                          const Tensor& post, at::IntArrayRef moduli, int64_t base_log, int64_t level) {
  TfheRing r{};
  r.m = tfhe_mod(moduli, op);
  r.log_n = log2_exact(n, op);
  tfhe_need(r.log_n >= 4 && r.log_n <= 16, op, "N must be in [2^4, 2^16], got " + std::to_string(n));
  tfhe_need(k1 >= 2 && k1 <= 8, op, "the GLWE dimension k must be in [1, 7], got " + std::to_string(k1 - 1));
  tfhe_check_gadget(base_log, level, op);
  for (const Tensor* t : {&psi, &psi_inv}) {
    check_residues(*t, op, "psi / psi_inv");
    tfhe_need(t->dim() == 2 && t->size(0) == 2 && t->size(1) == n, op,
              "psi and psi_inv must be (2, N) with N = " + std::to_string(n) + ", got " + tfhe_shape(*t));
  }
  check_residues(post, op, "post");
  tfhe_need(post.numel() == 2, op, "post must have 2 entries");
  r.k1 = static_cast<int>(k1);
  r.base_log = static_cast<int>(base_log);
  r.level = static_cast<int>(level);
  r.psi = ptr(psi);
  r.psi_inv = ptr(psi_inv);
  r.post = ptr(post);
  return r;
}

inline void tfhe_check_ggsw(const Tensor& g, int64_t lead, const TfheRing& r, const char* op, const char* name) {
  check_residues(g, op, name);
  const int64_t n = int64_t(1) << r.log_n;
  bool ok = g.dim() == lead + 5;
  const int64_t want[5] = {r.k1, r.level, r.k1, 2, n};
  for (int i = 0; ok && i < 5; ++i) ok = g.size(lead + i) == want[i];
  tfhe_need(ok, op, std::string(name) + " must be " + (lead ? "(n, " : "(") + std::to_string(r.k1) + ", " +
                        std::to_string(r.level) + ", " + std::to_string(r.k1) + ", 2, " + std::to_string(n) +
                        "), got " + tfhe_shape(g));
}

template <class Dev>
Tensor tfhe_sample_int_op(const Tensor& key, int64_t stream, int64_t n, int64_t lo, int64_t hi) {
  const char* op = "tfhe_sample_int";
  const uint32_t* k = check_sampler_key(key, op);
  tfhe_need(n >= 0, op, "n must be >= 0");
  tfhe_need(hi >= lo && hi - lo < (int64_t(1) << 62), op, "need lo <= hi and hi - lo < 2^62");
  Dev dev(key);
  Tensor out = at::empty({n}, key.options().dtype(at::kLong));
  dev.run(op, [&](auto& ctx) {
    return tfhe_sample_int(k, static_cast<uint64_t>(stream), out.data_ptr<int64_t>(), n, lo,
                           static_cast<uint64_t>(hi - lo) + 1, ctx);
  });
  return out;
}

template <class Dev>
Tensor tfhe_modulus_switch_op(const Tensor& x, at::IntArrayRef moduli, int64_t bits) {
  const char* op = "tfhe_modulus_switch";
  tfhe_check_int64(x, op, "x", 0);
  const TfheMod m = tfhe_mod(moduli, op);
  tfhe_need(bits >= 1 && bits <= 62, op, "bits must be in [1, 62], got " + std::to_string(bits));
  Dev dev(x);
  Tensor out = at::empty_like(x);
  dev.run(op, [&](auto& ctx) {
    return tfhe_modulus_switch(x.data_ptr<int64_t>(), out.data_ptr<int64_t>(), x.numel(), m, static_cast<int>(bits),
                               ctx);
  });
  return out;
}

template <class Dev>
Tensor tfhe_decompose_op(const Tensor& x, at::IntArrayRef moduli, int64_t base_log, int64_t level) {
  const char* op = "tfhe_decompose";
  tfhe_check_int64(x, op, "x", 0);
  const TfheMod m = tfhe_mod(moduli, op);
  tfhe_check_gadget(base_log, level, op);
  Dev dev(x);
  std::vector<int64_t> shape(x.sizes().begin(), x.sizes().end());
  shape.push_back(level);
  Tensor out = at::empty(shape, x.options());
  dev.run(op, [&](auto& ctx) {
    return tfhe_decompose(x.data_ptr<int64_t>(), out.data_ptr<int64_t>(), x.numel(), m, static_cast<int>(base_log),
                          static_cast<int>(level), ctx);
  });
  return out;
}

template <class Dev>
Tensor tfhe_keyswitch_op(const Tensor& ct, const Tensor& keyswitch_key, at::IntArrayRef moduli, int64_t base_log,
                         int64_t level) {
  const char* op = "tfhe_keyswitch";
  tfhe_check_int64(ct, op, "ct", 1);
  check_residues(keyswitch_key, op, "keyswitch_key");
  tfhe_check_gadget(base_log, level, op);
  const int64_t n_in = ct.size(-1) - 1;
  tfhe_need(keyswitch_key.dim() == 4 && keyswitch_key.size(0) == n_in && keyswitch_key.size(1) == level && keyswitch_key.size(2) == 2 && keyswitch_key.size(3) >= 2,
            op, "keyswitch_key must be (n_in, level, 2, n_out + 1) with n_in = " + std::to_string(n_in) + ", level = " +
                    std::to_string(level) + ", got " + tfhe_shape(keyswitch_key));
  check_devices(op, {&ct, &keyswitch_key});
  KeyswitchArgs g{};
  g.m = tfhe_mod(moduli, op);
  g.n_in = as_int(n_in, op, "n_in");
  g.n_out = as_int(keyswitch_key.size(3) - 1, op, "n_out");
  g.base_log = static_cast<int>(base_log);
  g.level = static_cast<int>(level);
  g.B = batch_of(ct, 1);
  Dev dev(ct);
  Tensor out = at::empty(shape_with(ct, 1, {keyswitch_key.size(3)}), ct.options());
  g.ct = ct.data_ptr<int64_t>();
  g.keyswitch_key = ptr(keyswitch_key);
  g.out = out.data_ptr<int64_t>();
  dev.run(op, [&](auto& ctx) { return tfhe_keyswitch(g, ctx); });
  return out;
}

// The key switch on int8 tensor cores, pass 1: ct (..., n_in + 1) -> the digits (rows, K8) int8
// (csrc/tfhe.h, tfhe_ks_digits_one), rows >= the batch (torch._int_mm wants more than 16 on CUDA).
template <class Dev>
Tensor tfhe_keyswitch_digits_op(const Tensor& ct, at::IntArrayRef moduli, int64_t base_log, int64_t level,
                                int64_t rows) {
  const char* op = "tfhe_keyswitch_digits";
  tfhe_check_int64(ct, op, "ct", 1);
  tfhe_check_gadget(base_log, level, op);
  FT_CHECK(base_log <= kKsInt8MaxBaseLog, "fhetorch.", op, ": base_log must be at most ", kKsInt8MaxBaseLog,
           " (digits in [-2^(base_log-1), 2^(base_log-1)) must fit int8), got ", base_log,
           "; key-switch such keys with tfhe_keyswitch");
  const int64_t n_in = ct.size(-1) - 1, B = batch_of(ct, 1);
  FT_CHECK(n_in >= 1, "fhetorch.", op, ": ct must be (..., n_in + 1) with n_in >= 1, got ", ct.sizes());
  FT_CHECK(rows >= B, "fhetorch.", op, ": rows must be at least the batch of ct (", B, "), got ", rows,
           "; pass rows >= the batch (more than 16 for torch._int_mm on CUDA)");
  KeyswitchArgs g{};
  g.m = tfhe_mod(moduli, op);
  g.n_in = as_int(n_in, op, "n_in");
  g.base_log = static_cast<int>(base_log);
  g.level = static_cast<int>(level);
  (void)as_int(n_in * level, op, "n_in * level");
  g.B = B;
  Dev dev(ct);
  Tensor out = at::empty({rows, tfhe_ks_digit_cols(g)}, ct.options().dtype(at::kChar));
  g.ct = ct.data_ptr<int64_t>();
  dev.run(op, [&](auto& ctx) { return tfhe_keyswitch_digits(g, out.data_ptr<int8_t>(), rows, ctx); });
  return out;
}

// Pass 3: sums (rows, kKsPlanes (n_out + 1)) int32 (torch._int_mm of the digits by the key's byte
// planes), ct (..., n_in + 1) for the bodies -> (..., n_out + 1) mod q (tfhe_ks_combine_one).
template <class Dev>
Tensor tfhe_keyswitch_combine_op(const Tensor& sums, const Tensor& ct, at::IntArrayRef moduli) {
  const char* op = "tfhe_keyswitch_combine";
  check_residues(sums, op, "sums");
  tfhe_check_int64(ct, op, "ct", 1);
  FT_CHECK(ct.size(-1) >= 1, "fhetorch.", op, ": ct must be (..., n_in + 1), got ", ct.sizes());
  FT_CHECK(sums.dim() == 2 && sums.size(1) >= 2 * kKsPlanes && sums.size(1) % kKsPlanes == 0, "fhetorch.", op,
           ": sums must be (rows, ", kKsPlanes, " (n_out + 1)) with n_out >= 1 (2 primes x 4 byte planes per output ",
           "coefficient), got ", sums.sizes());
  const int64_t B = batch_of(ct, 1);
  FT_CHECK(sums.size(0) >= B, "fhetorch.", op, ": sums must have a row per ciphertext of ct (", B, "), got ",
           sums.size(0));
  check_devices(op, {&sums, &ct});
  KeyswitchArgs g{};
  g.m = tfhe_mod(moduli, op);
  g.n_in = as_int(ct.size(-1) - 1, op, "n_in");
  g.n_out = as_int(sums.size(1) / kKsPlanes - 1, op, "n_out");
  g.B = B;
  Dev dev(ct);
  const Tensor s = dev.aligned(sums);
  Tensor out = at::empty(shape_with(ct, 1, {g.n_out + int64_t(1)}), ct.options());
  g.ct = ct.data_ptr<int64_t>();
  g.out = out.data_ptr<int64_t>();
  dev.run(op, [&](auto& ctx) { return tfhe_keyswitch_combine(g, ptr(s), ctx); });
  return out;
}

template <class Dev>
Tensor tfhe_external_product_op(const Tensor& glwe, const Tensor& ggsw, const Tensor& psi, const Tensor& psi_inv,
                                const Tensor& post, at::IntArrayRef moduli, int64_t base_log, int64_t level) {
  const char* op = "tfhe_external_product";
  tfhe_check_int64(glwe, op, "glwe", 2);
  const TfheRing r = tfhe_ring(op, glwe.size(-2), glwe.size(-1), psi, psi_inv, post, moduli, base_log, level);
  tfhe_check_ggsw(ggsw, 0, r, op, "ggsw");
  check_devices(op, {&glwe, &ggsw, &psi, &psi_inv, &post});
  Dev dev(glwe);
  Tensor out = at::empty_like(glwe);
  dev.run(op, [&](auto& ctx) {
    return tfhe_external_product(r, glwe.data_ptr<int64_t>(), ptr(ggsw), out.data_ptr<int64_t>(), batch_of(glwe, 2),
                                 ctx);
  });
  return out;
}

// What the GLWE key switch ops share: x (..., 2, N) or with lwe_scale LWE inputs (..., N + 1) (y,
// when given, the same shape), key (level, 2, 2, N), galois odd in (0, 2N), shift in [0, 2N); runs the
// device's tfhe_glwe_keyswitch. Output (..., 2, N).
template <class Dev>
Tensor tfhe_run_glwe_keyswitch(const char* op, const Tensor& x, const Tensor* y, const Tensor& key, const Tensor& psi,
                               const Tensor& psi_inv, const Tensor& post, at::IntArrayRef moduli, int64_t base_log,
                               int64_t level, int64_t galois, int64_t shift, bool add,
                               std::optional<int64_t> lwe_scale) {
  const bool lwe = lwe_scale.has_value();
  tfhe_check_int64(x, op, "x", lwe ? 1 : 2);
  check_residues(key, op, "key");
  tfhe_need(key.dim() == 4 && key.size(0) == level && key.size(1) == 2 && key.size(2) == 2, op,
            "key must be (level, 2, 2, N) with level " + std::to_string(level) + ", got " + tfhe_shape(key));
  const int64_t n = key.size(3), two_n = 2 * n;
  if (lwe)
    tfhe_need(x.size(-1) == n + 1, op, "LWE inputs must be (..., N + 1) with the key's N = " + std::to_string(n) +
                                           ", got " + tfhe_shape(x));
  else
    tfhe_need(x.size(-2) == 2 && x.size(-1) == n, op,
              "ciphertexts must be (..., 2, N) GLWE of k = 1 with the key's N = " + std::to_string(n) + ", got " +
                  tfhe_shape(x));
  GlweKeyswitchArgs g{};
  g.r = tfhe_ring(op, 2, n, psi, psi_inv, post, moduli, base_log, level);
  if (y != nullptr) {
    tfhe_check_int64(*y, op, "y", 1);
    tfhe_need(y->sizes() == x.sizes(), op, "y must have x's shape " + tfhe_shape(x) + ", got " + tfhe_shape(*y));
  }
  tfhe_need(galois > 0 && galois < two_n && (galois & 1), op,
            "galois must be odd and in (0, 2N), got " + std::to_string(galois));
  tfhe_need(shift >= 0 && shift < two_n, op, "shift must be in [0, 2N), got " + std::to_string(shift));
  g.in.ginv = tfhe_inverse_mod_2_32(static_cast<uint32_t>(galois)) & static_cast<uint32_t>(two_n - 1);  // mod 2N
  g.in.shift = static_cast<uint32_t>(shift);
  g.in.add = add;
  g.in.lwe = lwe;
  if (lwe) {
    const int64_t sc = *lwe_scale;
    tfhe_need(sc >= 0 && sc < g.r.m.q_full, op, "lwe_scale must be in [0, q), got " + std::to_string(sc));
    for (int l = 0; l < 2; ++l) {
      const int64_t ql = g.r.m.q[l];
      g.in.scale_mont[l] = static_cast<int32_t>(((sc % ql) << 32) % ql);  // (sc mod q_l) < 2^31: fits
    }
  }
  if (y != nullptr) check_devices(op, {&x, y, &key, &psi, &psi_inv, &post});
  else check_devices(op, {&x, &key, &psi, &psi_inv, &post});
  Dev dev(x);
  std::vector<int64_t> shape(x.sizes().begin(), x.sizes().end());
  if (lwe) {
    shape.back() = 2;
    shape.push_back(n);
  }
  Tensor out = at::empty(shape, x.options());
  g.in.x = x.data_ptr<int64_t>();
  g.in.y = y == nullptr ? nullptr : y->data_ptr<int64_t>();
  g.key = ptr(key);
  g.out = out.data_ptr<int64_t>();
  g.B = lwe ? batch_of(x, 1) : batch_of(x, 2);
  dev.run(op, [&](auto& ctx) { return tfhe_glwe_keyswitch(g, ctx); });
  return out;
}

template <class Dev>
Tensor tfhe_glwe_keyswitch_op(const Tensor& ct, const Tensor& key, const Tensor& psi, const Tensor& psi_inv,
                              const Tensor& post, at::IntArrayRef moduli, int64_t base_log, int64_t level,
                              int64_t galois) {
  return tfhe_run_glwe_keyswitch<Dev>("tfhe_glwe_keyswitch", ct, nullptr, key, psi, psi_inv, post, moduli, base_log,
                                      level, galois, 0, false, std::nullopt);
}

template <class Dev>
Tensor tfhe_glwe_pack_step_op(const Tensor& x, const std::optional<Tensor>& y, const Tensor& key, const Tensor& psi,
                              const Tensor& psi_inv, const Tensor& post, at::IntArrayRef moduli, int64_t base_log,
                              int64_t level, int64_t galois, int64_t shift, std::optional<int64_t> lwe_scale) {
  return tfhe_run_glwe_keyswitch<Dev>("tfhe_glwe_pack_step", x, y ? &*y : nullptr, key, psi, psi_inv, post, moduli,
                                      base_log, level, galois, shift, true, lwe_scale);
}

// What both blind rotations share: ct (..., n + 1), luts (T, N), lut_index; g.r and g.n set by
// the caller (from its key's shape); runs the device's tfhe_blind_rotate.
template <class Dev>
Tensor tfhe_run_blind_rotate(const char* op, BlindRotateArgs& g, const Tensor& ct, const Tensor& luts,
                             const std::optional<Tensor>& lut_index, const Tensor& bsk,
                             std::initializer_list<const Tensor*> tables) {
  const int64_t B = batch_of(ct, 1);
  if (lut_index) {
    tfhe_check_int64(*lut_index, op, "lut_index", 0);
    tfhe_need(lut_index->numel() == B, op, "lut_index must have one entry per ciphertext (" + std::to_string(B) +
                                               "), got " + std::to_string(lut_index->numel()));
  }
  check_devices(op, {&ct, &luts, lut_index ? &*lut_index : nullptr, &bsk, *tables.begin()});
  check_devices(op, tables);
  g.B = B;
  g.T = luts.size(0);
  Dev dev(ct);
  Tensor out = at::empty(shape_with(ct, 1, {g.r.k1, luts.size(1)}), ct.options());
  g.ct = ct.data_ptr<int64_t>();
  g.luts = luts.data_ptr<int64_t>();
  g.lut_index = lut_index ? lut_index->data_ptr<int64_t>() : nullptr;
  g.bsk = ptr(bsk);
  g.acc = out.data_ptr<int64_t>();
  dev.run(op, [&](auto& ctx) { return tfhe_blind_rotate(g, ctx); });
  return out;
}

template <class Dev>
Tensor tfhe_blind_rotate_op(const Tensor& ct, const Tensor& luts, const std::optional<Tensor>& lut_index,
                            const Tensor& bsk, const Tensor& psi, const Tensor& psi_inv, const Tensor& post,
                            at::IntArrayRef moduli, int64_t base_log, int64_t level) {
  const char* op = "tfhe_blind_rotate";
  tfhe_check_int64(ct, op, "ct", 1);
  tfhe_check_int64(luts, op, "luts", 2);
  tfhe_need(luts.dim() == 2 && luts.size(0) >= 1, op, "luts must be (T, N) with T >= 1, got " + tfhe_shape(luts));
  tfhe_need(bsk.dim() == 6, op, "bsk must be (n, k + 1, level, k + 1, 2, N), got " + tfhe_shape(bsk));
  BlindRotateArgs g{};
  g.r = tfhe_ring(op, bsk.size(1), luts.size(1), psi, psi_inv, post, moduli, base_log, level);
  tfhe_check_ggsw(bsk, 1, g.r, op, "bsk");
  const int64_t n = ct.size(-1) - 1;
  tfhe_need(bsk.size(0) == n, op, "ct's LWE dimension " + std::to_string(n) + " differs from the key's " +
                                      std::to_string(bsk.size(0)));
  g.n = as_int(n, op, "n");
  g.grouping = 1;
  return tfhe_run_blind_rotate<Dev>(op, g, ct, luts, lut_index, bsk, {&psi, &psi_inv, &post});
}

template <class Dev>
Tensor tfhe_multi_bit_blind_rotate_op(const Tensor& ct, const Tensor& luts, const std::optional<Tensor>& lut_index,
                                      const Tensor& bsk, const Tensor& psi, const Tensor& psi_inv, const Tensor& post,
                                      const Tensor& mono_exp, const Tensor& mono_pow, at::IntArrayRef moduli,
                                      int64_t base_log, int64_t level) {
  const char* op = "tfhe_multi_bit_blind_rotate";
  tfhe_check_int64(ct, op, "ct", 1);
  tfhe_check_int64(luts, op, "luts", 2);
  tfhe_need(luts.dim() == 2 && luts.size(0) >= 1, op, "luts must be (T, N) with T >= 1, got " + tfhe_shape(luts));
  tfhe_need(bsk.dim() == 7, op, "bsk must be (n / G, 2^G, k + 1, level, k + 1, 2, N), got " + tfhe_shape(bsk));
  const int64_t subsets = bsk.size(1);
  int grouping = 0;
  while (grouping <= kTfheMaxGrouping && (int64_t(1) << grouping) < subsets) ++grouping;
  tfhe_need(grouping >= 2 && grouping <= kTfheMaxGrouping && (int64_t(1) << grouping) == subsets, op,
            "bsk's second dimension must be 2^G with G in [2, " + std::to_string(kTfheMaxGrouping) + "], got " +
                std::to_string(subsets));
  BlindRotateArgs g{};
  g.r = tfhe_ring(op, bsk.size(2), luts.size(1), psi, psi_inv, post, moduli, base_log, level);
  tfhe_check_ggsw(bsk, 2, g.r, op, "bsk");
  const int64_t n = ct.size(-1) - 1, two_n = int64_t(2) << g.r.log_n;
  tfhe_need(bsk.size(0) * grouping == n, op, "ct's LWE dimension " + std::to_string(n) + " differs from the key's " +
                                                 std::to_string(bsk.size(0) * grouping));
  check_residues(mono_exp, op, "mono_exp");
  check_residues(mono_pow, op, "mono_pow");
  tfhe_need(mono_exp.dim() == 2 && mono_exp.size(0) == 2 && mono_exp.size(1) == two_n / 2, op,
            "mono_exp must be (2, N), got " + tfhe_shape(mono_exp));
  tfhe_need(mono_pow.dim() == 2 && mono_pow.size(0) == 2 && mono_pow.size(1) == two_n, op,
            "mono_pow must be (2, 2N), got " + tfhe_shape(mono_pow));
  g.n = as_int(n, op, "n");
  g.grouping = grouping;
  g.mono_exp = ptr(mono_exp);
  g.mono_pow = ptr(mono_pow);
  return tfhe_run_blind_rotate<Dev>(op, g, ct, luts, lut_index, bsk, {&psi, &psi_inv, &post, &mono_exp, &mono_pow});
}

template <class Dev>
void register_tfhe_ops(torch::Library& m) {
  m.impl("tfhe_sample_int", &tfhe_sample_int_op<Dev>);
  m.impl("tfhe_modulus_switch", &tfhe_modulus_switch_op<Dev>);
  m.impl("tfhe_decompose", &tfhe_decompose_op<Dev>);
  m.impl("tfhe_keyswitch", &tfhe_keyswitch_op<Dev>);
  m.impl("tfhe_keyswitch_digits", &tfhe_keyswitch_digits_op<Dev>);
  m.impl("tfhe_keyswitch_combine", &tfhe_keyswitch_combine_op<Dev>);
  m.impl("tfhe_external_product", &tfhe_external_product_op<Dev>);
  m.impl("tfhe_glwe_keyswitch", &tfhe_glwe_keyswitch_op<Dev>);
  m.impl("tfhe_glwe_pack_step", &tfhe_glwe_pack_step_op<Dev>);
  m.impl("tfhe_blind_rotate", &tfhe_blind_rotate_op<Dev>);
  m.impl("tfhe_multi_bit_blind_rotate", &tfhe_multi_bit_blind_rotate_op<Dev>);
}

}  // namespace fhetorch::bind
