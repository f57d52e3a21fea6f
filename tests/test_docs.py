"""Every code block in README.md, docs/*.md and benchmarks/README.md runs as written (issue 10,
item 14).

The rule, by the fence's info string (the first word is the language, the others are tags):

- ```python: run on the CPU, each block on its own (standalone) in a fresh interpreter
  (`python -c`) from the repository root, as a reader would paste it; it must exit 0 and leave
  no new file in the checkout. The docs write these at toy presets.
- ```python gpu: the same, only where a CUDA GPU is present (marked `cuda`, skipped
  elsewhere); ```python data: only where the CIFAR-10 data is ($FHETORCH_DATA or
  ../shared/data, models.resnet20.cifar_data()).
- ```bash: every command must resolve without running it (the demo and the test suite take
  minutes): `bash scripts/x.sh` exists and parses (`bash -n`); `python -m module ...` and
  `python file.py ...` answer `--help` and list every `--option` the command uses (the module of
  `torchrun ... -m module ...` too); any other
  program is on the PATH. ```bash cpu: the commands also run (cheap CPU ones) and exit 0.
- ```text: not code (file listings, formulas, output); not run.

A block without a language, or with a tag not listed here, fails: label it.
"""
from __future__ import annotations

import glob
import os
import re
import shlex
import shutil
import subprocess
import sys

import pytest
import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FILES = ["README.md", "benchmarks/README.md"] + sorted(
    os.path.relpath(p, ROOT) for p in glob.glob(os.path.join(ROOT, "docs", "*.md")))
TAGS = {"python": {"gpu", "data"}, "bash": {"cpu"}, "text": set()}


def blocks():
    """(file, line, language, tags, code) of every fenced block."""
    out = []
    for name in FILES:
        lines = open(os.path.join(ROOT, name)).read().split("\n")
        i = 0
        while i < len(lines):
            if lines[i].startswith("```"):
                info = lines[i][3:].split()
                j = i + 1
                while j < len(lines) and not lines[j].startswith("```"):
                    j += 1
                out.append((name, i + 1, info[0] if info else "", set(info[1:]), "\n".join(lines[i + 1 : j])))
                i = j
            i += 1
    return out


BLOCKS = blocks()


def _ids(kind):
    return [pytest.param(b, id=f"{b[0]}:{b[1]}", marks=[pytest.mark.cuda] if "gpu" in b[3] else [])
            for b in BLOCKS if b[2] == kind]


def _untracked() -> set | None:
    """The checkout's untracked, not ignored files (None outside a git checkout)."""
    try:
        r = subprocess.run(["git", "status", "--porcelain", "--untracked-files=all"], cwd=ROOT,
                           capture_output=True, text=True, timeout=60)
    except OSError:
        return None
    return {line for line in r.stdout.splitlines() if line.startswith("??")} if r.returncode == 0 else None


def test_every_block_is_labelled():
    assert BLOCKS, "no code blocks found"
    bad = [f"{f}:{line} ({lang or 'no language'} {' '.join(sorted(tags))})" for f, line, lang, tags, _ in BLOCKS
           if lang not in TAGS or not tags <= TAGS[lang]]
    assert not bad, f"code blocks without a known language / tag (python [gpu] [data], bash [cpu], text): {bad}"


@pytest.mark.parametrize("block", _ids("python"))
def test_python_block_runs(block):
    name, line, _, tags, code = block
    if "data" in tags:
        from models.resnet20 import cifar_data

        if cifar_data() is None:
            pytest.skip("needs the CIFAR-10 data ($FHETORCH_DATA or ../shared/data)")
    before = _untracked()
    r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, f"{name}:{line} failed:\n{r.stderr[-4000:]}"
    after = _untracked()
    if before is not None and after is not None:
        assert after <= before, f"{name}:{line} left files in the checkout: {sorted(after - before)}"


def _commands(code):
    """The block's commands: one a line, comments and blank lines dropped."""
    out = []
    for raw in code.split("\n"):
        line = raw.split(" #")[0].strip() if not raw.lstrip().startswith("#") else ""
        if line:
            out.append(line)
    return out


def _resolve(cmd: str):
    words = shlex.split(cmd)
    prog, args = words[0], words[1:]
    if prog == "bash":
        script = os.path.join(ROOT, args[0])
        assert os.path.isfile(script), f"{cmd!r}: {args[0]} does not exist"
        r = subprocess.run(["bash", "-n", script], capture_output=True, text=True)
        assert r.returncode == 0, f"{cmd!r}: {args[0]} does not parse: {r.stderr}"
        return
    if prog == "torchrun":  # torchrun [its options] -m module [options]: the module is checked as python -m's
        assert shutil.which(prog), f"{cmd!r}: torchrun is not on the PATH"
        assert "-m" in args, f"{cmd!r}: the docs start modules under torchrun with -m"
        prog, args = "python", args[args.index("-m"):]
    if prog in ("python", "python3"):
        if args[0] == "-m":
            target, rest = ["-m", args[1]], args[2:]
        else:
            assert os.path.isfile(os.path.join(ROOT, args[0])), f"{cmd!r}: {args[0]} does not exist"
            target, rest = [args[0]], args[1:]
        r = subprocess.run([sys.executable, *target, "--help"], cwd=ROOT, capture_output=True, text=True,
                           timeout=300)
        assert r.returncode == 0, f"{cmd!r}: --help fails:\n{r.stderr[-2000:]}"
        for opt in rest:
            if opt.startswith("--"):
                assert opt.split("=")[0] in r.stdout, f"{cmd!r}: {opt} is not an option of {' '.join(target)}"
        return
    assert shutil.which(prog), f"{cmd!r}: {prog} is not on the PATH"


@pytest.mark.parametrize("block", _ids("bash"))
def test_bash_block_resolves(block):
    name, line, _, tags, code = block
    cmds = _commands(code)
    assert cmds, f"{name}:{line}: an empty bash block"
    for cmd in cmds:
        _resolve(cmd)
    if "cpu" in tags:
        for cmd in cmds:
            r = subprocess.run(cmd, shell=True, cwd=ROOT, capture_output=True, text=True, timeout=600,
                               env={**os.environ, "CUDA_VISIBLE_DEVICES": ""})
            assert r.returncode == 0, f"{name}:{line}: {cmd!r} failed:\n{r.stderr[-3000:]}"


def test_gpu_blocks_are_marked():
    """A block whose code (comments aside) asks for CUDA outright is a gpu block: it would fail on
    a CPU."""
    def code_only(code):
        return "\n".join(line.split("#")[0] for line in code.split("\n"))

    bad = [f"{f}:{line}" for f, line, lang, tags, code in BLOCKS
           if lang == "python" and "gpu" not in tags and re.search(r"""["']cuda["']""", code_only(code))
           and "is_available" not in code]
    assert not bad, f"python blocks that need CUDA without the gpu tag: {bad}"

