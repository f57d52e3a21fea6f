"""The TFHE kernels on CUDA against the CPU (the oracle): bit-identical outputs, op by op and for
a whole KS-PBS. Marked `cuda`: skipped without a GPU."""
import warnings

import pytest
import torch

import fhetorch as fhe
import fhetorch._ops as ops
from fhetorch._ring import Sampler
from fhetorch._tfhe import algorithms as alg
from fhetorch._tfhe.entities import LweKeyswitchKey
from fhetorch._tfhe.modular import Modulus
from fhetorch._tfhe.ring import TFHERing

from .inputs import MODULI, ggsw_kernel_form, ksk_kernel_form, rand_mod_q

pytestmark = pytest.mark.cuda
GPU = "cuda"
MQ = Modulus(MODULI)


def _both(f, *args):
    cpu = f(*args)
    gpu = f(*[a.to(GPU) if isinstance(a, torch.Tensor) else a for a in args])
    assert torch.equal(cpu, gpu.cpu())


def test_elementwise_ops(gen):
    x = rand_mod_q(gen, 3, 1000)
    for bits in (1, 11, 46):
        _both(ops.tfhe_modulus_switch, x, MODULI, bits)
    for bl, lv in ((4, 6), (23, 1), (12, 2)):
        _both(ops.tfhe_decompose, x, MODULI, bl, lv)
    key = Sampler(seed=4).key
    _both(ops.tfhe_sample_int, key, 11, 5000, -7, 9)
    _both(ops.tfhe_sample_int, key, 12, 5000, 0, (1 << 62) - 1)


def test_keyswitch(gen):
    ksk = ksk_kernel_form(rand_mod_q(gen, 2048, 5, 833 + 1))
    _both(ops.tfhe_keyswitch, rand_mod_q(gen, 7, 2048 + 1), ksk, MODULI, 3, 5)


# the GEMM key switch at tfhe-4bit shapes (n_in 2048, level 5, n_out 833) through every CUDA plan:
# batches of at most 4 (a thread per output coefficient, K split over blocks; 1501 coefficients: two
# per thread), K split over tiles (batch 5, 132), one ciphertext per thread (1024), four (1300, on 132 SMs); a
# reduction inside the K loop (base_log 23); one mask per K step (level 40); small batches whose blocks'
# rows (loaded 8 at a time) end ragged, one with a reduction inside its rows (K = 131072: 993 rows a block),
# one whose digits would pass a block's shared memory in one wave (K = 458752 at batch 4: more blocks)
@pytest.mark.parametrize("batch,n_in,n_out,base_log,level", [
    (1, 2048, 833, 3, 5), (3, 2048, 872, 3, 5), (4, 1000, 1500, 4, 4), (132, 2048, 833, 3, 5),
    (1024, 2048, 833, 3, 5), (1300, 2048, 833, 3, 5),
    (5, 4096, 845, 4, 4), (20, 2048, 60, 23, 1), (9, 300, 100, 1, 40),
    (2, 65536, 30, 23, 2), (3, 1001, 70, 20, 3), (4, 65536, 30, 8, 7)])
