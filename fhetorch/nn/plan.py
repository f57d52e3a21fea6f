"""Levels and bootstraps of a compiled model (the planner).

Costs in levels, per layer of graph.py:
- a "linear" layer: 1 level for the plaintext map (a linear transform of the packed slots),
  except flatten / identity / adding a constant (0), and a linear layer whose input comes
  (through free layers only) from a linear layer with no other consumer (the maps merge into
  one: 0 more);
- "relu": each stage of the polynomial (its Chebyshev depth), then 1 for x * (...) when the
  approximation is x (1 + sign(x)) / 2;
- "add": 0; the result is at the lower level of the two;
- "act" layers and LUT ReLUs (relu="lut"): the switch (fhetorch/nn/lut.py) needs its input at
  >= stc_levels + 1 and returns a fresh value at EvalMod's output level; in the product form
  (lut_form="product") x times that factor sits one level below the lower of x and the factor
  (an "act" layer: two below when they are equal, for its bound ratio; run.py, _times);
- "max" (max pooling, fhetorch/nn/maxpool.py): its input at >= stc_levels + 2 (the window's
  slot maps, then the switch); the output one level below the input (at most EvalMod's level);
  the product form one more level per wave (maxpool.output_level), its input at >= stc_levels
  + 1 + waves.

Values start at the preset's top level (a fresh encryption). A bootstrap refreshes a value
to `levels_after_bootstrap`, and the refreshed value serves every later consumer. Every value
lies in [-1, 1] (compiler.py's range classes), so any point may bootstrap: before any layer
(each of its inputs), inside a composite ReLU before any stage (the intermediate), and before
the final product (x or the intermediate). On a preset that cannot bootstrap the plan has no
bootstraps; a model deeper than its levels raises LevelError with the levels it needs.

The planner minimises the estimated latency (the model below: bootstraps, and every
operation by its level's limbs, so bootstrapping late keeps the layers cheap): a shortest
path over (layer, levels of the values still to be read), exact because the frontier keeps
every Pareto-optimal (seconds, levels) state (the search Orion and Fhelipe do over the layer
graph). Counting latency rather than bootstraps matters: at n16-bts40 a plan with one
bootstrap fewer than ResNet-20's runs its layers at higher levels and is slower (the figures
are in docs/benchmarks.md). The executor (run.py) takes exactly the plan's bootstraps
(`Step.bootstraps`).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

from ..circuits.presets import bootstrap_config, presets
from ..circuits.polynomial import cost
from ..errors import LevelError, ParameterError
from ..tensor.functions import Composite
from . import lut as _lut
from . import maxpool as _maxpool

FREE = ("identity", "flatten", "add_const")  # linear layers that cost no level


# Latency model of a graph-replayed network on the H100, what the planner minimises: a
# bootstrap (sparse packing) costs BOOTSTRAP_S; a linear layer ALPHA per diagonal and limb (its
# diagonals estimated as input channels x 9 for a convolution, input features for a linear
# layer, 32 for gathers and pools: run.py's maps have about that many), a ReLU BETA per level
# of its stages and limb, limbs = Q limbs at the operation's level + the special primes:
# ops at lower levels are cheaper. Fitted to the CIFAR ResNet-20 runs of the resnet20 suite at
# n16-bts35 and n16-bts40 (docs/benchmarks.md, "planner"). An estimate, not a promise.
BOOTSTRAP_S = 0.030
ALPHA, BETA = 2.0e-6, 3.8e-5

@dataclass
class Step:
    name: str
    kind: str
    op: str
    level_in: int
    level_out: int
    bootstraps: list = field(default_factory=list)  # (point, value): "in" / ("stage", k) / "product"; "y" intermediate
    levels: int = 0  # levels this layer consumes
    relu: object = None  # a ReLU's approximation (its polynomial, or a LUTReLU)
    form: str | None = None  # a lookup-table layer's form, "product" or "direct" (lut.py); None for the others


@dataclass
class Plan:
    preset: str
    top: int
    after_bootstrap: int | None  # None: the preset cannot bootstrap
    steps: list
    relu_depths: list
    estimated_s: float = 0.0  # the latency model's figure for this plan (H100, graph-replayed)

    @property
    def bootstraps(self) -> int:
        return sum(len(s.bootstraps) for s in self.steps)

    def __str__(self):
        after = ("no bootstrapping" if self.after_bootstrap is None else
                 f"{self.after_bootstrap} levels after each bootstrap")
        relu = (f"ReLU stages use {self.relu_depths} levels" if self.relu_depths else
                "ReLU and activations by lookup tables (each a refresh; a product form's result one level below)")
        rows = [f"plan for preset {self.preset}: fresh inputs at level {self.top}, {after}; {relu}",
                f"{'layer':28s} {'op':20s} {'in':>3s} {'out':>3s}  bootstraps"]
        for s in self.steps:
            b = ", ".join(_boot_text(p, v) for p, v in s.bootstraps)
            op = s.op + _form_text(s)
            rows.append(f"{s.name:28s} {op:20s} {s.level_in:3d} {s.level_out:3d}  {b}")
        rows.append(f"total: {len(self.steps)} layers, {self.bootstraps} bootstraps")
        rows.append(f"estimated latency {self.estimated_s:.2f} s (H100, graph-replayed; plan.py's model); "
                    "cm.report() adds diagonals and keys")
        return "\n".join(rows)


def _form_text(step) -> str:
    """A lookup-table layer's form in the plan's op column: " (lut)" for a LUT ReLU, " (lut, product)"
    for it in the product form; an "act" or "max" layer (always a LUT) " (product)" in that form."""
    if step.kind == "relu" and isinstance(step.relu, _lut.LUTReLU):
        return " (lut, product)" if step.form == "product" else " (lut)"
    return " (product)" if step.form == "product" else ""


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
    times_input the result is x * (last stage), one level more. A LUT ReLU has no stages."""
    if isinstance(fn, _lut.LUTReLU):
        return [], False

    series = fn.stage_series if isinstance(fn, Composite) else [fn.series]
    return [(s, cost(s).depth) for s in series], bool(getattr(fn, "times_input", False))


