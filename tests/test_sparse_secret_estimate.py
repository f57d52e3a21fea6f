"""The sparse-secret encapsulation key's security estimate (fhetorch/_ckks/sparse_security.py,
docs/parameters.md): the primal model is checked against the HE standard's table, every
modelled attack on both bootstrappable presets' encapsulation key costs >= 2^128 in the model's
own core-SVP units (which read ~32 bits below the standard's at its bounds), and secure
parameters refuse an ephemeral weight the model breaks."""
import dataclasses
import math
import pathlib
import subprocess
import sys
import warnings

import pytest

import fhetorch as fhe
from fhetorch._ckks import sparse_security as est
from fhetorch.ckks import bootstrap_config, preset


def test_primal_model_matches_the_standard_table():
    """Core-SVP at the HE standard's 128-bit bounds: ~92-96 bits (the standard's cost model adds
    BKZ tours and a polynomial factor), flat across N as the table was made flat."""
    cal = est.calibrate()
    assert [n for n, _, _ in cal] == [12, 13, 14, 15, 16]
    bits = [b for _, _, b in cal]
    assert all(88 <= b <= 100 for b in bits), bits
    assert max(bits) - min(bits) < 6, bits
    n, q = 2 ** 15, 881  # more modulus, less security; a sparser secret, less
    assert est.usvp_beta(n, q + 100, math.sqrt(2 / 3)) < est.usvp_beta(n, q, math.sqrt(2 / 3))
    assert est.usvp_beta(n, q, math.sqrt(64 / n)) < est.usvp_beta(n, q, math.sqrt(2 / 3))


def test_drop_attacks_see_sparsity():
    """The same instance at weight 8 or 16 falls far below 128 bits: the weight is not free."""
    n, log_q = est.encapsulation_instance(preset("n16-bts40"))
    assert est.cheapest(n, log_q, 8).bits < 60
    assert est.cheapest(n, log_q, 16).bits < 100
    assert est.cheapest(n, log_q, 64).bits > est.cheapest(n, log_q, 32).bits


@pytest.mark.parametrize("name", ["n16-bts40", "n16-bts35"])
def test_encapsulation_key_is_128_bit(name):
    p = preset(name)
    n, log_q = est.encapsulation_instance(p)
    h = bootstrap_config(name).ephemeral_weight
    q, special = p.encapsulation_limbs
    assert n == 2 ** 16 and h == 32 and 140 < log_q < 146 and len(special) == len(q) + 1
    found = est.attacks(n, log_q, h)
    assert {a.name for a in found} == {"primal uSVP", "primal, dropped coordinates",
                                       "primal, dropped coordinates + MitM guess", "meet-in-the-middle on the key"}
    assert est.cheapest(n, log_q, h).bits >= 128, [(a.name, round(a.bits, 1)) for a in found]


def test_secure_parameters_refuse_a_weak_ephemeral_weight():
    p, cfg = preset("n16-bts40"), bootstrap_config("n16-bts40")
    with pytest.raises(fhe.SecurityError, match=r"Context: a sparse-secret encapsulation key of Hamming weight 8 .*"
                                                r"ephemeral_weight"):
        fhe.Context(p, "cpu", bootstrap=dataclasses.replace(cfg, ephemeral_weight=8))
    est.check_encapsulation(p, 32, "x")  # the preset's own weight passes
    est.check_encapsulation(p, 0, "x")  # no encapsulation: nothing to check
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", fhe.InsecureParametersWarning)
        toy = preset("toy-n13-bts")
    est.check_encapsulation(toy, 4, "x")  # insecure test parameters warned already


def test_script_prints_the_table():
    script = pathlib.Path(__file__).resolve().parents[1] / "scripts" / "sparse_secret_estimate.py"
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, check=True).stdout
    assert "cheapest modelled attack: 132.3 bits core-SVP" in out and "n16-bts35" in out
