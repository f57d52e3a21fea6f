"""models/evaluate_resnet20.py: --merge (runs over disjoint image ranges added up) and --relu's options."""
import glob
import json
import os
import random

import pytest

from models.evaluate_resnet20 import merge

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.mark.parametrize("pattern, runs_min, images_min, flips_expected", [
    ("product", 5, 174, {160}),  # before the step's sharpening: session 17's three calls (106 images), 24's 13, 25's 55
    ("sharpen2", 6, 384, set()),  # two sharpening stages (the default since session 25): session 26's two calls, 27's three, 28's one
])
def test_merge_of_the_recorded_relu_lut_runs(pattern, runs_min, images_min, flips_expected):
    """The recorded calls of ResNet-20 with relu="lut" (benchmarks/results) merge into one contiguous range
    from image 0, all with one setting, and the disagreements merge counts are the recorded ones."""
    paths = sorted(glob.glob(os.path.join(ROOT, "benchmarks", "results", f"*resnet20-relu-lut-{pattern}-from*.json")))
    assert len(paths) >= runs_min
    out = merge(paths)
    runs = [json.load(open(p)) for p in paths]
    n = sum(len(r["encrypted_top1"]) for r in runs)
    flips = {r.get("encrypted_from", 0) + i for r in runs
             for i, (e, p) in enumerate(zip(r["encrypted_top1"], r["plaintext_top1"])) if e != p}
    assert n >= images_min and (out["encrypted_images"], out["first"], out["last"]) == (n, 0, n - 1)
    assert out["disagreements"] == len(flips) and flips == flips_expected
    assert len({r.get("lut_sharpen", 0) for r in runs}) == 1


def _run(path, start, rows, **setting):
    e, p, y = zip(*rows)
    run = {"preset": "p", "relu": "lut", "lut_form": "product", "encrypted_from": start, "encrypted_top1": list(e),
           "plaintext_top1": list(p), "labels": list(y), "encrypted_max_logit_error": random.random(),
           "seconds_per_image_median": 1.0}
    run.update(setting)
    path.write_text(json.dumps(run))
    return str(path)


def test_merge_counts_and_refuses_overlaps(tmp_path):
    rng = random.Random()
    rows = [(rng.randrange(10), rng.randrange(10), rng.randrange(10)) for _ in range(rng.randint(4, 30))]
    cut = rng.randint(1, len(rows) - 1)
    a, b = _run(tmp_path / "a.json", 0, rows[:cut]), _run(tmp_path / "b.json", cut, rows[cut:])
    out = merge([a, b])
    n = len(rows)
    assert out["encrypted_images"] == n and out["disagreements"] == sum(e != p for e, p, _ in rows)
    assert out["encrypted_accuracy"] == sum(e == y for e, _, y in rows) / n
    with pytest.raises(SystemExit):  # image cut - 1 in both
        merge([a, _run(tmp_path / "c.json", cut - 1, rows[cut - 1:])])
    with pytest.raises(SystemExit):  # another preset
        merge([a, _run(tmp_path / "d.json", cut, rows[cut:], preset="q")])
    with pytest.raises(SystemExit):  # another sharpening of the LUT ReLUs' step
        merge([a, _run(tmp_path / "e.json", cut, rows[cut:], lut_sharpen=2)])


def test_encrypted_reports_after_every_image():
    """_encrypted's partial(scores) after each image but the last (what --json rewrites), with the
    images so far; a stand-in model whose 'encrypted' logits are the plaintext ones."""
    import torch

    from models.evaluate_resnet20 import _encrypted

    k = random.randint(2, 6)
    plain = torch.randn(k, 10, dtype=torch.float64)
    labels = torch.randint(0, 10, (k,))

    class Model:
        def keygen(self):
            return type("Ctx", (), {"key_bytes": lambda self: 0})()

        def encrypt(self, x):
            return x

        def __call__(self, ex, timing=False):
            self.timed = timing
            return ex

        def decrypt(self, ey):
            return plain[int(ey[0, 0])].view(1, -1)

        def program(self):
            return type("Prog", (), {"times": {"relu": 2.0, "add": 0.0}, "switch_times": {"pbs": 1.5},
                                     "bootstraps": 3})()

    seen = []
    out = _encrypted(Model(), torch.arange(k, dtype=torch.float64).view(k, 1), labels, plain, torch.device("cpu"),
                     lambda scores: seen.append(scores))
    assert [s["encrypted_images"] for s in seen] == list(range(1, k))
    assert seen[-1]["labels"] == labels[: k - 1].tolist()
    assert out["encrypted_images"] == k and out["disagreements"] == 0
    assert out["breakdown_s"] == {"relu": 2.0, "switch pbs": 1.5}  # one more image, timed (kinds that took time)


def test_relu_options_parse():
    """--relu: composite, an int degree, odd degrees of another composite (with --relu-eps), lut."""
    import argparse

    import fhetorch as fhe
    from fhetorch.nn.lut import LUTReLU
    from models.evaluate_resnet20 import _relu_option

    def opt(relu, eps=None):
        return _relu_option(argparse.Namespace(relu=relu, relu_eps=eps, lut_bits=None, lut_tfhe=None))

    assert opt("composite") == "composite" and opt("7") == 7 and opt("7,15,27") == (7, 15, 27)
    r = opt("7,15,27", 2**-8)
    assert r.name == "relu[7, 15, 27]" and r.eps == 2**-8
    x = fhe.ckks.polynomial.relu((7, 15, 27), 2**-8)
    assert [s.degree for s in r.stages] == [s.degree for s in x.stages] == [7, 15, 27]
    assert isinstance(opt("lut"), LUTReLU)