def test_keyswitch_gemm_plans(gen, batch, n_in, n_out, base_log, level):
    ksk = ksk_kernel_form(rand_mod_q(gen, n_in, level, n_out + 1))
    ct = rand_mod_q(gen, batch, n_in + 1)
    ct[0, :4] = torch.tensor([0, 1, MODULI[0] * MODULI[1] - 1, MODULI[0] * MODULI[1] // 2])
    _both(ops.tfhe_keyswitch, ct, ksk, MODULI, base_log, level)


def test_keyswitch_tensor_ops(gen):
    """The two element-wise ops of the key switch on int8 tensor cores, CPU = CUDA; the combine's
    sums also from a view that is not 16-byte aligned (the binding copies it for its 16-byte loads)."""
    ct = rand_mod_q(gen, 2, 3, 301)
    for base_log, level in ((4, 4), (3, 5), (8, 2), (1, 7)):
        _both(ops.tfhe_keyswitch_digits, ct, MODULI, base_log, level, 17)
    ct = rand_mod_q(gen, 20, 2049)
    sums = torch.randint(-(1 << 31), (1 << 31) - 1, (20 * 8 * 919 + 1,), generator=gen, dtype=torch.int32)
    _both(ops.tfhe_keyswitch_combine, sums[1:].view(20, 8 * 919).clone(), ct, MODULI)
    misaligned = sums.to(GPU)[1:].view(20, 8 * 919)
    assert torch.equal(ops.tfhe_keyswitch_combine(misaligned, ct.to(GPU), MODULI).cpu(),
                       ops.tfhe_keyswitch_combine(sums[1:].view(20, 8 * 919), ct, MODULI))


# the key switch on int8 tensor cores (cuBLAS's int8 GEMM through torch._int_mm) at the presets' shapes
# (tfhe-4bit-p128, tfhe-4bit, tfhe-2bit, toy): = the GEMM kernel on CUDA = the CPU's; batch 1 and 17
# (rows padded to 32 for _int_mm), 1300 (one chunk), 1300 in chunks of about 100 (budget lowered)
@pytest.mark.parametrize("n_in,n_out,base_log,level", [(2048, 918, 4, 4), (2048, 833, 3, 5), (2048, 747, 4, 3),
                                                       (1024, 32, 4, 6)])
@pytest.mark.parametrize("batch,chunked", [(1, False), (17, False), (1300, False), (1300, True)])
def test_keyswitch_methods_on_cuda(gen, monkeypatch, n_in, n_out, base_log, level, batch, chunked):
    if chunked:
        monkeypatch.setattr(alg, "KEYSWITCH_SUMS_BYTES", 4 * 8 * (n_out + 1) * 100)
    ksk = ksk_kernel_form(rand_mod_q(gen, n_in, level, n_out + 1))
    ct = rand_mod_q(gen, batch, n_in + 1)
    ct[0, :4] = torch.tensor([0, 1, MODULI[0] * MODULI[1] - 1, MODULI[0] * MODULI[1] // 2])
    cpu_key, gpu_key = LweKeyswitchKey(ksk, base_log, level), LweKeyswitchKey(ksk.to(GPU), base_log, level)
    assert alg.keyswitch_method(gpu_key) == "tensor"
    tensor = alg.keyswitch_lwe_ciphertext(gpu_key, ct.to(GPU), MQ, method="tensor")
    gemm = alg.keyswitch_lwe_ciphertext(gpu_key, ct.to(GPU), MQ, method="gemm")
    assert torch.equal(tensor, gemm)
    assert torch.equal(tensor.cpu(), alg.keyswitch_lwe_ciphertext(cpu_key, ct, MQ, method="tensor"))
    assert torch.equal(gpu_key.byte_planes.cpu(), cpu_key.byte_planes)


@pytest.mark.parametrize("batch", [5, 40])
def test_tensor_keyswitch_replays_in_a_cuda_graph(gen, batch):
    """The tensor key switch (digits, torch._int_mm, combine) captured in a CUDA graph at the
    tfhe-4bit-p128 shape, replayed on fresh ciphertexts: equal to the CPU's GEMM kernel."""
    ksk = ksk_kernel_form(rand_mod_q(gen, 2048, 4, 919))
    key = LweKeyswitchKey(ksk.to(GPU), 4, 4)
    ct = rand_mod_q(gen, batch, 2049).to(GPU)
    alg.keyswitch_lwe_ciphertext(key, ct, MQ, method="tensor")  # warm-up: the byte planes, cuBLAS's workspace
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = alg.keyswitch_lwe_ciphertext(key, ct, MQ, method="tensor")
    fresh = rand_mod_q(gen, batch, 2049)
    ct.copy_(fresh)
    graph.replay()
    torch.cuda.synchronize()
    assert torch.equal(out.cpu(), ops.tfhe_keyswitch(fresh, ksk, MODULI, 4, 4))


@pytest.mark.parametrize("log_n,base_log,level", [(11, 12, 3), (11, 8, 6), (10, 20, 1), (12, 12, 4), (14, 12, 4)])
def test_glwe_keyswitch(gen, log_n, base_log, level):
    """The one-kernel GLWE key switch and packing step, in shared memory (N <= 2^12 at these levels)
    and with the scratch in global memory (2^14), with and without an automorphism and a partner."""
    ring = TFHERing(log_n, MODULI)
    n = 1 << log_n
    key = ggsw_kernel_form(ring, rand_mod_q(gen, level, 2, n))
    ct, y = rand_mod_q(gen, 7, 2, n), rand_mod_q(gen, 7, 2, n)
    lwe, scale = rand_mod_q(gen, 2, 5, n + 1), int(rand_mod_q(gen, 1))
    for g, shift in ((1, 0), (3, n // 2), (2 * n - 1, 2 * n - 3), (1025, 5)):
        _both(ops.tfhe_glwe_keyswitch, ct, key, ring.psi, ring.psi_inv, ring.post, MODULI, base_log, level, g)
        for other in (y, None):
            _both(ops.tfhe_glwe_pack_step, ct, other, key, ring.psi, ring.psi_inv, ring.post, MODULI, base_log, level,
                  g, shift)
        for other in (lwe[1], None):  # LWE leaves, scaled
            _both(ops.tfhe_glwe_pack_step, lwe[0], other, key, ring.psi, ring.psi_inv, ring.post, MODULI, base_log,
                  level, g, shift, scale)


@pytest.mark.parametrize("log_n,k,base_log,level", [(10, 1, 12, 2), (11, 1, 23, 1), (10, 2, 23, 1), (13, 1, 15, 2)])
def test_external_product_and_blind_rotate(gen, log_n, k, base_log, level):
    ring = TFHERing(log_n, MODULI)
    k1, n = k + 1, 1 << log_n
    ggsw = ggsw_kernel_form(ring, rand_mod_q(gen, k1, level, k1, n))
    glwe = rand_mod_q(gen, 5, k1, n)
    _both(ops.tfhe_external_product, glwe, ggsw, ring.psi, ring.psi_inv, ring.post, MODULI, base_log, level)
    bsk = ggsw_kernel_form(ring, rand_mod_q(gen, 8, k1, level, k1, n))
    ct = rand_mod_q(gen, 6, 9)
    luts = rand_mod_q(gen, 2, n)
    _both(ops.tfhe_blind_rotate, ct, luts, torch.tensor([0, 1, 1, 0, 1, 0]), bsk, ring.psi, ring.psi_inv,
          ring.post, MODULI, base_log, level)


@pytest.mark.parametrize("name", ["toy-tfhe-4bit", "toy-tfhe-4bit-mb2"])  # classical, multi-bit
def test_whole_pbs_on_cuda_decrypts(name):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cpu = fhe.tfhe.Context(name, "cpu", seed=9).keygen()
        gpu = fhe.tfhe.Context(name, GPU, seed=9).keygen()
    assert torch.equal(cpu.bootstrap_key.data, gpu.bootstrap_key.data.cpu())
    x = torch.randint(0, 16, (64,))
    lut = fhe.tfhe.LUT(lambda m: (5 * m + 3) % 16, bits=4)
    ex_cpu = cpu.encrypt(x)
    ex_gpu = fhe.tfhe.LWETensor(gpu, ex_cpu.data.to(GPU), ex_cpu.degree)
    y_cpu, y_gpu = lut(ex_cpu), lut(ex_gpu)
    assert torch.equal(y_cpu.data, y_gpu.data.cpu())
    assert torch.equal(gpu.decrypt(y_gpu).cpu(), (5 * x + 3) % 16)


@pytest.mark.parametrize("batch", [8, 40])
@pytest.mark.parametrize("log_n,k,base_log,level", [(11, 1, 23, 1), (11, 1, 12, 2), (12, 1, 22, 1), (10, 2, 23, 1),
                                                    (12, 1, 15, 2), (13, 1, 15, 2)])
def test_blind_rotate_paths_at_preset_shapes(gen, batch, log_n, k, base_log, level):
    """Batch 8: the cluster kernel (2 k1 blocks per ciphertext, distributed shared memory);
    batch 40: the fused kernel (1024 threads per ciphertext, the rotation in shared memory) or, at
    N = 2^13, the per-bit launches. tfhe-4bit-like shapes (N = 2048, k = 1, level 1 and 2),
    N = 4096, tfhe-2bit's k = 2, tfhe-6bit's N = 8192: 48 key bits, mixed LUTs, some zero masks,
    against the CPU."""
    ring = TFHERing(log_n, MODULI)
    k1, n, big_n = k + 1, 48, 1 << log_n
    bsk = ggsw_kernel_form(ring, rand_mod_q(gen, n, k1, level, k1, big_n))
    ct = rand_mod_q(gen, batch, n + 1)
    ct[::7, 5] = 0
    luts = rand_mod_q(gen, 3, big_n)
    idx = torch.randint(0, 3, (batch,), generator=gen)
    _both(ops.tfhe_blind_rotate, ct, luts, idx, bsk, ring.psi, ring.psi_inv, ring.post, MODULI, base_log, level)


def test_fused_blind_rotate_large_batch(gen):
    """A batch larger than the SM count: the 512-thread variant (smaller batches run 1024 threads
    per ciphertext, with 3-stage NTT rounds), two blocks per SM, against the CPU."""
    ring = TFHERing(11, MODULI)
    n, big_n = 6, 2048
    bsk = ggsw_kernel_form(ring, rand_mod_q(gen, n, 2, 1, 2, big_n))
    ct = rand_mod_q(gen, 300, n + 1)
    luts = rand_mod_q(gen, 4, big_n)
    idx = torch.randint(0, 4, (300,), generator=gen)
    _both(ops.tfhe_blind_rotate, ct, luts, idx, bsk, ring.psi, ring.psi_inv, ring.post, MODULI, 23, 1)


def _assert_replays_in_a_cuda_graph(gen, op, width, big_n, args):
    """op(ct, luts, None, *args) on 8 ciphertexts of `width` (n + 1) entries, captured in a CUDA
    graph, replayed on fresh ciphertexts copied into the captured input: equal to the CPU's."""
    ct = rand_mod_q(gen, 8, width).to(GPU)
    luts = rand_mod_q(gen, 1, big_n).to(GPU)
    op(ct, luts, None, *args)  # warm-up outside the capture
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = op(ct, luts, None, *args)
    fresh = rand_mod_q(gen, 8, width)
    ct.copy_(fresh)
    graph.replay()
    torch.cuda.synchronize()
    cpu_args = [a.cpu() if isinstance(a, torch.Tensor) else a for a in args]
    assert torch.equal(out.cpu(), op(fresh, luts.cpu(), None, *cpu_args))


def test_blind_rotate_replays_in_a_cuda_graph(gen):
    """The whole rotation is capturable: a replay on new inputs equals the CPU."""
    ring = TFHERing(11, MODULI)
    n, big_n = 16, 2048
    bsk = ggsw_kernel_form(ring, rand_mod_q(gen, n, 2, 1, 2, big_n)).to(GPU)
    args = (bsk, ring.psi.to(GPU), ring.psi_inv.to(GPU), ring.post.to(GPU), MODULI, 23, 1)
    _assert_replays_in_a_cuda_graph(gen, ops.tfhe_blind_rotate, n + 1, big_n, args)


@pytest.mark.parametrize("batch,log_n,base_log,level,g,groups", [
    (1, 11, 22, 1, 4, 6), (8, 11, 22, 1, 4, 6), (40, 11, 22, 1, 4, 3), (300, 11, 22, 1, 4, 3),
    (5, 13, 15, 2, 2, 3), (40, 13, 15, 2, 2, 2), (40, 10, 12, 2, 3, 4)])
def test_multi_bit_blind_rotate(gen, batch, log_n, base_log, level, g, groups):
    ring = TFHERing(log_n, MODULI)
    big_n = 1 << log_n
    k1 = 3 if g == 3 else 2
    bsk = ggsw_kernel_form(ring, rand_mod_q(gen, groups, 1 << g, k1, level, k1, big_n))
    ct = rand_mod_q(gen, batch, g * groups + 1)
    ct[::7, :g] = 0
    luts = rand_mod_q(gen, 3, big_n)
    idx = torch.randint(0, 3, (batch,), generator=gen)
    exps, pows = ring.monomial_tables()
    _both(ops.tfhe_multi_bit_blind_rotate, ct, luts, idx, bsk, ring.psi, ring.psi_inv, ring.post, exps, pows, MODULI,
          base_log, level)


def test_multi_bit_blind_rotate_replays_in_a_cuda_graph(gen):
    ring = TFHERing(11, MODULI)
    g, groups, big_n = 4, 4, 2048
    bsk = ggsw_kernel_form(ring, rand_mod_q(gen, groups, 1 << g, 2, 1, 2, big_n)).to(GPU)
    exps, pows = ring.monomial_tables()
    args = (bsk, ring.psi.to(GPU), ring.psi_inv.to(GPU), ring.post.to(GPU), exps.to(GPU), pows.to(GPU), MODULI, 22, 1)
    _assert_replays_in_a_cuda_graph(gen, ops.tfhe_multi_bit_blind_rotate, g * groups + 1, big_n, args)


# the float64 FFT ring product on the 2^64 torus (csrc/tfhe_fft.h): bit for bit, at the ring sizes
# of the presets and beyond (N = 2^10 .. 2^14), with the PBS digits of tfhe-4bit-p128 (|d| <= 2^22,
# rows = (k + 1) level) and more rows and columns; full 64-bit keys, so every product rounds
@pytest.mark.parametrize("log_n,rows,cols", [(10, 1, 1), (11, 2, 2), (12, 4, 2), (13, 3, 3), (14, 2, 2)])
def test_fft_ring_product(gen, log_n, rows, cols):
    from fhetorch._tfhe.fft import fft_twiddles

    n = 1 << log_n
    tw = fft_twiddles(log_n)
    keys = torch.randint(-(1 << 63), (1 << 63) - 1, (rows, cols, n), generator=gen, dtype=torch.int64)
    digits = torch.randint(-(1 << 22), 1 << 22, (3, 2, rows, n), generator=gen, dtype=torch.int64)
    _both(ops.tfhe_fft, keys, tw)
    key_fft = ops.tfhe_fft(keys, tw)
    _both(ops.tfhe_ifft, key_fft, tw)
    _both(ops.tfhe_fft_product, digits, key_fft, tw)
    _both(ops.tfhe_fft_product, digits[0, 0], key_fft, tw)  # no batch dimension: one team


# the external product and CMux on the torus (tfhe_torus_*), at the tfhe-4bit-p128 gadget (23, 1), k = 2,
# and a 3-level gadget
@pytest.mark.parametrize("log_n,k,base_log,level", [(11, 1, 23, 1), (10, 2, 15, 2), (12, 1, 10, 3), (14, 1, 23, 1)])
def test_torus_external_product_and_cmux(gen, log_n, k, base_log, level):
    from fhetorch._tfhe.fft import fft_twiddles

    n, k1 = 1 << log_n, k + 1
    tw = fft_twiddles(log_n)
    torus = lambda *shape: torch.randint(-(1 << 63), (1 << 63) - 1, shape, generator=gen, dtype=torch.int64)  # noqa: E731
    ggsw = ops.tfhe_fft(torus(k1, level, k1, n), tw)
    c0, c1 = torus(5, k1, n), torus(5, k1, n)
    _both(ops.tfhe_torus_external_product, c1, ggsw, tw, base_log, level)
    _both(ops.tfhe_torus_cmux, c0, c1, ggsw, tw, base_log, level)


def _fourier_key(gen, n, log_n, k, level):
    """A Fourier bootstrapping key of random torus GGSWs (n, k1, level, k1, N/2) and its twiddles."""
    from fhetorch._tfhe.fft import fft_twiddles
    k1 = k + 1
    tw = fft_twiddles(log_n)
    torus = torch.randint(-(1 << 63), (1 << 63) - 1, (n, k1, level, k1, 1 << log_n), generator=gen)
    return ops.tfhe_fft(torus, tw), tw


def _fourier_case(gen, batch, n, log_n, k, level, zero):
    """A classical Fourier rotation's inputs: batch ciphertexts of n key bits (mask entry zero[1] zeroed
    every zero[0] ciphertexts: zero rotations), three LUTs mixed by index, the key and twiddles."""
    bsk, tw = _fourier_key(gen, n, log_n, k, level)
    ct = rand_mod_q(gen, batch, n + 1)
    ct[::zero[0], zero[1]] = 0
    luts = rand_mod_q(gen, 3, 1 << log_n)
    idx = torch.randint(0, 3, (batch,), generator=gen)
    return ct, luts, idx, bsk, tw


@pytest.mark.parametrize("batch", [8, 300])
@pytest.mark.parametrize("log_n,k,base_log,level", [(11, 1, 23, 1), (11, 1, 12, 2), (10, 2, 23, 1), (13, 1, 15, 2)])
def test_fourier_blind_rotate_paths(gen, batch, log_n, k, base_log, level):
    """The Fourier rotation's CUDA paths against the CPU: fused (one block per ciphertext in shared
    memory; 512 threads for batches within the SM count, 256 above) at N = 2^11 and k = 2, and the
    large-ring programs at N = 2^13 (its 384 KiB do not fit a block): 40 key bits, mixed LUTs, some
    zero rotations."""
    ct, luts, idx, bsk, tw = _fourier_case(gen, batch, 40, log_n, k, level, zero=(7, 5))
    _both(ops.tfhe_fourier_blind_rotate, ct, luts, idx, bsk, tw, MODULI, base_log, level)


@pytest.mark.parametrize("kernel", ["", "per-bit"])
@pytest.mark.parametrize("log_n,k,base_log,level,batch,n", [
    (12, 1, 15, 2, 40, 10), (13, 2, 10, 2, 8, 6), (15, 1, 11, 3, 8, 5), (16, 1, 11, 3, 5, 4), (16, 1, 11, 3, 260, 2)])
def test_fourier_blind_rotate_large_rings(gen, monkeypatch, kernel, log_n, k, base_log, level, batch, n):
    """The large-ring rotation (csrc/cuda/fourier_split_core.cuh: three programs per key bit over the
    batch; 260 ciphertexts at N = 2^16 run as two chunks) and, forced, the per-bit launches it replaced,
    against the CPU: the shapes of tfhe-6bit, tfhe-8bit and tfhe-8bit-p128, k = 2, zero rotations."""
    monkeypatch.setenv("FHETORCH_FOURIER_KERNEL", kernel)
    if kernel and batch > 8:
        pytest.skip("the per-bit launches at small batches only (slow)")
    ct, luts, idx, bsk, tw = _fourier_case(gen, batch, n, log_n, k, level, zero=(3, 1))
    _both(ops.tfhe_fourier_blind_rotate, ct, luts, idx, bsk, tw, MODULI, base_log, level)


@pytest.mark.parametrize("log_n,level", [(11, 1), (15, 3)])
def test_fourier_blind_rotate_replays_in_a_cuda_graph(gen, log_n, level):
    """The register kernel (N = 2^11) and the large-ring programs (N = 2^15, level 3) in a CUDA graph."""
    n, big_n = 16 if log_n == 11 else 3, 1 << log_n
    bsk, tw = _fourier_key(gen, n, log_n, 1, level)
    _assert_replays_in_a_cuda_graph(gen, ops.tfhe_fourier_blind_rotate, n + 1, big_n,
                                     (bsk.to(GPU), tw.to(GPU), MODULI, 23 if level == 1 else 11, level))


def _fourier_multi_bit_case(gen, batch, log_n, k, base_log, level, g, groups):
    from fhetorch._tfhe.fft import fft_twiddles
    k1, n, big_n = k + 1, g * groups, 1 << log_n
    tw = fft_twiddles(log_n)
    exps, roots = TFHERing(log_n, MODULI).fourier_monomial_tables()
    torus = torch.randint(-(1 << 63), (1 << 63) - 1, (groups, 1 << g, k1, level, k1, big_n), generator=gen)
    bsk = ops.tfhe_fft(torus, tw)
    ct = rand_mod_q(gen, batch, n + 1)
    ct[::5, :g] = 0  # a group whose subset rotations are all zero
    luts = rand_mod_q(gen, 3, big_n)
    idx = torch.randint(0, 3, (batch,), generator=gen)
    return (ct, luts, idx, bsk, tw, roots, exps, MODULI, base_log, level)


@pytest.mark.parametrize("batch", [1, 8, 300])
@pytest.mark.parametrize("log_n,k,base_log,level,g,groups", [
    (11, 1, 22, 1, 4, 6), (10, 1, 23, 1, 2, 10), (11, 1, 12, 2, 3, 4), (10, 2, 23, 1, 4, 3), (13, 1, 15, 2, 2, 3)])
def test_fourier_multi_bit_blind_rotate_paths(gen, batch, log_n, k, base_log, level, g, groups):
    """The Fourier multi-bit rotation's CUDA paths against the CPU: the register kernel with bundles
    made ahead (N = 2^10, 2^11 at k = 1, level 1), the generic fused kernel (level 2, k = 2) and
    the per-group launches (N = 2^13); the key bundle op too."""
    args = _fourier_multi_bit_case(gen, batch, log_n, k, base_log, level, g, groups)
    _both(ops.tfhe_fourier_multi_bit_blind_rotate, *args)
    ct, _, _, bsk, _, roots, exps = args[:7]
    _both(ops.tfhe_fourier_key_bundle, ct, bsk, roots, exps, MODULI, base_log, level, groups - 1)


def test_fourier_multi_bit_blind_rotate_in_chunks(gen, monkeypatch):
    """Bundles of a few groups at a time (the accumulator kept in global memory between chunks; the
    large-batch form) equal the CPU's."""
    monkeypatch.setenv("FHETORCH_FOURIER_BUNDLE_BYTES", str(3 * 8 * 64 * 1024))  # 3 groups of 8 ciphertexts
    _both(ops.tfhe_fourier_multi_bit_blind_rotate, *_fourier_multi_bit_case(gen, 8, 11, 1, 22, 1, 4, 7))


def test_fourier_multi_bit_blind_rotate_replays_in_a_cuda_graph(gen):
    ct, luts, idx, bsk, tw, roots, exps, moduli, base_log, level = _fourier_multi_bit_case(gen, 8, 11, 1, 22, 1, 4, 4)
    _assert_replays_in_a_cuda_graph(gen, ops.tfhe_fourier_multi_bit_blind_rotate, ct.shape[-1], luts.shape[-1],
                                     (bsk.to(GPU), tw.to(GPU), roots.to(GPU), exps.to(GPU), moduli, base_log, level))


@pytest.mark.parametrize("cluster", ["0", "1"])
@pytest.mark.parametrize("log_n", [10, 11])
def test_fourier_rotation_kernels_of_the_register_shapes(gen, monkeypatch, cluster, log_n):
    """Both CUDA kernels of the level-1, k = 1 shapes on the same batches, against the CPU: the register
    kernel (one block per ciphertext) and the 2-block cluster (one row per block, 8 values a thread) that
    batches within half the SM count take; classical with zero rotations, multi-bit whole and in chunks."""
    monkeypatch.setenv("FHETORCH_FOURIER_CLUSTER", cluster)
    batch = 5
    ct, luts, idx, bsk, tw = _fourier_case(gen, batch, 24, log_n, 1, 1, zero=(2, 3))
    _both(ops.tfhe_fourier_blind_rotate, ct, luts, idx, bsk, tw, MODULI, 23, 1)
    multi = _fourier_multi_bit_case(gen, batch, log_n, 1, 22, 1, 4, 5)
    _both(ops.tfhe_fourier_multi_bit_blind_rotate, *multi)
    monkeypatch.setenv("FHETORCH_FOURIER_BUNDLE_BYTES", str(2 * batch * 64 * 1024))  # chunks of 2 groups
    _both(ops.tfhe_fourier_multi_bit_blind_rotate, *multi)
