"""The benchmark entry point and its README (issue 10, item 15): the CPU traffic floor is
measured against this machine's memory bandwidth, not the H100's, and every suite the entry
point runs is documented. Speed itself is never asserted here."""
from __future__ import annotations

import dataclasses
import importlib
import json
import os

import warnings

import pytest

from benchmarks import __main__ as bench
from benchmarks import common, tfhe
from fhetorch._tfhe.presets import preset
from fhetorch.errors import InsecureParametersWarning

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _ops_quick(tmp_path, *extra):
    path = tmp_path / "ops.json"
    assert bench.main(["--suite", "ops", "--device", "cpu", "--quick", "--ops", "hadd,rescale", "--repeat", "1",
                       "--warmup", "0", "--json", str(path), *extra]) == 0
    return json.loads(path.read_text())


def test_cpu_floor_uses_this_machines_bandwidth(tmp_path):
    doc = _ops_quick(tmp_path)
    cfg = doc["config"]
    assert cfg["bandwidth_source"] == "measured copy bandwidth of this CPU"
    assert cfg["bandwidth_gbs"] != common.H100_COPY_GBS and cfg["bandwidth_gbs"] > 0
    for row in doc["results"]:
        assert row["floor_us"] == pytest.approx(row["floor_bytes"] / (cfg["bandwidth_gbs"] * 1e9) * 1e6)
        assert row["x_floor"] == pytest.approx(row["median_us"] / row["floor_us"])


def test_bandwidth_option_overrides_the_measurement(tmp_path):
    doc = _ops_quick(tmp_path, "--bandwidth-gbs", "123.5")
    assert doc["config"]["bandwidth_gbs"] == 123.5 and doc["config"]["bandwidth_source"] == "--bandwidth-gbs"
    for row in doc["results"]:
        assert row["floor_us"] == pytest.approx(row["floor_bytes"] / 123.5e3)


def test_every_suite_runs_and_is_documented():
    readme = open(os.path.join(ROOT, "benchmarks", "README.md")).read()
    assert "not written yet" not in readme and "not implemented" not in readme
    for name, module in bench.SUITES.items():
        assert callable(importlib.import_module(module).run), name
        assert f"## Suite `{name}`" in readme, f"benchmarks/README.md has no section for suite {name!r}"
        assert f"--suite {name}" in readme, f"benchmarks/README.md shows no command for suite {name!r}"


def test_tfhe_suite_quick_on_cpu(tmp_path):
    path = tmp_path / "tfhe.json"
    assert bench.main(["--suite", "tfhe", "--device", "cpu", "--quick", "--batches", "1,3", "--repeat", "1",
                       "--warmup", "0", "--json", str(path)]) == 0
    doc = json.loads(path.read_text())
    assert doc["suite"] == "tfhe" and doc["commit"] and doc["device"].startswith("cpu")
    info = doc["presets"]["toy-tfhe-4bit"]
    assert info["check_ok"] is True and info["keyswitch_key_bytes"] > 0 and info["bootstrap_key_bytes"] > 0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", InsecureParametersWarning)
        model = tfhe.pbs_model(preset("toy-tfhe-4bit"))
    assert info["model"] == model
    rows = {(r["op"], r["batch"]): r for r in doc["results"]}
    assert set(rows) == {(op, b) for op in tfhe.OPS for b in (1, 3)}
    bw = doc["config"]["bandwidth_gbs"]
    for (op, batch), r in rows.items():
        assert r["median_us"] > 0 and r["per_s"] == pytest.approx(batch / (r["median_us"] * 1e-6))
        assert r == {**r, **tfhe.floor_of(model, op, batch, bw)}
        assert r["x_floor"] == pytest.approx(r["median_us"] / r["floor_us"])
    # KS + PBS does the work of both
    assert rows[("ks_pbs", 3)]["floor_ops"] == rows[("ks", 3)]["floor_ops"] + rows[("pbs", 3)]["floor_ops"]


def test_tfhe_model_counts_the_tfhe_4bit_key_switch():
    m = tfhe.pbs_model(preset("tfhe-4bit"))  # n_in = kN = 2048, level 5, n_out = 833, two primes
    assert m["ks_imad"] == 2048 * 5 * 834 * 2 and m["ks_key_bytes"] == 2048 * 5 * 2 * 834 * 4
    f = tfhe.floor_of(m, "ks", 16384, 3000.0)
    assert f["floor_ops"] == 16384 * 2048 * 5 * 834 * 2 and f["floor_bound"] == "compute"


def test_tfhe_model_counts_the_multi_bit_pbs():
    m = tfhe.pbs_model(preset("tfhe-4bit-mb4"))  # n 808, G 4: 202 groups of 16 GGSWs (k1 2, level 1, N 2048)
    entries = 2 * 1 * 2 * 1024  # complex values of a GGSW in FFT form (M = 1024)
    assert m["pbs_rotation"] == "fft" and m["pbs_key_bytes"] == 202 * 16 * entries * 16
    fft = 512 * 10  # butterflies of one transform of M = 1024
    step = 6 * fft * 2 + 8 * fft * 2 + 4 * entries + 4 * 15 * entries  # + the key bundle's 15 products an entry
    assert m["pbs_ops"] == 202 * step
    ntt = tfhe.pbs_model(dataclasses.replace(preset("tfhe-4bit-mb4"), blind_rotation="ntt"))
    ggsw = 2 * 1 * 2 * 2 * 2048
    assert ntt["pbs_key_bytes"] == 202 * 16 * ggsw * 4
    mults = 202 * (2 * (2 + 2) * 1024 * 11 + ggsw + 15 * ggsw)  # 4 forward and 4 inverse NTTs of N per group
    assert ntt["pbs_mont_mults"] == mults and ntt["pbs_ops"] == 3 * mults


def test_tfhe_model_counts_the_large_ring_traffic():
    """At N = 2^16 the spectra cross memory every key bit (fourier_split_core.cuh): 11 MiB a ciphertext
    and key bit at tfhe-8bit-p128, the bound of a large batch."""
    p = preset("tfhe-8bit-p128")  # n 1267, k 1, N 2^16, level 3
    m = tfhe.pbs_model(p)
    per_bit = 16 * 32768 * (2 * 6 + 2 * 2) + 24 * 2 * 65536
    assert per_bit == 11 * 2**20 and m["pbs_ct_bytes"] == 1268 * 8 + 65537 * 8 + 1267 * per_bit
    assert tfhe.floor_of(m, "pbs", 1024, 4800.0)["floor_bound"] == "memory"
    assert tfhe.pbs_model(preset("tfhe-4bit-p128"))["pbs_ct_bytes"] == 919 * 8 + 2049 * 8  # fused: on chip


def test_sort_suite_quick_on_cpu(tmp_path):
    path = tmp_path / "sort.json"
    assert bench.main(["--suite", "sort", "--device", "cpu", "--quick", "--repeat", "1", "--warmup", "0",
                       "--json", str(path)]) == 0
    doc = json.loads(path.read_text())
    info = doc["presets"]["toy-n13-bts"]
    assert doc["suite"] == "sort" and info["n"] == 2 and info["counts"] == info["plan"]
    assert info["vs_plain"] < 1e-4 and info["max_err"] <= info["error_bound"] + 1e-4
    assert [r["case"] for r in doc["results"]] == ["sort"] and doc["results"][0]["median_us"] > 0
