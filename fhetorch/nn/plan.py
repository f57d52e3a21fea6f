"""Levels and bootstraps of a compiled model (the planner).

Costs in levels, per layer of graph.py:
- a "linear" layer: 1 level for the plaintext map (a linear transform of the packed slots),
  except flatten / identity / adding a constant (0), and a linear layer whose input comes
  (through free layers only) from a linear layer with no other consumer (the maps merge into
  one: 0 more);
- "relu": each stage of the polynomial (its Chebyshev depth), then 1 for x * (...) when the
  approximation is x (1 + sign(x)) / 2;
- "add": 0; the result is at the lower level of the two.

Values start at the preset's top level (a fresh encryption). When an operation needs more
levels than its input has, that value is bootstrapped first (to `levels_after_bootstrap`); a
bootstrapped value serves every later consumer. Inside a composite ReLU the intermediate is
bootstrapped between stages where needed; the ReLU's input x stays alive for the final
product. Every value lies in [-1, 1] (compiler.py's range classes), so any point may bootstrap.

This greedy plan bootstraps as late as possible along the execution order; it is optimal for
a chain and is what the report shows. (A dynamic programme over the residual blocks, as Orion
and Fhelipe do, is the next step: it can bootstrap once before a fork instead of on both
branches.)
"""
from __future__ import annotations

from dataclasses import dataclass, field

FREE = ("identity", "flatten", "add_const")  # linear layers that cost no level

# Bootstrapping latency measured on the H100 (graph-replayed, full slots; docs/benchmarks.md).
BOOTSTRAP_MS = {"n16-bts40": (44.1, "H100, commit 71fb2d8"), "n16-bts35": (47.3, "H100, commit 71fb2d8")}
# Sparse packings (n <= N/4) run one EvalMod: 29.95 ms at 2^13 slots (H100, commit bc097b6).
SPARSE_BOOTSTRAP_MS = 30.0

# Latency model of a graph-replayed encrypted network on the H100 (report()): per bootstrap
# (above), per diagonal of the linear transforms (encoded at every call, multiplied, summed)
# and per ReLU, fitted to the CIFAR ResNet-20 runs of the resnet20 suite (commit bc097b6:
# 1.24 s with 27 bootstraps at n16-bts40, 0.96 s with 17 at n16-bts35, 8536 diagonals, 19
# ReLUs; the non-bootstrap time split as in the eager breakdown). An estimate, not a promise.
LATENCY_MODEL = {"n16-bts40": (27.7e-6, 11.6e-3), "n16-bts35": (20.3e-6, 15.4e-3)}  # (s per diagonal, s per ReLU)


@dataclass
class Step:
    name: str
    kind: str
    op: str
    level_in: int
    level_out: int
    bootstraps: list = field(default_factory=list)  # what is bootstrapped before / inside this layer
    levels: int = 0  # levels this layer consumes


@dataclass
class Plan:
    preset: str
    top: int
    after_bootstrap: int
    steps: list
    relu_depths: list

    @property
    def bootstraps(self) -> int:
        return sum(len(s.bootstraps) for s in self.steps)

    def expected_bootstrap_ms(self):
        """(ms, source) of the bootstraps alone on the measured GPU, or None."""
        t = BOOTSTRAP_MS.get(self.preset)
        return None if t is None else (t[0] * self.bootstraps, t[1])

    def __str__(self):
        rows = [f"plan for preset {self.preset}: fresh inputs at level {self.top}, {self.after_bootstrap} levels "
                f"after each bootstrap; ReLU stages use {self.relu_depths} levels",
                f"{'layer':28s} {'op':20s} {'in':>3s} {'out':>3s}  bootstraps"]
        for s in self.steps:
            b = ", ".join(s.bootstraps)
            rows.append(f"{s.name:28s} {s.op:20s} {s.level_in:3d} {s.level_out:3d}  {b}")
        rows.append(f"total: {len(self.steps)} layers, {self.bootstraps} bootstraps")
        t = self.expected_bootstrap_ms()
        if t is not None:
            rows.append(f"expected time in bootstrapping: {t[0]:.0f} ms ({self.bootstraps} x at full slots, measured "
                        f"{t[1]}); cm.report() adds the linear layers, ReLUs, keys and sparse packings")
        return "\n".join(rows)


def relu_stages(fn) -> tuple:
    """([(Chebyshev series, levels)] evaluated one after the other, times_input): the ReLU
    approximation as the planner counts it and the executor (run.py) evaluates it; with
    times_input the result is x * (last stage), one level more."""
    from ..circuits.polynomial import Composite, cost

    series = fn._series() if isinstance(fn, Composite) else [fn.series]
    return [(s, cost(s).depth) for s in series], bool(getattr(fn, "times_input", False))


def make_plan(layers: list, params, relu_fn) -> Plan:
    info = params.info()
    if not info.bootstrappable:
        raise ValueError(f"nn.compile: preset {params.name!r} cannot bootstrap; deep models need n16-bts40, "
                         "n16-bts35 (or toy-n13-bts for tests)")
    top, after = params.max_level, info.levels_after_bootstrap
    series, product = relu_stages(relu_fn)
    stages = [d for _, d in series] + ([1] if product else [])
    consumers = {}
    for l in layers:
        for i in l.inputs:
            consumers[i] = consumers.get(i, 0) + 1
    kind = {l.name: l for l in layers}
    level = {}
    steps = []

    def refresh(value: str, step_bts: list, why: str):
        level[value] = after
        step_bts.append(f"{value} ({why})")

    for l in layers:
        if l.kind == "input":
            level[l.name] = top
            steps.append(Step(l.name, l.kind, l.op, top, top))
            continue
        bts = []
        if l.kind == "add":
            lin = min(level[i] for i in l.inputs)
            steps.append(Step(l.name, l.kind, l.op, lin, lin))
            level[l.name] = lin
            continue
        src = l.inputs[0]
        if l.kind == "linear":
            free = l.op in FREE
            # merge with the map before it, looking through free layers, when nothing else reads it
            prev, ok = kind.get(src), consumers.get(src, 0) == 1
            while prev is not None and prev.kind == "linear" and prev.op in FREE and ok:
                ok = consumers.get(prev.inputs[0], 0) == 1
                prev = kind.get(prev.inputs[0])
            merged = ok and prev is not None and prev.kind == "linear" and prev.op not in FREE
            need = 0 if free or merged else 1
            if level[src] < need:
                refresh(src, bts, "before " + l.op)
            lin = level[src]
            level[l.name] = lin - need
            steps.append(Step(l.name, l.kind, l.op, lin, lin - need, bts, need))
            continue
        # relu
        if level[src] < stages[0]:
            refresh(src, bts, "before the ReLU")
        lin = level[src]
        cur = lin
        body = stages[:-1] if product else stages
        for k, d in enumerate(body):
            if cur < d:
                cur = after
                bts.append(f"{l.name} stage {k + 1}")
            cur -= d
        if product:
            if cur < 1:
                cur = after
                bts.append(f"{l.name} before the product with x")
            cur = min(cur, level[src]) - 1
        level[l.name] = cur
        steps.append(Step(l.name, l.kind, l.op, lin, cur, bts, sum(stages)))
    return Plan(params.name, top, after, steps, stages)
