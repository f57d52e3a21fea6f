// The table of contents of fhetorch's kernels: every op's schema, defined once.
// The bindings (csrc/bind/ops.h, one for both devices) are registered for the CPU in
// csrc/bind/cpu.cpp and for CUDA in csrc/bind/cuda.cpp.
//
// Shared conventions. Residues are int32, canonical in [0, q). "mod" is an (L, 2) int32
// tensor of [q, q^-1 mod 2^32] per limb. A polynomial is (L, N) with limbs contiguous;
// leading dimensions batch polynomials, and row r of a (..., L, N) tensor uses limb r % L.
// Ring elements are kept in Montgomery form (x * 2^32 mod q); per-limb constants are
// Montgomery-form too, so a product with a constant is one Montgomery reduction.
#include <Python.h>
#include <torch/library.h>

extern "C" {
// `import fhetorch._C` loads this library, which registers the ops below.
PyObject* PyInit__C(void) {
  static struct PyModuleDef module_def = {PyModuleDef_HEAD_INIT, "_C", nullptr, -1, nullptr};
  return PyModule_Create(&module_def);
}
}

TORCH_LIBRARY(fhetorch, m) {
  // Forward negacyclic NTT of every row: natural order in, bit-reversed order out.
  // psi (L, N): psi^brev(k) in Montgomery form, psi a primitive 2N-th root mod q.
  // Table row maps (here and in every op below that takes one; csrc/table_rows.h): with
  // psi_rows (one entry per limb, L <= 256), psi is any (R, N) table (R <= 32768) and limb l
  // reads its row psi_rows[l], so the ring's full tables serve every limb subset (a level, a
  // digit, the special primes) without copies; without it psi is (L, N), limb l reading row l.
  // Bad maps (wrong length, a row outside the table) are refused on every device.
  m.def("ntt(Tensor x, Tensor mod, Tensor psi, int[]? psi_rows=None) -> Tensor");
  // Inverse NTT: bit-reversed in, natural out, then out *= post[l] (Montgomery product),
  // so post = N^-1 * 2^32 keeps Montgomery form and post = N^-1 returns standard form.
  // psi_rows: as ntt's, for psi_inv.
  m.def("intt(Tensor x, Tensor mod, Tensor psi_inv, Tensor post, int[]? psi_rows=None) -> Tensor");
  // Fast base conversion, coefficient-wise: x (..., La, N) standard form; y (..., Lb, N)
  // Montgomery form with y_i = sum_j centre(x_j) * mat[i][j] * 2^-32 mod p_i.
  m.def("bconv(Tensor x, Tensor mod_in, Tensor mod_out, Tensor mat) -> Tensor");
  // a (op) b, b broadcast over the leading dimensions of a (b.numel() divides a.numel()).
  m.def("add(Tensor a, Tensor b, Tensor mod) -> Tensor");
  m.def("sub(Tensor a, Tensor b, Tensor mod) -> Tensor");
  m.def("mul(Tensor a, Tensor b, Tensor mod) -> Tensor");  // Montgomery product
  m.def("neg(Tensor a, Tensor mod) -> Tensor");
  // a * ca[l] + b * cb[l] with per-limb Montgomery constants; b broadcast as in add.
  m.def("axpby(Tensor a, Tensor ca, Tensor b, Tensor cb, Tensor mod) -> Tensor");
  m.def("mul_const(Tensor a, Tensor c, Tensor mod) -> Tensor");  // a * c[l]
  // sum_t xs[t] * consts[t, l] in one pass over the data (up to 16 terms per kernel; more run
  // as passes that continue from the partial sum): xs T >= 1 tensors of one shape (..., L, N),
  // consts (T, L) per-term per-limb Montgomery constants. scalar (L,) (one number's residues,
  // Montgomery form) is added to polynomial 0 of each group of K = xs[0].size(-3) polynomials
  // (K = 1 for a 2-D xs): component 0 of each ciphertext, i.e. add_scalar. Canonical output;
  // equal to mul_const of the first term then axpby (ca = consts[t], cb = 1) per further term,
  // then add, bit for bit.
  m.def("lincomb(Tensor[] xs, Tensor consts, Tensor mod, Tensor? scalar=None) -> Tensor");
  // Sum of ciphertext tensor products: pairs a[t] (..., 2, L, N) (one shape), b[t] a[t]'s shape
  // or (2, L, N) -> (..., 3, L, N) = sum_t (a0 b0, a0 b1 + a1 b0, a1 b1), one read of every
  // operand (a polynomial's spine, relinearised once).
  m.def("tensor_product(Tensor[] a, Tensor[] b, Tensor mod) -> Tensor");
  // X -> X^galois on NTT-domain rows (bit-reversed order); galois odd, mod 2N.
  m.def("automorphism(Tensor x, int galois) -> Tensor");
  // Key-switching inner product: d (..., beta, Lq + K, N) holds ModUp'd digits whose first
  // Lq limbs are key limbs [q_start, q_start + Lq) of key_q (digits, 2, Lq_key, N) and whose
  // last K limbs are key_p (digits, 2, K, N); digit j uses key digit digit_start + j.
  // out (..., 2, Lq + K, N) = sum_j d_j * key_j, the key shared by the batch.
  m.def("keyswitch_inner(Tensor d, Tensor key_q, Tensor key_p, int q_start, int digit_start, Tensor mod) -> Tensor");
  // Hoisted rotations times plaintext diagonals over P*Q (a linear transform's baby steps,
  // Cheddar Par.5; csrc/hoisted_mac.h). d (..., beta, L+K, N): mod_up of c[..., 1, :, :]; c
  // (..., 2, L, N); mod (L+K, 2) of the extended basis; c_p (L,): P mod q_i (Montgomery). Baby
  // step b rotates by galois[b] with key (keys_q[b], keys_p[b]) as keyswitch_inner's (same
  // q_start and digit_start); galois[b] = 1 means no rotation (its keys are not read). Per
  // ciphertext, in P*Q,
  //   u_b = (sum_j aut(d_j) * key_bj[0] + P * aut(c0), sum_j aut(d_j) * key_bj[1])
  //   (galois 1: u_b = P * c), P * x being x * c_p on the first L limbs and 0 on P's,
  // so ModDown(u_b) is the rotated ciphertext. out (..., giants, 2, L+K, N): out[g] = sum of
  // pts[k] * u_(pt_baby[k]) over the k with pt_giant[k] = g; pts[k] (L+K, N), shared by the
  // batch. At most 16 baby steps and 8 giants per call, one diagonal per (baby, giant).
  m.def("hoisted_mac(Tensor d, Tensor c, Tensor[] keys_q, Tensor[] keys_p, int[] galois, int q_start, "
        "int digit_start, Tensor c_p, Tensor[] pts, int[] pt_baby, int[] pt_giant, int giants, Tensor mod) -> Tensor");
  // A fused linear transform's giant steps summed over P*Q (csrc/hoisted_mac.h): d (..., G, beta, L+K, N)
  // holds the ModUp'd digits of G polynomials y_k1 (digits and key limbs as keyswitch_inner's, the same
  // q_start and digit_start for every key); addend (..., G, La, N) their y_k0; c_add (La,) Montgomery
  // constants; acc (..., 2, L+K, N) or None. With aut_k the automorphism by galois[k] (key k's),
  //   out = acc + sum_k (sum_j aut_k(d_kj) * key_kj, + aut_k(y_k0) * c_add on component 0, limbs < La),
  // out (..., 2, L+K, N): sum_k of the key switches of sigma_k(y_k) left over P*Q (hoisted: the
  // digits are rotated after their ModUp). 1 to 8 terms.
  m.def("keyswitch_inner_sum(Tensor d, Tensor[] keys_q, Tensor[] keys_p, int[] galois, int q_start, "
        "int digit_start, Tensor addend, Tensor c_add, Tensor? acc, Tensor mod) -> Tensor");
  // ---- fused key switching (csrc/keyswitch.h; csrc/cpu/keyswitch.cpp, csrc/cuda/keyswitch.cu) ----
  // N in [2^10, 2^17] on every device (csrc/keyswitch.h); any number of leading batch
  // dimensions, one launch.
  // ModUp of a level polynomial to the extended basis "ext" = level (L limbs) + special
  // primes (K limbs), one lift per digit. a (..., L, N): NTT domain, Montgomery form. Tables
  // of ext: mod_ext (L+K, 2), psi_ext / psi_inv_ext (L+K, N) or, with psi_rows (L+K entries),
  // any (R, N) tables (both of one shape) of which ext limb i reads row psi_rows[i] (the
  // ring's full tables: no per-level copies). bounds = [0 = lo_0 < lo_1 < ...
  // < lo_beta = L]: digit j is limbs [lo_j, lo_(j+1)). pre (L,): INTT post-constants giving
  // the standard-form BConv input [a * (Q_j/q_i)^-1]_(q_i) of limb i of digit j (N^-1
  // folded in). mats (beta, L+K, alpha_max): row i of digit j is digit j's centred BConv
  // matrix row to ext limb i (rows of the digit's own limbs and columns beyond its size
  // are ignored). out (..., beta, L+K, N): out[j][i] = a[i] for i in digit j, otherwise
  // NTT(bconv(INTT(a[digit j]) * pre))[i] -- the digit lifted to ext.
  m.def("mod_up(Tensor a, Tensor pre, Tensor mod_ext, Tensor psi_ext, Tensor psi_inv_ext, Tensor mats, "
        "int[] bounds, int[]? psi_rows=None) -> Tensor");
  // ModUp and the key-switching inner product in one: out (..., 2, L+K, N) =
  // keyswitch_inner(mod_up(a, ...), key_q, key_p, q_start, digit_start, mod_ext), plus
  // addend[..., c, i, :] * c_add[i] on the first La limbs when addend (..., 2, La, N) (a's
  // batch, La <= L+K) and c_add (La,) are given (relinearisation's P * (d0, d1)). Equal to
  // that composition bit for bit; the beta lifted digits are never stored. With b (HMult's
  // tensor product fused in): a (..., 2, L, N) and b (a's shape, or (2, L, N) shared by the
  // batch) are ciphertexts, the lifted polynomial is a1 * b1 and the addend is
  // (a0 b0, a0 b1 + a1 b0) (then `addend` must be None and c_add (L,) given) -- the same as
  // tensor_product followed by the op on d[..., 2, :, :] with addend d[..., :2, :, :].
  // An addend of one component (..., 1, La, N) adds to component 0 only (a rotation's
  // P * sigma(c0)). acc (the result's shape) is added to the whole result (a running sum over
  // the giant steps of a linear transform). psi_rows: as mod_up's. galois (odd, in (0, 2N); 1:
  // none) fuses a rotation in: the op acts on automorphism(a, galois) and automorphism(addend,
  // galois) (a rotation's key switch of sigma(c1) with P * sigma(c0)); not with b.
  m.def("mod_up_keyswitch_inner(Tensor a, Tensor pre, Tensor mod_ext, Tensor psi_ext, Tensor psi_inv_ext, "
        "Tensor mats, int[] bounds, Tensor key_q, Tensor key_p, int q_start, int digit_start, "
        "Tensor? addend=None, Tensor? c_add=None, Tensor? b=None, int[]? psi_rows=None, Tensor? acc=None, "
        "int galois=1) -> Tensor");
  // Modulus switching (rescale, ModDown, both at once, rational rescaling): x (..., Ls, N)
  // NTT domain -> out (..., Ld, N) with, for each polynomial p and destination limb i,
  //   out[p][i] = x[p][keep_rows[i]] * c_keep[i] + NTT(bconv(INTT(x[p][drop_rows]) * pre))[i] * c_sub[i]
  // (keep_rows[i] = -1: that term is 0, for primes added by rational rescaling), plus an
  // addend. x's polynomials come in groups of K = x.size(-3) (1 for a 2-D x; a ciphertext's
  // components): addend (..., Ka, Ld, N) with x's leading dimensions adds addend[..., k, :, :]
  // to polynomial k < Ka of each group; an addend of one dimension less, (..., Ld, N), adds to
  // polynomial 0 (a rotation's sigma(c0)). D = len(drop_rows) in [1, 256], Ld =
  // len(keep_rows) in [1, 256]. Tables: mod_drop (D, 2), psi_inv_drop (D, N), pre (D,);
  // mod_dst (Ld, 2), psi_dst (Ld, N); mat (Ld, D) centred (as bconv's); c_keep, c_sub (Ld,)
  // Montgomery constants. With psi_inv_drop_rows (D entries) / psi_dst_rows (Ld entries),
  // psi_inv_drop / psi_dst are any (R, N) tables, dropped limb k reading row
  // psi_inv_drop_rows[k] and destination limb i row psi_dst_rows[i] (as ntt's psi_rows).
  // galois (odd, in (0, 2N); 1: none): the addend added is automorphism(addend, galois) (a
  // rotation's sigma(c0)).
  m.def("switch_modulus(Tensor x, int[] drop_rows, int[] keep_rows, Tensor pre, Tensor mod_drop, "
        "Tensor psi_inv_drop, Tensor mod_dst, Tensor psi_dst, Tensor mat, Tensor c_keep, Tensor c_sub, "
        "Tensor? addend=None, int[]? psi_inv_drop_rows=None, int[]? psi_dst_rows=None, int galois=1) -> Tensor");
  // A whole key switch: switch_modulus(mod_up_keyswitch_inner(a, pre, mod_ext, psi_ext, psi_inv_ext,
  // mats, bounds, key_q, key_p, q_start, digit_start, addend, c_add, b, psi_rows, None, galois),
  // drop_rows, keep_rows, down_pre, mod_drop, psi_inv_drop, mod_dst, psi_dst, mat, c_keep, c_sub,
  // down_addend, psi_inv_drop_rows, psi_dst_rows, galois), equal to that composition bit for bit
  // (a rotation, a relinearisation, HMult's with its rescale). On the GPU the key product of the
  // dropped rows runs first, then that of the others beside ModDown's first launches on a second
  // stream (csrc/cuda/keyswitch_core.cuh).
  m.def("keyswitch(Tensor a, Tensor pre, Tensor mod_ext, Tensor psi_ext, Tensor psi_inv_ext, Tensor mats, "
        "int[] bounds, Tensor key_q, Tensor key_p, int q_start, int digit_start, Tensor? addend, Tensor? c_add, "
        "Tensor? b, int[]? psi_rows, int galois, int[] drop_rows, int[] keep_rows, Tensor down_pre, "
        "Tensor mod_drop, Tensor psi_inv_drop, Tensor mod_dst, Tensor psi_dst, Tensor mat, Tensor c_keep, "
        "Tensor c_sub, Tensor? down_addend=None, int[]? psi_inv_drop_rows=None, int[]? psi_dst_rows=None) "
        "-> Tensor");
  // Signed int64 (..., N) -> residues (..., L, N) in Montgomery form; r2[l] = 2^64 mod q_l.
  m.def("to_rns(Tensor x, Tensor mod, Tensor r2) -> Tensor");
  // Standard-form residues (..., L, N) -> centred mixed-radix digits v_k in (-q_k/2, q_k/2]
  // with x = sum_k v_k * q_0 ... q_(k-1). garner[k][i] = (q_0..q_(i-1)) * 2^32 mod q_k for
  // i < k and garner[k][k] = (q_0..q_(k-1))^-1 * 2^32 mod q_k.
  m.def("crt_digits(Tensor x, Tensor mod, Tensor garner) -> Tensor");
  // ChaCha20 samplers (csrc/chacha.h). key: 8 int32 words on the target device; stream:
  // a 64-bit nonce never reused under one key. Uniform residues (rows, L, n) mod each
  // limb's prime; ternary {-1, 0, 1} and centred binomial (eta = 21) as int64 (n,). Output
  // element e depends on (key, stream, e) alone, so a batch is a reshape of one draw.
  m.def("sample_uniform(Tensor key, int stream, Tensor mod, int rows, int n) -> Tensor");
  m.def("sample_ternary(Tensor key, int stream, int n) -> Tensor");
  m.def("sample_cbd(Tensor key, int stream, int n) -> Tensor");
  // ---- TFHE (csrc/tfhe.h; csrc/cpu/tfhe.cpp, csrc/cuda/tfhe.cu; docs/tfhe.md) ----
  // The modulus q = q0 * q1, moduli = [q0, q1] (distinct NTT primes below 2^31). Values mod q
  // are int64 in [0, q). Polynomials have N = 2^log_n coefficients, 2^4 <= N <= 2^16; GLWE
  // ciphertexts (..., k + 1, N) coefficient form, body last; GGSW (k + 1, level, k + 1, 2, N)
  // int32 NTT form over (q0, q1), Montgomery: row (p, j) is a GLWE encryption of zero plus
  // mu * G_j on component p, G_j = round(q / B^(j+1)), B = 2^base_log. Gadget: base_log in
  // [1, 23], base_log * level <= 60. psi, psi_inv (2, N), post (2,): the ring tables of
  // (q0, q1) as ntt/intt take them (post = N^-1 * 2^32). Every op takes any leading batch
  // dimensions in one call; CPU and CUDA agree bit for bit.
  // Uniform int64 in [lo, hi] (hi - lo < 2^62), ChaCha20, no modulo bias: (n,).
  m.def("tfhe_sample_int(Tensor key, int stream, int n, int lo, int hi) -> Tensor");
  // round(x * 2^bits / q) mod 2^bits element-wise (bits in [1, 62]); bits = log2(2N) is
  // TFHE's modulus switch.
  m.def("tfhe_modulus_switch(Tensor x, int[] moduli, int bits) -> Tensor");
  // Gadget decomposition: x (...) -> (..., level) signed digits d_j in [-B/2, B/2), j = 0 the
  // most significant, balanced digits of v = tfhe_modulus_switch(x, base_log * level):
  // sum_j d_j * B^(level-1-j) = v mod B^level, so sum_j d_j * G_j = x + small mod q.
  m.def("tfhe_decompose(Tensor x, int[] moduli, int base_log, int level) -> Tensor");
  // LWE key switching: ct (..., n_in + 1) -> (..., n_out + 1) = (0, ..., 0, b) -
  // sum_(i, j) d_ij * keyswitch_key[i, j], d_ij = tfhe_decompose(a_i)[j]; keyswitch_key (n_in, level, 2, n_out + 1)
  // int32 standard-form residues of LWE encryptions of s_in[i] * G_j under s_out.
  m.def("tfhe_keyswitch(Tensor ct, Tensor keyswitch_key, int[] moduli, int base_log, int level) -> Tensor");
  // The same key switch on int8 tensor cores (csrc/tfhe.h; docs/tfhe.md, "Key switch on int8 tensor
  // cores"), three passes: tfhe_keyswitch_digits, torch._int_mm by the key's byte planes
  // (fhetorch._tfhe.algorithms.keyswitch_byte_planes), tfhe_keyswitch_combine; equal to tfhe_keyswitch
  // bit for bit where the int32 sums cannot overflow (2^(base_log - 1) 128 n_in level < 2^31).
  // Digits: ct (..., n_in + 1), B ciphertexts -> (rows, K8) int8, rows >= B, K8 = n_in level rounded up
  // to a multiple of 8: out[b, i level + j] = tfhe_decompose(ct[b, i])[j] for b < B, i < n_in, zero
  // elsewhere. base_log in [1, 8] (the digits must fit int8).
  m.def("tfhe_keyswitch_digits(Tensor ct, int[] moduli, int base_log, int level, int rows) -> Tensor");
  // Combine: sums (rows, 8 (n_out + 1)) int32, rows >= B, column 8 c + 4 l + j holding S_lj[b, c] =
  // sum_t d[b, t] W_lj[t, c] (W_lj: byte j of the key's residues mod q_l centred to (-q_l/2, q_l/2],
  // signed bytes); ct (..., n_in + 1) -> (..., n_out + 1) = (0, ..., 0, b) - KS mod q, the residue mod
  // q_l of sum_t d[b, t] KSK_l[t, c] being sum_j 2^(8j) S_lj[b, c].
  m.def("tfhe_keyswitch_combine(Tensor sums, Tensor ct, int[] moduli) -> Tensor");
  // External product: glwe (..., k + 1, N) -> ggsw x glwe = sum_(p, j) d_pj * row(p, j), d_pj
  // the digit polynomials of glwe's component p (tfhe_decompose), same shape as glwe.
  m.def("tfhe_external_product(Tensor glwe, Tensor ggsw, Tensor psi, Tensor psi_inv, Tensor post, int[] moduli, "
        "int base_log, int level) -> Tensor");
  // GLWE key switch (k = 1): ct (..., 2, N) = (A, B) -> the same shape, A' = -sum_j d_j A_j and
  // B' = tau_g(B) - sum_j d_j B_j, d_j the digit polynomials (tfhe_decompose) of tau_g(A), key
  // (level, 2, 2, N) the rows (A_j, B_j) in NTT form, Montgomery; tau_g: X -> X^galois (odd, < 2N; 1:
  // none). The key switch of tau_g(ct) from the key's input polynomial to its output key.
  m.def("tfhe_glwe_keyswitch(Tensor ct, Tensor key, Tensor psi, Tensor psi_inv, Tensor post, int[] moduli, "
        "int base_log, int level, int galois) -> Tensor");
  // One step of the LWE packing's tree (fhetorch/_tfhe/glwe.py): x, y (..., 2, N) -> x + X^shift y +
  // tfhe_glwe_keyswitch(x - X^shift y, galois); y None: x + tfhe_glwe_keyswitch(x, galois). With
  // lwe_scale, x and y are LWE ciphertexts (..., N + 1) read as lwe_scale * lwe_to_glwe(.) mod q (the
  // packing's leaves); the output is (..., 2, N) either way.
  m.def("tfhe_glwe_pack_step(Tensor x, Tensor? y, Tensor key, Tensor psi, Tensor psi_inv, Tensor post, "
        "int[] moduli, int base_log, int level, int galois, int shift, int? lwe_scale=None) -> Tensor");
  // Blind rotation, CMux-level batched (one step per key bit over the whole batch): ct (..., n + 1)
  // LWE under the key of bsk (n, k + 1, level, k + 1, 2, N) (GGSW of each key bit); luts (T, N)
  // test polynomials; lut_index (ct's batch shape) picks each ciphertext's LUT (None: LUT 0;
  // indices outside [0, T) are clamped into it). Returns the accumulators (..., k + 1, N):
  // acc = X^(-~b) * lut, then for i < n: acc = acc + bsk_i x ((X^(~a_i) - 1) * acc), with
  // ~x = tfhe_modulus_switch(x, log2(2N)).
  m.def("tfhe_blind_rotate(Tensor ct, Tensor luts, Tensor? lut_index, Tensor bsk, Tensor psi, Tensor psi_inv, "
        "Tensor post, int[] moduli, int base_log, int level) -> Tensor");
  // Multi-bit blind rotation (grouping G = log2 bsk.size(1) in [2, 4]): bsk (n / G, 2^G, k + 1, level,
  // k + 1, 2, N), group j's GGSWs of f_S = prod_(u in S) s_(Gj+u) prod_(u not in S) (1 - s_(Gj+u));
  // mono_exp (2, N), mono_pow (2, 2N): the NTT of X^a on prime l at slot c is
  // mono_pow[l, (mono_exp[l, c] * a) mod 2N] (Montgomery). acc = X^(-~b) * lut, then for each group
  // j: acc = (sum_S X^(a_S) bsk[j, S]) x acc, a_S = tfhe_modulus_switch(sum_(u in S) a_(Gj+u) mod q).
  m.def("tfhe_multi_bit_blind_rotate(Tensor ct, Tensor luts, Tensor? lut_index, Tensor bsk, Tensor psi, "
        "Tensor psi_inv, Tensor post, Tensor mono_exp, Tensor mono_pow, int[] moduli, int base_log, int level) -> Tensor");
  // ---- TFHE on the 2^64 torus by float64 FFT (csrc/tfhe_fft.h; csrc/cpu/tfhe_fft.cpp,
  // csrc/cuda/tfhe_fft.cu; docs/tfhe.md, "Ring product on the 2^64 torus by f64 FFT") ----
  // Torus values are int64 read as signed, arithmetic mod 2^64; polynomials of
  // Z_{2^64}[X]/(X^N + 1), N = 2^log_n in [2^4, 2^16]. The FFT of a polynomial a is N/2
  // complex128 values: slot k holds a(zeta^(e_k)), zeta = exp(i pi / N), for the exponents e_k
  // of fhetorch._tfhe.fft.fft_exponents (odd, one of each conjugate pair; the slot order is the
  // transform's own: only pointwise products are meant). twiddles (N/2,) complex128:
  // fhetorch._tfhe.fft.fft_twiddles, computed on the host (each slot's two doubles a twiddle's
  // (s, t), w = s (1 + i t): csrc/tfhe_fft.h). Coefficients are converted to
  // float64 (exact up to 2^53; above, the nearest double: the key's conversion error) and
  // results rounded to int64 mod 2^64; the rounding error of a product is modelled in
  // docs/tfhe.md. Any leading batch dimensions, one launch; CPU and CUDA agree bit for bit.
  // x (..., N) int64 -> (..., N/2) complex128.
  m.def("tfhe_fft(Tensor x, Tensor twiddles) -> Tensor");
  // x (..., N/2) complex128 -> (..., N) int64: the inverse transform, each coefficient rounded
  // (half away from zero) mod 2^64.
  m.def("tfhe_ifft(Tensor x, Tensor twiddles) -> Tensor");
  // digits (..., rows, N) int64 small signed integers (|d| <= 2^23 in the error model), key
  // (rows, cols, N/2) complex128 (tfhe_fft of torus polynomials, shared by the batch), rows in
  // [1, 64], cols in [1, 8] -> (..., cols, N) int64: out[c] = sum_r digits[r] * key[r, c] in
  // the ring, i.e. tfhe_ifft(sum_r tfhe_fft(digits[r]) * key[r, c]) in one launch (the
  // external product's ring part: rows = (k + 1) level, cols = k + 1).
  m.def("tfhe_fft_product(Tensor digits, Tensor key, Tensor twiddles) -> Tensor");
  // External product on the torus: glwe (..., k + 1, N) int64 -> GGSW x glwe = sum_(p, j)
  // d_pj * row(p, j), same shape. ggsw (k + 1, level, k + 1, N/2) complex128: row (p, j) is the
  // tfhe_fft of a GLWE encryption of zero plus mu * g_j on component p, g_j =
  // 2^(64 - base_log (j + 1)); d_pj the balanced base-2^base_log digits (in [-B/2, B/2), j = 0
  // the most significant) of round(x / 2^(64 - base_log level)) for each coefficient x of
  // component p. base_log in [1, 23], base_log * level <= 60, (k + 1) level <= 64.
  m.def("tfhe_torus_external_product(Tensor glwe, Tensor ggsw, Tensor twiddles, int base_log, int level) "
        "-> Tensor");
  // CMux on the torus: c0 + GGSW x (c1 - c0) (c0, c1 (..., k + 1, N) of one shape; ggsw as above):
  // c1 where the GGSW encrypts 1, c0 where it encrypts 0, up to the product's noise.
  m.def("tfhe_torus_cmux(Tensor c0, Tensor c1, Tensor ggsw, Tensor twiddles, int base_log, int level) -> Tensor");
  // Blind rotation with a Fourier bootstrapping key: tfhe_blind_rotate's contract (ct (..., n + 1)
  // and luts (T, N) mod q = q0 q1, lut_index, rotations ~x = tfhe_modulus_switch(x, log2(2N)),
  // output (..., k + 1, N) mod q) with the accumulator on the 2^64 torus: the LUT lifted to
  // round(x 2^64 / q), each step acc = acc + bsk_i x ((X^(~a_i) - 1) * acc) by
  // tfhe_torus_external_product's arithmetic, the result brought back as round(y q / 2^64) mod q.
  // bsk (n, k + 1, level, k + 1, N/2) complex128: the tfhe_fft of each key bit's GGSW on the torus.
  m.def("tfhe_fourier_blind_rotate(Tensor ct, Tensor luts, Tensor? lut_index, Tensor bsk, Tensor twiddles, "
        "int[] moduli, int base_log, int level) -> Tensor");
  // Multi-bit blind rotation with a Fourier key (grouping G = log2 bsk.size(1) in [2, 4]): bsk
  // (n / G, 2^G, k + 1, level, k + 1, N/2) complex128, the tfhe_fft of the torus GGSWs of the subset
  // indicators f_S of each group of G key bits (tfhe_multi_bit_blind_rotate's key, on the torus);
  // roots (2N,) complex128 zeta^j = exp(i pi j / N); exponents (N/2,) int32, slot k of a tfhe_fft
  // holding a(zeta^(exponents[k])). Per group j: acc := tfhe_torus_external_product(acc, K_j) with
  // K_j = tfhe_fourier_key_bundle(ct, ..., j); otherwise tfhe_fourier_blind_rotate's contract.
  m.def("tfhe_fourier_multi_bit_blind_rotate(Tensor ct, Tensor luts, Tensor? lut_index, Tensor bsk, Tensor twiddles, "
        "Tensor roots, Tensor exponents, int[] moduli, int base_log, int level) -> Tensor");
  // The key bundle of group j for each ciphertext (..., n + 1) -> (..., k + 1, level, k + 1, N/2)
  // complex128: at slot k, G_0 + sum_(S = 1 .. 2^G - 1) zeta^(e_k a_S) G_S (one complex fma chain
  // per entry, S ascending; csrc/tfhe_fft.h TfheFourierBundle), G_S the group's key rows, a_S the
  // subset sums of the group's masks mod q switched to 2N.
  m.def("tfhe_fourier_key_bundle(Tensor ct, Tensor bsk, Tensor roots, Tensor exponents, int[] moduli, int base_log, "
        "int level, int group) -> Tensor");
}
