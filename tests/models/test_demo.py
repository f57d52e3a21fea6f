"""The README's main command (issue 10, items 12 and 13): `bash scripts/demo.sh` announces the
configuration and every phase before it starts, caps torch's threads at the CPUs the process
may use, and reports logit errors relative to the logits' range, split into the
approximation (simulation vs plaintext) and the encryption's noise (encrypted vs simulation).
No timing is asserted (docs/benchmarks.md has the times)."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys

import pytest
import torch

from models import cpus
from models.demo_resnet20 import relative_errors

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _tree(tmp_path, files: dict, self_cgroup: str):
    root = tmp_path / "cgroup"
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    root.mkdir(exist_ok=True)
    proc = tmp_path / "self_cgroup"
    proc.write_text(self_cgroup)
    return str(root), str(proc)


CGROUPS = {
    "v2 quota 1.5 CPUs": ({"cpu.max": "150000 100000\n"}, "0::/\n", 2),
    "v2 unlimited": ({"cpu.max": "max 100000\n"}, "0::/\n", 64),
    "v2 nested, the child's quota": ({"a/cpu.max": "max 100000\n", "a/b/cpu.max": "100000 100000\n"}, "0::/a/b\n", 1),
    "v2 nested, the parent's quota": ({"a/cpu.max": "300000 100000\n", "a/b/cpu.max": "max 100000\n"}, "0::/a/b\n", 3),
    "v1 quota 2 CPUs": ({"cpu,cpuacct/x/cpu.cfs_quota_us": "200000\n", "cpu,cpuacct/x/cpu.cfs_period_us": "100000\n"},
                        "5:memory:/y\n4:cpu,cpuacct:/x\n", 2),
    "v1 unlimited": ({"cpu/cpu.cfs_quota_us": "-1\n", "cpu/cpu.cfs_period_us": "100000\n"}, "3:cpu:/\n", 64),
    "no cgroup files": ({}, "0::/\n", 64),
}


@pytest.mark.parametrize("case", sorted(CGROUPS))
def test_available_cpus_follows_the_cgroup_quota(tmp_path, monkeypatch, case):
    files, self_cgroup, want = CGROUPS[case]
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(64)))
    assert cpus.available_cpus(*_tree(tmp_path, files, self_cgroup)) == want


def test_available_cpus_follows_the_affinity_mask(tmp_path, monkeypatch):
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {3, 5})
    assert cpus.available_cpus(*_tree(tmp_path, {"cpu.max": "800000 100000\n"}, "0::/\n")) == 2
    assert cpus.available_cpus(*_tree(tmp_path, {"cpu.max": "50000 100000\n"}, "0::/\n")) == 1


def test_limit_threads_caps_torch_at_the_available_cpus(monkeypatch):
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(4)
        monkeypatch.setattr(cpus, "available_cpus", lambda: 1)
        assert cpus.limit_threads() == 1 and torch.get_num_threads() == 1
        monkeypatch.setattr(cpus, "available_cpus", lambda: 8)
        assert cpus.limit_threads() == 1  # never raised
    finally:
        torch.set_num_threads(before)


def test_relative_errors_split_approximation_and_noise():
    plain = torch.tensor([[0.0, 10.0, 4.0], [-1.0, 1.0, 0.0]])
    sim = torch.tensor([[1.0, 10.0, 4.0], [-1.0, 1.1, 0.0]])
    enc = torch.tensor([[1.0, 10.5, 4.0], [-1.0, 1.1, 0.001]])
    e = relative_errors(plain, sim, enc)
    assert torch.allclose(e["range"], torch.tensor([10.0, 2.0], dtype=torch.float64))
    assert torch.allclose(e["approximation"], torch.tensor([0.1, 0.05], dtype=torch.float64))
    assert torch.allclose(e["noise"], torch.tensor([0.05, 0.0005], dtype=torch.float64))
    assert torch.allclose(e["total"], torch.tensor([0.1, 0.05], dtype=torch.float64))
    g = torch.Generator().manual_seed(int(torch.randint(0, 2**31, (1,))))
    plain, sim, enc = (torch.randn(50, 10, generator=g, dtype=torch.float64) for _ in range(3))
    e = relative_errors(plain, sim, enc)
    span = plain.max(1).values - plain.min(1).values
    assert torch.allclose(e["total"] * span, (enc - plain).abs().max(1).values)
    assert bool((e["total"] <= e["approximation"] + e["noise"] + 1e-12).all())  # the triangle inequality


def _percent(text: str, pattern: str) -> float:
    m = re.search(pattern, text)
    assert m, f"no match for {pattern!r} in:\n{text}"
    return float(m.group(1))


@pytest.mark.slow
def test_demo_on_the_cpu_announces_phases_and_agrees_with_plaintext():
    """python -m models.demo_resnet20 on the CPU, one image: the insecure banner first, phases
    [1/4]..[4/4] in order, the simulation's top-1 agreement with plaintext >= 99 % on the 360
    digits test images (item 13), the encrypted image's top-1 equal to plaintext, and the
    errors relative to the logits' range consistent: the encryption's noise far below the
    approximation, the total at most their sum."""
    r = subprocess.run([sys.executable, "-m", "models.demo_resnet20", "--device", "cpu", "--images", "1"], cwd=ROOT,
                       capture_output=True, text=True, timeout=1200, env={**os.environ, "CUDA_VISIBLE_DEVICES": ""})
    assert r.returncode == 0, r.stderr[-3000:]
    out = r.stdout
    lines = out.splitlines()
    assert "REDUCED, INSECURE CONFIGURATION" in lines[0] and "NOT secure" in lines[0], lines[0]
    starts = [next(i for i, line in enumerate(lines) if line.startswith(f"[{k}/4]")) for k in range(1, 5)]
    assert starts == sorted(starts), out
    assert _percent(lines[starts[0] + 1], r"plaintext test accuracy (\S+)%") >= 95.0
    sim_line = lines[starts[1] + 1]
    assert _percent(sim_line, r"top-1 agreement (\S+)%") >= 99.0, sim_line
    assert "all values inside their planned ranges" in sim_line
    assert "encrypted top-1 equal to plaintext on 1/1 images" in out
    total = _percent(out, r"encrypted vs plaintext (\S+)%")
    approx = _percent(out, r"the approximation \(simulation vs plaintext\) (\S+)%")
    noise = float(re.search(r"encryption noise \(encrypted vs simulation\) (\S+)", out).group(1))
    assert noise < 1e-3, out  # CKKS noise: ~1e-6 of the logits' range
    assert total <= approx + 100 * noise + 0.01, out  # printed to 0.01 %


def test_demo_script_says_what_it_runs_before_setting_up():
    """bash scripts/demo.sh: the configuration line (insecure without a GPU) and the setup
    announcement come before setup's own lines and the demo (here its --help, so nothing long
    runs; setup skips a build that is up to date)."""
    r = subprocess.run(["bash", "scripts/demo.sh", "--help"], cwd=ROOT, capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stderr[-3000:]
    lines = r.stdout.splitlines()
    assert lines[0].startswith("fhetorch demo:"), lines[:3]
    gpu = subprocess.run(["nvidia-smi", "-L"], capture_output=True).returncode == 0 if shutil.which("nvidia-smi") \
        else False
    assert ("INSECURE" in lines[0]) != gpu, lines[0]
    assert lines[1].startswith("fhetorch demo: setting up first"), lines[:3]
    setup = [i for i, line in enumerate(lines) if line.startswith("setup: ")]
    usage = next(i for i, line in enumerate(lines) if line.startswith("usage:"))
    assert setup and 1 < min(setup) and max(setup) < usage, lines


@pytest.mark.slow
def test_cpu_configuration_agrees_with_plaintext_over_trainings():
    """Item 13: the CPU configuration (toy-n13-bts, digits.cpu_relu()) keeps the simulation's
    top-1 agreement with plaintext >= 99 % on the 360 digits test images for the demo's model
    and three other trainings (seeds). With the degree-31 Chebyshev interpolant seed 3 gave
    98.3 % (and its logits were off by a quarter of their range at the median)."""
    import warnings

    import fhetorch as fhe
    from models import digits

    xtr, _, xte, _ = digits.load_digits()
    models = {0: digits.trained_model(), **{s: digits.train(seed=s) for s in (1, 2, 3)}}
    for seed, model in models.items():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", fhe.InsecureParametersWarning)
            cm = fhe.nn.compile(model, xtr[:256], preset=digits.CPU_PRESET, relu=digits.cpu_relu())
        sim, plain = cm.simulate(xte), cm.plaintext(xte)
        agree = float((sim.argmax(1) == plain.argmax(1)).double().mean())
        rel = relative_errors(plain, sim)["approximation"]
        assert cm.last_ranges.ok, f"seed {seed}: {cm.last_ranges}"
        assert agree >= 0.99, f"seed {seed}: top-1 agreement {agree:.2%}"
        assert float(rel.median()) < 0.1, f"seed {seed}: median logit error {float(rel.median()):.1%} of the range"
