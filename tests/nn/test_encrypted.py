"""Compiled models run encrypted: the encrypted logits against the simulation (the same
approximations in float64) and the plaintext model; the slot maps of every linear layer
against torch's layers; layout errors.

The CPU test runs a small CNN (conv + BN, residual block, average pooling, strided conv,
global pooling, linear) at toy-n13-bts with a degree-15 ReLU and one bootstrap; the cuda test
runs it at the secure n16-bts40 with the composite ReLU. Fresh random weights per run."""
import os

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import fhetorch as fhe
from fhetorch._ckks import galois_element
from fhetorch.nn.layout import Layout, layer_map

from .test_compiler import SmallCNN, _randomise_bn


@pytest.fixture
def seed():
    s = int.from_bytes(os.urandom(4), "little")
    torch.manual_seed(s)
    return s


def _check_against_torch(cm, x):
    """Each linear layer's slot map, applied to the packed input, equals torch's layer."""
    prog = cm.program()
    acts = {}

    class Probe(torch.fx.Interpreter):
        def run_node(self, n):
            out = super().run_node(n)
            acts[n.name] = out
            return out

    with torch.no_grad():
        Probe(cm.graph_module).run(x.to(torch.float32))
    for l in cm.layers[1:]:
        m = prog.maps.get(l.name)
        if l.kind != "linear" or m is None:
            continue
        lin, lout = prog.layouts[l.inputs[0]], prog.layouts[l.name]
        y = m.dense_apply(lin.pack(acts[l.inputs[0]][0].to(torch.float64), prog.slots))
        want = acts[l.name][0].to(torch.float64).reshape(lout.shape)
        p = lout.period(prog.slots)
        for copy in range(prog.slots // p):  # every copy of a replicated layout
            got = lout.unpack(torch.roll(y, -copy * p))
            torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5, msg=f"slot map of {l.name} ({l.op}), copy {copy}")