def make_plan(layers: list, params, relu_fn=None, slots: int | None = None, relu_options: dict | None = None,
              lut_forms: dict | None = None, switch_values: dict | None = None) -> Plan:
    """The plan of least estimated latency: a shortest path over (layer, levels of the live
    values). At every layer each input may be bootstrapped first (a refreshed value serves its
    later consumers), and inside a ReLU the intermediate before any stage and x or the
    intermediate before the product; an operation needs its inputs at >= the levels it
    consumes; costs as the latency model above. The frontier keeps the Pareto-optimal
    (seconds, levels) states, so the search is exact and small: a ResNet has at most three
    live values at a time. relu_fn: every ReLU's approximation; relu_options: {ReLU layer name:
    [approximations]} overriding it per layer, the planner taking the one of least latency
    (Step.relu says which); lut_forms: {layer name: "product" | "direct"} of the lookup-table
    layers (missing: "direct"; Step.form); switch_values: {ReLU or act layer name: the values its
    switch converts} (layout.switch_values; missing: `slots`).

    Raises ParameterError for lookup tables on a preset that cannot bootstrap, LevelError when no
    plan fits the preset's levels."""
    config = bootstrap_config(params.name)
    can_bootstrap = config is not None
    top, after = params.max_level, (config.user_levels if can_bootstrap else 0)
    # the switch's (levels in, level out, levels of a sharpening before it: a product-form ReLU's, set
    # below): LUT ReLUs (relu="lut"), "act" and "max" layers
    switch = (_lut.LUTReLU.levels_in(config), _lut.LUTReLU.level_out(config), 0) if can_bootstrap else None
    n_slots = slots or params.n // 2  # the values a switch converts where switch_values does not say
    options = {l.name: list((relu_options or {}).get(l.name, [relu_fn])) for l in layers if l.kind == "relu"}
    if switch is None:  # a choice keeps its polynomials; a LUT alone raises below
        options = {n: [f for f in fs if not isinstance(f, _lut.LUTReLU)] or fs for n, fs in options.items()}
    lut_relus = any(isinstance(f, _lut.LUTReLU) for fs in options.values() for f in fs)
    uses = [l.op for l in layers if l.kind in ("act", "max")] + (["relu='lut'"] if lut_relus else [])
    if uses and switch is None:
        raise ParameterError(f"nn.compile: {', '.join(sorted(set(uses)))} run as TFHE lookup tables, which need a "
                             f"bootstrappable preset (scheme switching reuses bootstrapping's transforms); "
                             f"{params.name!r} is not")

    def form(fn):
        """(stage depths, times_input, the switch tuple for a LUT ReLU else None) of an approximation."""
        if fn is None:
            return [], False, None
        series, prod = relu_stages(fn)
        return [d for _, d in series], prod, (switch if isinstance(fn, _lut.LUTReLU) else None)

    forms = {n: [form(f) for f in fs] for n, fs in options.items()}
    stages, product, lut = form(relu_fn)  # the default's, for the plan's summary and _too_deep
    last_use, consumers = {}, {}
    for k, l in enumerate(layers):
        for i in l.inputs:
            last_use[i] = k
            consumers[i] = consumers.get(i, 0) + 1
    kind = {l.name: l for l in layers}
    needs = {l.name: _linear_need(l, kind, consumers) for l in layers if l.kind == "linear"}

    def limbs(level):
        return len(params.limbs(level)) + len(params.special_primes)

    def diagonals(l):
        src = kind[l.inputs[0]].shape
        if l.op == "conv2d":
            return 9 * (src[0] if len(src) == 3 else 1)
        if l.op == "linear":
            return max(1, math.prod(src)) if src else 1
        return 32

    def form_of(l):
        return (lut_forms or {}).get(l.name, "direct")

    def cost(l, boots, lin, stages, product, lut):
        """Estimated seconds of layer l (input level lin) with its bootstraps (a ReLU: in its form)."""
        t = BOOTSTRAP_S * len(boots)
        if l.kind == "linear" and needs[l.name]:
            t += ALPHA * diagonals(l) * limbs(lin)
        elif l.kind == "op":
            t += BETA * l.levels * limbs(lin)
        elif l.kind == "act" or (l.kind == "relu" and lut is not None):
            t += _lut.seconds((switch_values or {}).get(l.name, n_slots)) \
                + (BETA * limbs(lin) if form_of(l) == "product" else 0.0) \
                + (BETA * lut[2] * limbs(lin) if lut is not None else 0.0)
        elif l.kind == "max":  # one switch per wave; the PBS per comparison (and its product)
            t += _lut.LUT_FIXED_S * _waves(l) + (_lut.seconds(n_slots) - _lut.LUT_FIXED_S) * l.tables
            t += BETA * limbs(lin) * l.tables if form_of(l) == "product" else 0.0
        elif l.kind == "relu":
            y = lin
            for k, d in enumerate(stages):
                if (("stage", k), "y") in boots:
                    y = after
                t += BETA * d * limbs(y)
                y -= d
            if product:
                t += BETA * limbs(max(1, y))
        return t

    # frontier: {levels of the live values (sorted (name, level) tuple): (seconds, trail)}
    # trail: (previous trail, layer name, boots, level_in, level_out) for the reconstruction
    frontier = {(): (0.0, None)}
    for k, l in enumerate(layers):
        nxt = {}
        for state, (t, trail) in frontier.items():
            lv = dict(state)
            for choice, (st, pr, lt) in enumerate(forms.get(l.name, [(stages, product, lut)])):
                if l.kind == "relu" and lt is not None and form_of(l) == "product":  # the step's sharpening first
                    extra = _lut.SHARPEN_LEVELS * options[l.name][choice].sharpen_stages(config)
                    lt = (lt[0] + extra, lt[1], extra)
                for boots, out, lin in _moves(l, lv, top, after, st, pr, needs,
                                              switch if l.kind in ("act", "max") else lt, form_of(l)):
                    if boots and not can_bootstrap:
                        continue
                    new = {n: (after if any(v == n for _, v in boots) else x) for n, x in lv.items()}
                    new[l.name] = out
                    key = tuple(sorted((n, x) for n, x in new.items() if last_use.get(n, -1) > k))
                    c = t + cost(l, boots, lin, st, pr, lt)
                    if key not in nxt or c < nxt[key][0]:
                        nxt[key] = (c, (trail, l.name, boots, lin, out, choice))
        frontier = _pareto(nxt)
        if not frontier and not can_bootstrap:
            raise LevelError(_too_deep(layers, params, stages, product, needs))
        if not frontier:
            raise LevelError(f"nn.compile: no plan fits {l.name} ({l.op}) in {after} levels after a bootstrap; "
                             "use a preset with more levels or a lower-degree ReLU (relu=<degree>)")
    seconds, trail = min(frontier.values(), key=lambda v: v[0])
    steps = []
    while trail is not None:
        trail, name, boots, lin, out, choice = trail
        l = kind[name]
        fn, (st, pr, lt) = (options[name][choice], forms[name][choice]) if l.kind == "relu" else (None, ([], False, None))
        used = sum(st) + (1 if pr else 0) if l.kind == "relu" else needs.get(name, l.levels)
        form = form_of(l) if l.kind in ("act", "max") or (l.kind == "relu" and lt is not None) else None
        if form is not None and l.kind != "max":  # the switch refreshes: a fixed level, then the product's
            used = 0 if form == "direct" else 1 + (1 if l.kind == "act" and lin == switch[1] else 0)
        elif l.kind == "max":
            used = 1 + (_waves(l) if form == "product" else 0)  # the window's slot maps (and the products)
        steps.append(Step(name, l.kind, l.op, lin, out, list(boots), used, fn, form))
    steps.reverse()
    return Plan(params.name, top, after if can_bootstrap else None, steps, stages + ([1] if product else []), seconds)


