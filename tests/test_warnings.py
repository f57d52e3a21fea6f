"""Warnings name the user's line (issue 10, item 15): every InsecureParametersWarning fhetorch
raises is attributed to the caller outside the package (here: this file), whichever public
function it went through, not to fhetorch's internals."""
from __future__ import annotations

import io
import os
import subprocess
import sys
import textwrap
import warnings

import pytest
import torch

import fhetorch as fhe

_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

def _recorded(fn):
    with warnings.catch_warnings(record=True) as got:
        warnings.simplefilter("always")
        fn()
    return [w for w in got if issubclass(w.category, fhe.InsecureParametersWarning)]


def _toy_file():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", fhe.InsecureParametersWarning)
        ctx = fhe.Context("toy-n10", "cpu")
    buf = io.BytesIO()
    fhe.save(ctx.keygen(rotations=[], power_of_two_rotations=False, conjugation=False).public(), buf)
    return buf.getvalue()


CASES = {
    "fhe.Context": lambda: fhe.Context("toy-n10", "cpu"),
    "fhe.ckks.Context": lambda: fhe.ckks.Context(preset="toy-n10", device="cpu"),
    "fhe.ckks.preset": lambda: fhe.ckks.preset("toy-n12"),
    "make_params": lambda: fhe.ckks.make_params(10, levels=4, allow_insecure=True),
    "nn.compile": lambda: fhe.nn.compile(torch.nn.Sequential(torch.nn.Linear(4, 3)), torch.randn(8, 4),
                                         preset="toy-n10"),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_insecure_warnings_name_the_callers_line(name):
    got = _recorded(CASES[name])
    assert got, f"{name}: no InsecureParametersWarning"
    for w in got:
        assert w.filename == __file__, f"{name}: warning attributed to {w.filename}:{w.lineno}, not to the caller"


def test_seed_and_load_warnings_name_the_callers_line():
    got = _recorded(lambda: fhe.Context("toy-n10", "cpu", seed=3))
    assert any("seed=" in str(w.message) for w in got)
    data = _toy_file()
    got += _recorded(lambda: fhe.load(io.BytesIO(data)))
    assert any("loaded parameters" in str(w.message) for w in got)
    assert {w.filename for w in got} == {__file__}


def test_warning_from_a_script_names_its_line(tmp_path):
    """The default filter shows a script's own line (and the source text there)."""
    script = tmp_path / "user.py"
    script.write_text(textwrap.dedent("""\
        import fhetorch as fhe
        ctx = fhe.Context("toy-n10", "cpu")  # the user's line
    """))
    r = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert f"{script}:2: InsecureParametersWarning" in r.stderr, r.stderr
    assert "the user's line" in r.stderr


def test_compile_raises_no_deprecation_warning():
    """nn.compile (BatchNorm folding included) and simulation in a fresh interpreter with
    DeprecationWarning and FutureWarning as errors: fhetorch calls no deprecated torch API
    (torch.fx.experimental.optimization's import did)."""
    code = textwrap.dedent("""\
        import warnings, torch, fhetorch as fhe
        from models.resnet20 import ResNet20
        warnings.simplefilter("ignore", fhe.InsecureParametersWarning)
        cm = fhe.nn.compile(ResNet20(num_classes=10, in_channels=1).eval(), torch.randn(4, 1, 8, 8),
                            preset="toy-n13-bts", relu=15)
        assert not any(isinstance(m, torch.nn.BatchNorm2d) for m in cm.graph_module.modules())
        cm.simulate(torch.randn(2, 1, 8, 8))
    """)
    r = subprocess.run([sys.executable, "-W", "error::DeprecationWarning", "-W", "error::FutureWarning", "-c", code],
                       capture_output=True, text=True, timeout=300, cwd=_ROOT)
    assert r.returncode == 0, r.stderr[-3000:]
