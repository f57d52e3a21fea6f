"""Levels and bootstraps of a compiled model (the planner).

Costs in levels, per layer of graph.py:
- a "linear" layer: 1 level for the plaintext map (a linear transform of the packed slots),
  except flatten / identity / adding a constant (0), and a linear layer whose input comes
  (through free layers only) from a linear layer with no other consumer (the maps merge into
  one: 0 more);
- "relu": each stage of the polynomial (its Chebyshev depth), then 1 for x * (...) when the
  approximation is x (1 + sign(x)) / 2;
- "add": 0; the result is at the lower level of the two.

Values start at the preset's top level (a fresh encryption). A bootstrap refreshes a value
to `levels_after_bootstrap`, and the refreshed value serves every later consumer. Every value
lies in [-1, 1] (compiler.py's range classes), so any point may bootstrap: before any layer
(each of its inputs), inside a composite ReLU before any stage (the intermediate), and before
the final product (x or the intermediate).

The planner takes the fewest bootstraps: a shortest path over (layer, levels of the values
still to be read), exact because the frontier keeps every Pareto-optimal state (the search
Orion and Fhelipe do over the layer graph). ResNet-20: 26 bootstraps at n16-bts40 (a greedy
as-late-as-possible rule took 27), 17 at n16-bts35 (the same). All bootstraps cost the
same; the level-dependent cost of the other operations is not modelled. The executor
(run.py) takes exactly the plan's bootstraps (`Step.bootstraps`).
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
    bootstraps: list = field(default_factory=list)  # (point, value): "in" / ("stage", k) / "product"; "y" intermediate
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
            b = ", ".join(_boot_text(p, v) for p, v in s.bootstraps)
            rows.append(f"{s.name:28s} {s.op:20s} {s.level_in:3d} {s.level_out:3d}  {b}")
        rows.append(f"total: {len(self.steps)} layers, {self.bootstraps} bootstraps")
        t = self.expected_bootstrap_ms()
        if t is not None:
            rows.append(f"expected time in bootstrapping: {t[0]:.0f} ms ({self.bootstraps} x at full slots, measured "
                        f"{t[1]}); cm.report() adds the linear layers, ReLUs, keys and sparse packings")
        return "\n".join(rows)


def _boot_text(point, value) -> str:
    what = "the intermediate" if value == "y" else value
    if point == "in":
        return f"{what} before"
    if point == "product":
        return f"{what} before the product"
    return f"{what} before stage {point[1] + 1}"


def relu_stages(fn) -> tuple:
    """([(Chebyshev series, levels)] evaluated one after the other, times_input): the ReLU
    approximation as the planner counts it and the executor (run.py) evaluates it; with
    times_input the result is x * (last stage), one level more."""
    from ..circuits.polynomial import Composite, cost

    series = fn._series() if isinstance(fn, Composite) else [fn.series]
    return [(s, cost(s).depth) for s in series], bool(getattr(fn, "times_input", False))


def make_plan(layers: list, params, relu_fn) -> Plan:
    """The plan with the fewest bootstraps: a shortest path over (layer, levels of the live
    values). At every layer each input may be bootstrapped first (a refreshed value serves its
    later consumers), and inside a ReLU the intermediate before any stage and x before the
    product; an operation needs its inputs at >= the levels it consumes. The frontier keeps
    the Pareto-optimal (bootstraps, levels) states, so the search is exact and small: a
    ResNet has at most three live values at a time."""
    info = params.info()
    if not info.bootstrappable:
        raise ValueError(f"nn.compile: preset {params.name!r} cannot bootstrap; deep models need n16-bts40, "
                         "n16-bts35 (or toy-n13-bts for tests)")
    top, after = params.max_level, info.levels_after_bootstrap
    series, product = relu_stages(relu_fn)
    stages = [d for _, d in series]
    last_use, consumers = {}, {}
    for k, l in enumerate(layers):
        for i in l.inputs:
            last_use[i] = k
            consumers[i] = consumers.get(i, 0) + 1
    kind = {l.name: l for l in layers}
    needs = {l.name: _linear_need(l, kind, consumers) for l in layers if l.kind == "linear"}

    # frontier: {levels of the live values (sorted (name, level) tuple): (bootstraps, trail)}
    # trail: (previous trail, layer name, boots, level_in, level_out) for the reconstruction
    frontier = {(): (0, None)}
    for k, l in enumerate(layers):
        nxt = {}
        for state, (cost, trail) in frontier.items():
            lv = dict(state)
            for boots, out, lin in _moves(l, lv, top, after, stages, product, needs):
                new = {n: (after if any(v == n for _, v in boots) else x) for n, x in lv.items()}
                new[l.name] = out
                key = tuple(sorted((n, x) for n, x in new.items() if last_use.get(n, -1) > k))
                c = cost + len(boots)
                if key not in nxt or c < nxt[key][0]:
                    nxt[key] = (c, (trail, l.name, boots, lin, out))
        frontier = _pareto(nxt)
        if not frontier:
            raise ValueError(f"nn.compile: no plan fits {l.name} ({l.op}) in {after} levels after a bootstrap; "
                             "use a preset with more levels or a lower-degree ReLU (relu=<degree>)")
    _, trail = min(frontier.values(), key=lambda v: v[0])
    steps = []
    while trail is not None:
        trail, name, boots, lin, out = trail
        l = kind[name]
        used = sum(stages) + (1 if product else 0) if l.kind == "relu" else needs.get(name, 0)
        steps.append(Step(name, l.kind, l.op, lin, out, list(boots), used))
    steps.reverse()
    return Plan(params.name, top, after, steps, stages + ([1] if product else []))


def _linear_need(l, kind, consumers) -> int:
    """Levels a linear layer consumes: 0 for free layers and maps merged into the one before
    (run.py composes a linear layer into the next while nothing else reads it), else 1."""
    if l.op in FREE:
        return 0
    prev, ok = kind.get(l.inputs[0]), consumers.get(l.inputs[0], 0) == 1
    while prev is not None and prev.kind == "linear" and prev.op in FREE and ok:
        ok = consumers.get(prev.inputs[0], 0) == 1
        prev = kind.get(prev.inputs[0])
    merged = ok and prev is not None and prev.kind == "linear" and prev.op not in FREE
    return 0 if merged else 1


def _moves(l, lv, top, after, stages, product, needs):
    """[(boots, output level, input level)] of layer l from the live levels lv; boots: the
    (point, value) bootstraps it takes ("in": before the layer; ("stage", k) / "product":
    inside a ReLU, "y" the intermediate)."""
    if l.kind == "input":
        return [((), top, top)]
    if l.kind == "add":
        out = []
        for pick in _subsets(l.inputs):
            levels = [after if i in pick else lv[i] for i in l.inputs]
            out.append((tuple(("in", i) for i in pick), min(levels), min(levels)))
        return out
    src = l.inputs[0]
    if l.kind == "linear":
        need = needs[l.name]
        if need == 0:  # nothing to refresh: a merged or free layer keeps its source's level
            return [((), lv[src], lv[src])]
        out = [((), lv[src] - 1, lv[src])] if lv[src] >= 1 else []
        return out + [((("in", src),), after - 1, after)]
    out = []  # relu: x, then y through the stages, then x * y
    for boot_x in (False, True):
        x = after if boot_x else lv[src]
        start = (("in", src),) if boot_x else ()
        for mid in _subsets(range(1, len(stages))):
            y, boots, ok = x, list(start), True
            for k, d in enumerate(stages):
                if k in mid:
                    y = after
                    boots.append((("stage", k), "y"))
                if y < d:
                    ok = False
                    break
                y -= d
            if not ok:
                continue
            if not product:
                out.append((tuple(boots), y, x))
                continue
            for pick in _subsets(("x", "y")):
                xx = after if "x" in pick else x
                yy = after if "y" in pick else y
                if min(xx, yy) >= 1:
                    extra = tuple(("product", src if v == "x" else "y") for v in pick)
                    out.append((tuple(boots) + extra, min(xx, yy) - 1, x))
    return out


def _subsets(items):
    items = list(items)
    return [tuple(v for b, v in enumerate(items) if m >> b & 1) for m in range(1 << len(items))]


def _pareto(states: dict) -> dict:
    """The states no other beats on bootstraps and on every live level at once."""
    kept = []
    for key, val in sorted(states.items(), key=lambda kv: (kv[1][0], [-x for _, x in kv[0]])):
        names, levels = [n for n, _ in key], [x for _, x in key]
        if not any(val[0] >= c and kn == names and all(a <= b for a, b in zip(levels, kl))
                   for c, kn, kl, _ in kept):
            kept.append((val[0], names, levels, (key, val)))
    return dict(item for *_, item in kept)