def _too_deep(layers, params, stages, product, needs) -> str:
    """The message for a model deeper than a preset that cannot bootstrap: the levels it needs
    (the deepest path: linear layers, ReLU stages and products) and the presets that have them."""

    depth = {}
    for l in layers:
        own = {"linear": needs.get(l.name, 0), "relu": sum(stages) + (1 if product else 0), "op": l.levels}
        depth[l.name] = max((depth[i] for i in l.inputs), default=0) + own.get(l.kind, 0)
    need = max(depth.values())
    deep = [f"{name} ({p.levels})" for name, p in presets().items() if not p.bootstrappable and p.levels >= need]
    bts = [name for name, p in presets().items() if p.bootstrappable]
    return (f"nn.compile: the model needs {need} levels without bootstrapping; preset {params.name!r} has "
            f"{params.max_level} and cannot bootstrap. Presets with {need} levels or more: "
            f"{', '.join(deep) or 'none'}; or a bootstrapping preset ({', '.join(bts)}), or a lower-degree ReLU "
            "(relu=<degree>)")


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


def _waves(l) -> int:
    """A max pooling's waves: ceil(log2) of its window (tables + 1 candidates)."""
    return math.ceil(math.log2(l.tables + 1)) if l.tables else 0


def lut_level(kind: str, form: str, level_in: int, level_out: int) -> int:
    """The level of a LUT ReLU's or an "act" layer's result from its input's level and the
    switch's output level: the switch's in the direct form; in the product form one below the
    lower of the two, and an "act" layer two below when they are equal (its bound ratio rides
    on the operand that drops; run.py, _times). Raises nothing."""
    if form != "product":
        return level_out
    return min(level_in, level_out) - 1 - (1 if kind == "act" and level_in == level_out else 0)


