"""CKKS <-> TFHE scheme switching (fhetorch/circuits/switching) against plaintext, at toy-n13-bts
with its toy TFHE set (toy-tfhe-4bit: n = 32, N_t = 1024; a 6-bit grid), on the test device.

The precision contract (docs/switching.md): an input at a grid point gives fn(point) within the
output noise; any input gives fn of a grid point at most one step away. The output noise at this
toy size measured ~2^-15 of max|fn| (the PBS's gadget rounding dominates); the tests assert
2^-11 of it, while neighbouring grid values of the random tables differ by far more, so a wrong
grid point cannot pass. Each LUT call costs ~10 s on 2 CPU cores: the tests share one context
and switch 64 values at a time.
"""
import math
import os
import pickle
import warnings

import pytest
import torch

import fhetorch as fhe
from fhetorch.circuits import switching as sw
from fhetorch.circuits.switching.serialization import decode_switch_keys, encode_switch_keys

TOY = "toy-n13-bts"
M = 64  # values per test (a sparse packing: its result repeats every M slots)


@pytest.fixture(scope="module")
def ctx(make_context):
    return make_context(TOY, lut=True)


def _random_table(g: int, gen) -> torch.Tensor:
    """g values, neighbours at least 0.05 apart (a grid mistake shows), in [-2, 2]."""
    steps = (torch.rand(g, generator=gen, dtype=torch.float64) * 0.2 + 0.05) * torch.where(
        torch.rand(g, generator=gen) < 0.5, -1.0, 1.0).to(torch.float64)
    t = torch.cumsum(steps, 0)
    return (t - t.mean()).clamp(-2, 2)


def _as_function(table: torch.Tensor, interval):
    lo, hi = interval
    g = table.numel()

    def fn(x):
        idx = torch.round((torch.as_tensor(x, dtype=torch.float64) - lo) / (hi - lo) * (g - 1)).long()
        return table[idx.clamp(0, g - 1)]
    return fn


def _tolerance(*tables) -> float:
    return max(float(t.abs().max()) for t in tables) * 2.0 ** -11


def test_keys_and_grid(ctx):
    keys = ctx.switch_keys
    assert keys.tfhe.params.name == "toy-tfhe-4bit"
    assert not keys.tfhe.has_secret_key  # the TFHE secrets were dropped after keygen
    assert ctx.switcher.default_bits == 6  # the model's 2^-65 at 6 bits, 2^-18 at 7 (limit 2^-40)
    assert ctx.switcher.max_bits == 7  # the full torus: 2^7 points as far apart as 2^6 on half of it
    assert ctx.switcher.grid(7)[1].log2_p_fail == ctx.switcher.grid(6)[1].log2_p_fail < -40
    assert ctx.key_bytes() >= keys.nbytes > 0
    pub = ctx.public()
    assert pub.secret_key is None and pub.switch_keys is keys
    with pytest.raises(fhe.SerializationError):  # the CKKS secret never pickles; the TFHE one is gone
        pickle.dumps(ctx.secret_key)


def test_grid_points_exact_several_functions(ctx, seed):
    gen = torch.Generator().manual_seed(seed)
    lo = -float(torch.rand(1, generator=gen)) * 2 - 0.5
    hi = float(torch.rand(1, generator=gen)) * 2 + 0.5
    bits = ctx.switcher.default_bits
    g = 1 << bits
    t1, t2 = _random_table(g, gen), _random_table(g, gen)
    pts = sw.grid_points((lo, hi), bits)
    idx = torch.randint(0, g, (M,), generator=gen)
    idx[:2] = torch.tensor([0, g - 1])  # both ends of the interval
    ex = ctx.encrypt(pts[idx])
    y1, y2 = ex.lut([_as_function(t1, (lo, hi)), _as_function(t2, (lo, hi))], interval=(lo, hi))
    assert y1.ciphertext.level == ctx.switcher.output_level
    tol = _tolerance(t1, t2)
    for y, t in ((y1, t1), (y2, t2)):
        got = ctx.decrypt(y).cpu()
        err = float((got - t[idx]).abs().max())
        print(f"[precision] switch at grid points: max|err| = {err:.2e} ({-math.log2(max(err, 1e-300)):.1f} bits)")
        assert err <= tol


