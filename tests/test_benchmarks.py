"""The benchmark entry point and its README (issue 10, item 15): the CPU traffic floor is
measured against this machine's memory bandwidth, not the H100's, and every suite the entry
point runs is documented. Speed itself is never asserted here."""
from __future__ import annotations

import importlib
import json
import os

import pytest

from benchmarks import __main__ as bench
from benchmarks import common

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