def _moves(l, lv, top, after, stages, product, needs, lut=None, form="direct"):
    """[(boots, output level, input level)] of layer l from the live levels lv; boots: the
    (point, value) bootstraps it takes ("in": before the layer; ("stage", k) / "product":
    inside a ReLU, "y" the intermediate). lut: (levels in, level out, sharpening levels) of
    a LUT ReLU or an "act" layer (a lookup table through the switch; levels in counts the
    sharpening's); form: its form ("direct", "product")."""
    if l.kind == "input":
        return [((), top, top)]
    if l.kind in ("add", "op"):  # an op needs all its inputs at >= its depth
        out = []
        for pick in _subsets(l.inputs):
            levels = [after if i in pick else lv[i] for i in l.inputs]
            if min(levels) >= l.levels:
                out.append((tuple(("in", i) for i in pick), min(levels) - l.levels, min(levels)))
        return out
    src = l.inputs[0]
    if l.kind == "max":  # the maps' level, then the switch per wave; the bases are not refreshed
        need, level_out = lut[0], lut[1]
        w = _waves(l) if form == "product" else 1  # a product wave's differences one level lower each
        out = []
        for boots, x in (((), lv[src]), (((("in", src),)), after)):
            if min(x - 1, level_out) - (w - 1) >= need:
                out.append((boots, _maxpool.output_level(x, level_out, _waves(l), form), x))
        return out
    if l.kind == "linear":
        need = needs[l.name]
        if need == 0:  # nothing to refresh: a merged or free layer keeps its source's level
            return [((), lv[src], lv[src])]
        out = [((), lv[src] - 1, lv[src])] if lv[src] >= 1 else []
        return out + [((("in", src),), after - 1, after)]
    if lut is not None:  # a LUT ReLU or act: its input at >= the switch's levels (bootstrapped first if not)
        need, level_out = lut[0], lut[1]
        return [(boots, lut_level(l.kind, form, x, level_out), x)
                for boots, x in (((), lv[src]), (((("in", src),)), after)) if x >= need]
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