def test_multiplexed_layouts_are_dense():
    """Lee et al.'s multiplexing: after each stride the channels fill the gaps, so a ResNet
    stage's map takes C*H*W slots (a 64 x 8 x 8 map at gap 4 on a 32 x 32 grid: 4096)."""
    for C, H, g in [(16, 32, 1), (32, 16, 2), (64, 8, 4), (48, 8, 4)]:
        lay = Layout((C, H, H), g, (32, 32))
        s = lay.slot_indices()
        assert s.unique().numel() == C * H * H  # one value per slot
        assert int(s.max()) < -(-C // (g * g)) * 1024
    lay = Layout.image(16, 32, 32).strided(32, 2).strided(64, 2)
    assert lay.period(1 << 15) == 4096
    assert lay.pack(torch.arange(4096.0), 1 << 14).view(4, 4096).eq(torch.arange(4096.0)[lay.slot_indices().argsort()]).all()


def test_slot_maps_match_torch_layers(seed):
    model = _randomise_bn(SmallCNN())
    cm = fhe.nn.compile(model, torch.randn(16, 1, 16, 16), preset="toy-n13-bts", relu=15)
    cm.ctx = None
    _check_against_torch(cm, torch.randn(1, 1, 16, 16))
    # the strided layers keep the input grid and multiply the gap
    prog = cm.program()
    assert prog.layouts["down"].gap == 4 and prog.layouts["down"].grid == (16, 16)


@pytest.mark.slow
def test_small_cnn_encrypted_matches_simulation(seed):
    """One bootstrap on the way (the plan says where); bound: 1e-4 of the logits' size (CKKS
    noise at scale 2^40, through one toy bootstrapping of ~2^-17 relative precision)."""
    model = _randomise_bn(SmallCNN())
    cm = fhe.nn.compile(model, torch.randn(64, 1, 16, 16), preset="toy-n13-bts", relu=15)
    assert cm.plan.bootstraps == 1
    cm.keygen()
    # a fresh input inside the calibrated ranges (the contract; 64 calibration draws leave a few
    # percent of fresh ones 1.1-1.2 x beyond a bound at the head, which the range report flags)
    for _ in range(50):
        x = torch.randn(1, 1, 16, 16)
        sim = cm.simulate(x)
        if cm.last_ranges.ok:
            break
    assert cm.last_ranges.ok, str(cm.last_ranges)
    ey = cm(cm.encrypt(x))
    assert cm.program().bootstraps == cm.plan.bootstraps
    got = cm.decrypt(ey)
    scale = float(sim.abs().max())
    err = float((got - sim).abs().max())
    assert err <= 1e-4 * scale, f"encrypted vs simulated logits: {err:.3g} (scale {scale:.3g}, seed {seed})"
    plain = cm.plaintext(x).to(torch.float64)
    # against the float model, the encrypted run is off by the approximation's own error (what
    # the simulation shows; a degree-15 ReLU is coarse) plus the CKKS noise above
    assert float((got - plain).abs().max()) <= float((sim - plain).abs().max()) + 1e-4 * scale
    # layout checks
    with pytest.raises(fhe.LayoutError):
        cm.ctx.decrypt(ey)
    with pytest.raises(fhe.LayoutError):
        cm.decrypt(cm.encrypt(x))
    with pytest.raises(fhe.LayoutError):
        cm(ey)
    with pytest.raises(fhe.LayoutError):
        ey + torch.ones(3)
    with pytest.raises(fhe.ShapeError, match="takes"):
        cm.encrypt(torch.randn(1, 2, 16, 16))


def test_keys_first():
    cm = fhe.nn.compile(SmallCNN().eval(), torch.randn(8, 1, 16, 16), preset="toy-n13-bts", relu=15)
    with pytest.raises(fhe.MissingKeyError, match=r"CompiledModel.encrypt: no keys yet; call cm.keygen\(\)"):
        cm.encrypt(torch.randn(1, 1, 16, 16))


def test_models_too_large_for_one_ciphertext_say_so_at_compile_time():
    model = nn.Sequential(nn.Conv2d(3, 64, 3, 1, 1), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                          nn.Linear(64, 10)).eval()
    with pytest.raises(fhe.nn.UnsupportedLayerError, match="slots"):
        fhe.nn.compile(model, torch.randn(4, 3, 32, 32), preset="toy-n13-bts", relu=15)


class AnyGeometry(nn.Module):
    """Convolutions torch allows beyond 'same' ones: an even kernel (8x8 -> 9x9), 'valid'
    padding, stride 3, dilation and groups, 'same' with an even kernel, pooling with padding,
    a flattened 3x3 map, and a residual addition of two equally packed branches."""

    def __init__(self):
        super().__init__()
        self.grow = nn.Conv2d(2, 4, 2, 1, 1)
        self.valid = nn.Conv2d(4, 4, 3, 1, 0)
        self.dilated = nn.Conv2d(4, 4, 3, 1, 2, dilation=2, groups=2)
        self.same = nn.Conv2d(4, 4, 4, 1, "same")
        self.pool = nn.AvgPool2d(3, 1, 1)
        self.down = nn.Conv2d(4, 6, 3, 3, 1)
        self.head = nn.Linear(6 * 3 * 3, 5)

    def forward(self, x):
        y = F.relu(self.valid(self.grow(x)))
        y = F.relu(self.same(self.dilated(y)) + y)
        return self.head(torch.flatten(self.down(self.pool(y)), 1))


def test_any_conv_geometry_slot_maps_match_torch(seed):
    model = AnyGeometry().eval()
    cm = fhe.nn.compile(model, torch.randn(16, 2, 8, 8), preset="toy-n13-bts", relu=7)
    cm.ctx = None
    prog = cm.program()
    assert prog.layouts["grow"].shape == (4, 9, 9) and prog.layouts["valid"].grid == (9, 9)
    _check_against_torch(cm, torch.randn(1, 2, 8, 8))


def _keyed(model, calib, preset="toy-n10"):
    cm = fhe.nn.compile(model, calib, preset=preset)
    cm.keygen()
    return cm


def test_vector_model_on_a_non_bootstrappable_preset(seed):
    """Linear -> ReLU -> Linear on (F,) inputs at toy-n10: vectors are packed in slots 0..F-1."""
    model = nn.Sequential(nn.Linear(10, 4), nn.ReLU(), nn.Linear(4, 3)).eval()
    cm = fhe.nn.compile(model, torch.randn(64, 10), preset="toy-n10", relu=7)
    assert cm.plan.bootstraps == 0
    cm.keygen()
    x = torch.randn(1, 10) * 0.5
    got, sim = cm.decrypt(cm(cm.encrypt(x))), cm.simulate(x)
    assert float((got - sim).abs().max()) <= 1e-4 * float(sim.abs().max()), f"seed {seed}"


def test_one_layer_model_on_a_non_bootstrappable_preset(seed):
    """A one-layer model runs at toy-n10 (no bootstrapping); cm.encrypt refuses inputs beyond
    their calibrated bound (saying the margin that would take them); another model's keys
    refuse this one's ciphertexts (ContextError, not 1e217), while a copy of the same keys
    (ctx.public(), what a server holds) is accepted."""
    model = nn.Sequential(nn.Conv2d(1, 2, 3, 1, 1)).eval()
    calib = torch.randn(16, 1, 8, 8)
    cm = _keyed(model, calib)
    x = torch.randn(1, 1, 8, 8)
    ex = cm.encrypt(x)
    ey = cm(ex)
    want = cm.plaintext(x).to(torch.float64).reshape(1, -1)
    assert float((cm.decrypt(ey) - want).abs().max()) <= 1e-4 * float(want.abs().max())
    # the input's bound: the calibration peak x margin 1.25, rounded up
    peak = float(calib.abs().max())
    far = x / x.abs().max() * (cm.bounds["input_1"] * float(torch.empty(1).uniform_(1.01, 100)))
    with pytest.raises(fhe.EncodingError, match=r"beyond its calibrated bound .*margin=") as err:
        cm.encrypt(far)
    needed = float(str(err.value).split("margin=")[1].split(")")[0])
    assert needed * peak >= float(far.abs().max())  # the margin it suggests covers the input
    with pytest.raises(fhe.EncodingError, match="NaN"):
        cm.encrypt(torch.full((1, 1, 8, 8), float("nan")))
    other = _keyed(model, calib)
    with pytest.raises(fhe.ContextError, match="other keys"):
        other(ex)
    with pytest.raises(fhe.ContextError, match="other keys"):
        other.decrypt(ey)
    shared = fhe.EncryptedTensor(cm.ctx.public(), ex.ciphertext, ex.shape, layout=ex.layout)
    assert float((cm.decrypt(cm(shared)) - want).abs().max()) <= 1e-4 * float(want.abs().max())


@pytest.mark.cuda
def test_small_cnn_encrypted_on_gpu_secure_preset(seed):
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    model = _randomise_bn(SmallCNN())
    cm = fhe.nn.compile(model, torch.randn(64, 1, 16, 16), preset="n16-bts40", device="cuda")
    cm.keygen()
    x = torch.randn(1, 1, 16, 16)
    got = cm.decrypt(cm(cm.encrypt(x)))
    sim, plain = cm.simulate(x), cm.plaintext(x).to(torch.float64)
    scale = float(sim.abs().max())
    assert float((got - sim).abs().max()) <= 1e-4 * scale, f"seed {seed}"
    assert float((got - plain).abs().max()) <= 1e-2 * float(plain.abs().max())
    assert int((got.argmax(1) == plain.argmax(1)).sum()) == 1


def test_resnet20_slot_maps_match_torch(seed):
    """The CIFAR ResNet-20 (random weights) in 16384 slots: multiplexed stages, replicated
    copies, the strided blocks' shortcuts, global pooling as a rotation-sum tree."""
    from models.resnet20 import ResNet20

    model = _randomise_bn(ResNet20())
    cm = fhe.nn.compile(model, torch.randn(8, 3, 32, 32), preset="n16-bts40")
    cm.ctx = None
    _check_against_torch(cm, torch.randn(1, 3, 32, 32))
    prog = cm.program()
    assert prog.slots == 1 << 14
    assert prog.layouts["layer3_2_conv2"].period(prog.slots) == 4096
    diagonals = {name: m.offsets() for name, (_, _, m) in prog.chains.items() if m is not None}
    assert max(diagonals.values()) <= 900, diagonals  # stage-3 convolutions: 4 channel blocks x 15 x 15
    assert diagonals["linear"] <= 16 * 13  # pooled by rotations: the classifier reads 64 slots


def test_report_lists_keys_and_latency():
    """cm.report(): the rotation keys keygen makes (same steps), their memory by the key-size
    formula (checked against generated keys), diagonals; the generated keys after keygen."""
    from fhetorch._rlwe import switching_key_bytes

    cm = fhe.nn.compile(SmallCNN().eval(), torch.randn(8, 1, 16, 16), preset="toy-n13-bts", relu=15)
    prog = cm.program()
    rots = prog.rotations()
    text = cm.report()
    assert f"rotation keys: {len(rots)} steps" in text and "diagonals" in text and "keys generated" not in text
    ctx = cm.keygen()
    p = cm.params
    for step, lvl in list(rots.items())[:3]:  # capped keys hold the limbs of their level only
        g = galois_element(step, p.n)
        key = ctx.galois_keys[g]
        want = switching_key_bytes(p.n, p.limbs(min(lvl, p.max_level)).stop, len(p.special_primes), p.alpha)
        assert key.nbytes == want
    text = cm.report()
    assert "keys generated" in text
    est = float(text.split("key memory (estimated): ")[1].split(" GiB")[0])
    got = ctx.key_bytes() / 2**30
    assert abs(est - got) <= 0.15 * got, (est, got)  # rotation, bootstrapping, relinearisation keys