def test_full_torus_grid_points_exact(ctx, seed):
    """bits = max_bits, one above default_bits: the grid spans the whole torus, each function goes
    through two tables (a + s b) and comes back as the sum of two sines; every point, the seam
    between the torus' halves (G/2 - 1, G/2) and both ends included, gives fn(point)."""
    gen = torch.Generator().manual_seed(seed)
    lo = -float(torch.rand(1, generator=gen)) * 2 - 0.5
    hi = float(torch.rand(1, generator=gen)) * 2 + 0.5
    bits = ctx.switcher.max_bits
    assert ctx.switcher.full_torus(bits) and not ctx.switcher.full_torus(bits - 1)
    g = 1 << bits
    t1, t2 = _random_table(g, gen), _random_table(g, gen) * 0.25  # F = 2 and F = 1 (no scale label)
    pts = sw.grid_points((lo, hi), bits)
    idx = torch.randint(0, g, (M,), generator=gen)
    idx[:4] = torch.tensor([0, g // 2 - 1, g // 2, g - 1])
    y1, y2 = fhe.lut(ctx.encrypt(pts[idx]), [_as_function(t1, (lo, hi)), _as_function(t2, (lo, hi))],
                     interval=(lo, hi), bits=bits)
    assert y1.ciphertext.level == ctx.switcher.output_level
    for y, t in ((y1, t1), (y2, t2)):
        got = ctx.decrypt(y).cpu()
        err = float((got - t[idx]).abs().max())
        print(f"[precision] full-torus switch at grid points: max|err| = {err:.2e} "
              f"({-math.log2(max(err, 1e-300)):.1f} bits)")
        assert err <= _tolerance(t1, t2)


@pytest.mark.parametrize("full", [False, True])
def test_any_input_within_one_step(ctx, seed, full):
    gen = torch.Generator().manual_seed(seed)
    interval = (-1.0, 1.0)
    bits = ctx.switcher.max_bits if full else ctx.switcher.default_bits
    g = 1 << bits
    table = _random_table(g, gen)
    x = torch.rand(M, generator=gen, dtype=torch.float64) * 2 - 1
    got = ctx.decrypt(fhe.lut(ctx.encrypt(x), _as_function(table, interval), interval, bits=bits)).cpu()
    pos = (x + 1) / 2 * (g - 1)
    below, above = table[pos.floor().long()], table[pos.ceil().long().clamp(max=g - 1)]
    err = torch.minimum((got - below).abs(), (got - above).abs())
    assert float(err.max()) <= _tolerance(table)


def test_smooth_function_and_defaults(ctx):
    # torch functions work as given; the default interval is [-1, 1] and bits the finest one-table grid
    bits = ctx.switcher.default_bits
    x = sw.grid_points((-1.0, 1.0), bits)[torch.randint(0, 1 << bits, (M,))]
    got = ctx.decrypt(ctx.encrypt(x).lut(torch.sigmoid)).cpu()
    assert float((got - torch.sigmoid(x)).abs().max()) <= 2.0 ** -11


def test_errors(ctx, make_context):
    x = torch.rand(8, dtype=torch.float64)
    ex = ctx.encrypt(x)
    with pytest.raises(fhe.ParameterError, match="bits"):
        ex.lut(torch.relu, bits=ctx.switcher.max_bits + 1)
    with pytest.raises(fhe.ParameterError, match="interval"):
        ex.lut(torch.relu, interval=(1.0, -1.0))
    with pytest.raises(fhe.ParameterError, match="finite"):
        ex.lut(lambda t: 1 / (t - t), interval=(-1.0, 1.0))
    with pytest.raises(fhe.ParameterError, match="callable"):
        ex.lut(3.0)
    with pytest.raises(fhe.EncodingError, match="real"):
        ctx.encrypt(torch.complex(x, x)).lut(torch.relu)
    with pytest.raises(fhe.LevelError, match="bootstrap"):
        ctx.encrypt(x, level=ctx.switcher.levels - 1).lut(torch.relu)
    with pytest.raises(fhe.ContextError):
        fhe.lut(x, torch.relu)
    plain = make_context(TOY, bootstrap=True)
    with pytest.raises(fhe.MissingKeyError, match="lut=True"):
        plain.encrypt(x).lut(torch.relu)
    with pytest.raises(fhe.ParameterError, match="lut must be"):
        sw.switch_config(TOY, 3)


def test_saved_server_context_switches(ctx, tmp_path):
    # what a server receives by file holds the switching keys, and no secret
    path, xpath = tmp_path / "server.fhe", tmp_path / "x.fhe"
    fhe.save(ctx.public(), path)
    server = fhe.load(path)
    assert server.secret_key is None and not server.switch_keys.tfhe.has_secret_key
    bits = ctx.switcher.default_bits
    x = sw.grid_points((-1.0, 1.0), bits)[torch.randint(0, 1 << bits, (M,))]
    fhe.save(ctx.encrypt(x), xpath)
    got = ctx.decrypt(fhe.load(xpath, server).lut(torch.relu)).cpu()
    assert float((got - torch.relu(x)).abs().max()) <= 2.0 ** -11
    meta, tensors = encode_switch_keys(ctx.switch_keys)
    bad = {k: v.cpu() for k, v in tensors.items()}  # as a file holds them
    bad["switch.to_lwe"] = bad["switch.to_lwe"].clone()
    bad["switch.to_lwe"].view(-1)[7] = -1  # not a residue
    with pytest.raises(fhe.SerializationError, match="altered"):
        decode_switch_keys(meta, bad, ctx.params.log_n, "cpu")
    del bad["switch.pack.3"]
    with pytest.raises(fhe.SerializationError, match="pack.3"):
        decode_switch_keys(meta, bad, ctx.params.log_n, "cpu")


def test_ternary_tfhe_keys_switch(make_context, seed):
    """SwitchConfig with a ternary TFHE set (toy-tfhe-4bit-ternary): the switch keys come from
    ternary secrets, the server keeps none, and grid points come back as fn(point). The ternary
    set's noise (E[s^2] = 2/3, 2n CMuxes) leaves a 5-bit grid where the binary one has 6."""
    tern = make_context(TOY, lut=sw.SwitchConfig(tfhe="toy-tfhe-4bit-ternary"))
    keys = tern.switch_keys
    assert keys.tfhe.params.secret_distribution == "ternary" and keys.tfhe.bootstrap_key.ternary
    assert not keys.tfhe.has_secret_key
    bits = tern.switcher.default_bits
    assert bits == 5
    gen = torch.Generator().manual_seed(seed)
    table = _random_table(1 << bits, gen)
    pts = sw.grid_points((-1.0, 1.0), bits)
    idx = torch.randint(0, 1 << bits, (M,), generator=gen)
    got = tern.decrypt(tern.encrypt(pts[idx]).lut(_as_function(table, (-1.0, 1.0)))).cpu()
    assert float((got - table[idx]).abs().max()) <= _tolerance(table)


@pytest.mark.cuda
def test_switch_cpu_cuda_bit_identical():
    # the switch's own integer steps (modulus switches, key switches, extraction, PBS, packing)
    # give the same bits on both devices; the CKKS linear transforms around them encode their
    # diagonals with a float FFT (tests/circuits/test_bootstrap.py covers them on the GPU)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", fhe.InsecureParametersWarning)
        cpu = fhe.ckks.Context(TOY, "cpu").keygen(lut=True)
    gpu = cpu.to("cuda")
    bits = cpu.switcher.default_bits
    pts, full = sw.grid_points((-1.0, 1.0), bits), sw.grid_points((-1.0, 1.0), bits + 1)
    ct0 = cpu.encrypt(torch.rand(M, dtype=torch.float64), level=0).ciphertext
    outs = []
    for c in (cpu, gpu):
        s = c.switcher
        lwe = s.level0_to_lwe(ct0.replace(data=ct0.data.to(c.device)))
        pbs, scales = s.apply_luts(lwe, [torch.relu(pts), torch.sin(3 * pts)], bits)
        pair, _ = s.apply_luts(lwe, [torch.tanh(full)], bits + 1)  # the full torus: two tables
        back = s.lwe_to_level0(pbs[1])
        outs.append((lwe.cpu(), torch.stack(pbs).cpu(), torch.stack(pair[0]).cpu(), back.data.cpu()))
    for a, b in zip(*outs):
        assert torch.equal(a, b)


@pytest.mark.cuda
def test_ten_bit_grid_on_the_gpu(seed):
    """n16-bts40 with tfhe-8bit-p128 (N_t = N = 2^16) holds a 10-bit grid: the full torus over its
    9-bit half-torus grid (2^-114.6 per value by the noise model). A table whose neighbours differ
    by at least 1 comes back exactly (a wrong grid point would be off by >= 1) at grid points, the
    seam between the torus' halves and both ends included, and within one step anywhere."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", fhe.InsecureParametersWarning)
        ctx = fhe.ckks.Context("n16-bts40", "cuda").keygen(lut="tfhe-8bit-p128")
    s = ctx.switcher
    assert (s.default_bits, s.max_bits) == (9, 10) and s.grid(10)[1].log2_p_fail < -100
    gen = torch.Generator().manual_seed(seed)
    g, m, interval = 1 << 10, 256, (-1.0, 1.0)
    sign = torch.where(torch.arange(g) % 2 == 0, 1.0, -1.0).to(torch.float64)
    table = sign * (0.5 + 0.5 * torch.rand(g, generator=gen, dtype=torch.float64))
    fn = _as_function(table, interval)
    idx = torch.randint(0, g, (m,), generator=gen)
    idx[:4] = torch.tensor([0, g // 2 - 1, g // 2, g - 1])
    got = ctx.decrypt(ctx.encrypt(sw.grid_points(interval, 10)[idx]).lut(fn, interval, bits=10)).cpu()
    err = float((got - table[idx]).abs().max())
    print(f"[precision] 10-bit grid at grid points: max|err| = {err:.2e} ({-math.log2(max(err, 1e-300)):.1f} bits)")
    assert err <= 2.0 ** -7
    x = torch.rand(m, generator=gen, dtype=torch.float64) * 2 - 1
    got = ctx.decrypt(ctx.encrypt(x).lut(fn, interval, bits=10)).cpu()
    pos = (x + 1) / 2 * (g - 1)
    below, above = table[pos.floor().long()], table[pos.ceil().long().clamp(max=g - 1)]
    assert float(torch.minimum((got - below).abs(), (got - above).abs()).max()) <= 2.0 ** -7


@pytest.mark.parametrize("tfhe", sorted(sw.config.PACKING))
def test_a_coarser_packing_decomposition_stays_below_the_pbs_noise(tfhe):
    """The TFHE sets whose packing takes a coarser decomposition than (8, 6) (config.PACKING): with
    the set's own GLWE key and noise, a packing through all log2 N_t rounds adds less than 1 % of
    the PBS output's variance (noise.pbs_variance, what the packed phases already carry), and the
    default decomposition is that coarser one. 64 leaves: the noise is the rounds', not the leaves'."""
    from fhetorch._tfhe import algorithms as alg
    from fhetorch._tfhe import glwe, noise
    from fhetorch._tfhe.context import TFHEContext

    cfg = sw.SwitchConfig(tfhe=tfhe)
    assert cfg.packing == sw.config.PACKING[tfhe] and cfg.packing != (8, 6)
    tctx = TFHEContext(tfhe, seed=int.from_bytes(os.urandom(4), "little")).keygen()
    ring, mq, p = tctx.ring, tctx.modulus, tctx.params
    keys = glwe.generate_packing_keys(tctx.sampler, ring, tctx.glwe_key, *cfg.packing, p.glwe_noise_width)
    key = tctx.glwe_key.as_lwe_key()
    lwe = alg.encrypt_lwe_ciphertext(tctx.sampler, ring, key, torch.randint(0, mq.q, (64,)), p.glwe_noise_width)
    phase = alg.decrypt_glwe_ciphertext(ring, tctx.glwe_key, glwe.pack_lwe_ciphertexts(ring, keys, lwe))
    err = torch.remainder(phase[:64] - alg.decrypt_lwe_ciphertext(mq, key, lwe), mq.q)
    err = torch.where(err > mq.q // 2, err - mq.q, err).double() / mq.q
    assert float(err.pow(2).mean()) < 0.01 * noise.pbs_variance(p)
