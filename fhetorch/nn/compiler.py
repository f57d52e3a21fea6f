"""`fhetorch.nn.compile`: a trained model, calibrated, approximated and planned for CKKS.

    cm = fhe.nn.compile(model, calibration_inputs, preset="n16-bts40")
    print(cm.plan)          # layers, levels, where it bootstraps
    cm.plaintext(x)         # the original float model
    cm.simulate(x)          # float64 with the polynomial ReLUs and the planned value ranges

Value ranges. Every encrypted value v is carried as v / B, B a bound from calibration (the
largest |v| seen on the calibration inputs times `margin`), so every ciphertext holds values
in [-1, 1]: the polynomial ReLU's interval, and the range bootstrapping accepts anywhere.
Values joined by an addition or passing through a ReLU share one bound (a "range class"), so
those operations need no constant; the factors B_in / B_out are folded into the weights of
the linear layers between classes. Simulation reports every value that leaves its bound: the
encrypted run would be wrong there (the polynomial diverges, bootstrapping wraps around).

ReLU is x (1 + sign(x)) / 2 with the composite minimax sign of Lee et al. 2022 (degrees
{15, 15, 27} by default: max error 2^-13 on [-1, 1] in the scaled domain), or a single
Chebyshev interpolant of ReLU of a given degree (`relu=` an int; cheaper, less precise), or
any polynomial on [-1, 1] given as a ChebyshevFunction or Composite.
"""
from __future__ import annotations

import copy
import math
import warnings
from dataclasses import dataclass

import torch
import torch.fx as fx
import torch.nn as nn

from ..circuits.bootstrap import key_levels, rotation_levels
from ..circuits.presets import bootstrap_config, preset as _preset
from ..circuits.switching import switch_config
from .._ckks.context import galois_element
from .._rlwe import switching_key_bytes
from ..tensor import Context
from ..tensor.functions import ChebyshevFunction, Composite, chebyshev, relu as composite_relu
from ..errors import (ApproximationError, EncodingError, MissingKeyError, ParameterError, ShapeError,
                      UnsupportedLayerError)
from .graph import Layer, activation_function, lower
from .layout import layer_module, model_layouts, model_switch_values
from .lut import FACTOR_INTERVAL, FORMS, PRODUCT_OPS, LUTReLU, factor, seconds as lut_seconds, sharpen
from .argmax import check_classes, simulate_argmax
from .maxpool import comparisons, max_pool_args, simulate_max, windows
from .plan import Plan, make_plan
from .run import Program


class _BoundedSim(nn.Module):
    """x -> bound * apply(x / bound) in float64, counting inputs outside [-bound, bound] (the
    encrypted run would be wrong there): the simulation form of a nonlinear layer."""

    def __init__(self, bound: float, name: str):
        super().__init__()
        self.bound, self.name = float(bound), name
        self.outside = 0
        self.worst = 0.0

    def forward(self, x):
        y = x.to(torch.float64) / self.bound
        over = y.abs() > 1
        if bool(over.any()):
            self.outside += int(over.sum())
            self.worst = max(self.worst, float(y.abs().max()))
        return self.apply_scaled(y)


class PolyReLU(_BoundedSim):
    """x -> bound * relu_approx(x / bound)."""

    def __init__(self, fn, bound: float, name: str):
        super().__init__(bound, name)
        self.fn = fn

    def apply_scaled(self, y):
        return self.fn.plain(y.clamp(-1.5, 1.5)) * self.bound


class LUTActSim(_BoundedSim):
    """What an "act" layer's lookup table computes: x -> fn(p B_in), p the grid point nearest
    x / B_in (the direct form), or x -> x g(p B_in) with g = fn / x the factor (lut.factor; the
    product form, p on the factor's grid)."""

    def __init__(self, fn, bits: int, bound: float, name: str, form: str = "direct"):
        super().__init__(bound, name)
        self.fn, self.bits, self.form = fn, bits, form
        self.g = factor(fn) if form == "product" else None

    def apply_scaled(self, y):
        if self.form == "product":
            return y * self.bound * self.g(LUTReLU.quantise(y, self.bits, FACTOR_INTERVAL) * self.bound)
        return self.fn(LUTReLU.quantise(y, self.bits) * self.bound)


class MaxPoolSim(_BoundedSim):
    """Max pooling as the encrypted tournament computes it (maxpool.py): on x / B, each comparison's
    (a - b) / 2 quantised to the ReLU grid; those outside [-1, 1] count as out of range too."""

    def __init__(self, idx: torch.Tensor, bits: int, bound: float, name: str, form: str = "direct"):
        super().__init__(bound, name)
        self.idx, self.bits, self.form = idx, bits, form

    def _check(self, d):
        over = d.abs() > 1
        if bool(over.any()):
            self.outside += int(over.sum())
            self.worst = max(self.worst, float(d.abs().max()))

    def apply_scaled(self, y):
        return simulate_max(y, self.idx, self.bits, self._check, self.form) * self.bound


class LUTReLUSim(_BoundedSim):
    """What relu="lut" computes: x -> bound * relu(grid point nearest x / bound) (the direct form),
    or x -> x [p > 0], p the factor grid's point nearest sharpen(x / bound) (the product form: relu
    itself, 0 never being a point of that grid; sharpen keeps the sign, lut.py)."""

    def __init__(self, bits: int, bound: float, name: str, form: str = "direct", sharpen_stages: int = 0):
        super().__init__(bound, name)
        self.bits, self.form, self.stages = bits, form, sharpen_stages

    def apply_scaled(self, y):
        if self.form == "product":
            return y * self.bound * _STEP(LUTReLU.quantise(sharpen(y, self.stages), self.bits, FACTOR_INTERVAL))
        return torch.relu(LUTReLU.quantise(y, self.bits)) * self.bound


_STEP = factor(torch.relu)  # [x > 0] (1/2 at 0)


@dataclass
class RangeReport:
    """Values outside their planned bound in one simulate() call: {value name: (count, worst |v| / B)}."""

    outside: dict

    @property
    def ok(self) -> bool:
        return not self.outside

    def __str__(self):
        if self.ok:
            return "all values inside their planned ranges"
        items = ", ".join(f"{k}: {c} values, up to {w:.2f} x its bound" for k, (c, w) in self.outside.items())
        return (f"values outside their planned ranges ({items}): the encrypted run would be wrong there; "
                "compile with more representative calibration inputs or a larger margin")


class CompiledModel:
    """A model prepared for encrypted inference (see the module docstring)."""

    def __init__(self, model, gm: fx.GraphModule, layers: list, bounds: dict, relu_fn, plan: Plan, params,
                 device=None, *, peaks: dict | None = None, margin: float = 1.25, argmax: bool = False):
        self.model = model.eval()
        self.device = device
        self.ctx = None
        self._program = None
        self.graph_module = gm
        self.layers = layers
        self.bounds = bounds  # value name -> B
        self.peaks = peaks if peaks is not None else dict(bounds)  # value name -> largest |v| of its range class
        self.margin = margin
        self.relu_fn = relu_fn  # the default ReLU approximation
        # each ReLU's (the plan's choice where compile(relu=...) gave several)
        self.relu_fns = {s.name: s.relu for s in plan.steps if s.kind == "relu"}
        # each lookup-table layer's form, "product" or "direct" (compile(lut_form=...); lut.py)
        self.lut_forms = {s.name: s.form for s in plan.steps if s.form is not None}
        self.argmax = argmax  # the output is the class (argmax.py's head), not the logits
        # the switch's grid and TFHE set, for LUT ReLUs and "act" layers (GELU, SiLU, ...)
        luts = {f for f in [relu_fn, *self.relu_fns.values()] if isinstance(f, LUTReLU)}
        if len(luts) > 1:
            raise ApproximationError(f"nn.compile: LUT ReLUs with different grids or TFHE sets ({sorted(map(str, luts))}); "
                                     "a model has one switch: give every LUT ReLU the same LUTReLU(bits, tfhe)")
        self.lut = luts.pop() if luts else LUTReLU()
        # the grid, once (a grid too fine for the TFHE set fails here, at compile)
        self.lut_bits = self.lut.grid_bits(params.name) if self.uses_lut else None
        # the product form's sharpening stages before a ReLU's step (lut.py)
        self.lut_sharpen = self.lut.sharpen_stages(bootstrap_config(params.name)) if self.uses_lut else 0
        self.plan = plan
        self.params = params
        if argmax:
            out = layers[-1]
            if len(out.shape) != 1:
                raise UnsupportedLayerError(f"nn.compile(argmax=True): the model's output {out.name} has shape "
                                            f"{tuple(out.shape)}; the head takes a vector of logits (flatten first)")
            check_classes(out.shape[0], self.lut_bits)
        self._sim, self._polys = self._simulation_module()
        self.last_ranges: RangeReport | None = None

    @property
    def uses_lut(self) -> bool:
        """Whether the model runs TFHE lookup tables (relu="lut", or GELU / SiLU / ... layers)."""
        return self.argmax or any(isinstance(f, LUTReLU) for f in self.relu_fns.values()) \
            or any(l.kind in ("act", "max") for l in self.layers)

    @property
    def lut_layers(self) -> list:
        """The layers that run lookup tables: "act" and "max" layers and the ReLUs by LUT, in order."""
        return [l for l in self.layers if l.kind in ("act", "max")
                or (l.kind == "relu" and isinstance(self.relu_for(l.name), LUTReLU))]

    @property
    def switch_values(self) -> dict:
        """{ReLU or act layer name: the values its switch converts}: one period of its input's layout
        (layout.switch_values), whether or not the layer runs a lookup table. Raises nothing."""
        layouts, n = model_layouts(self.layers, dict(self.graph_module.named_modules()), self.params.n // 2)
        return model_switch_values(self.layers, layouts, n)

    def lut_form(self, name: str) -> str | None:
        """Lookup-table layer `name`'s form ("product" or "direct"); None for a layer without a
        LUT. Raises nothing."""
        return self.lut_forms.get(name)

    def relu_for(self, name: str):
        """The approximation ReLU layer `name` runs (a polynomial, or a LUTReLU); the default for
        other names. Raises nothing."""
        return self.relu_fns.get(name, self.relu_fn)

    # --- modes -------------------------------------------------------------------------------
    def plaintext(self, x: torch.Tensor) -> torch.Tensor:
        """The original model (float32). Raises nothing of its own (what the model raises, it raises)."""
        with torch.no_grad():
            return self.model(x)

    def simulate(self, x: torch.Tensor) -> torch.Tensor:
        """float64 with the encrypted run's approximations; values outside their bounds are listed
        in `cm.last_ranges` (a RangeReport: check `cm.last_ranges.ok`).

        Raises what the model raises on an input of another shape (torch's RuntimeError)."""
        for p in self._polys:
            p.outside, p.worst = 0, 0.0
        outside = {}
        with torch.no_grad():
            out = _RangeInterpreter(self._sim, self.bounds, outside).run(x.to(torch.float64))
        for p in self._polys:
            if p.outside:
                outside[p.name] = (p.outside, p.worst)
        self.last_ranges = RangeReport(outside)
        if self.argmax:
            return simulate_argmax(out.reshape(out.shape[0], -1) / self.bounds[self.layers[-1].name], self.lut_bits)
        return out

    # --- encrypted mode -------------------------------------------------------------------------
    def keygen(self, context=None):
        """Make (or take) the client context and generate every key the plan needs: the rotations
        of its linear transforms and, if it bootstraps, the bootstrapping keys for its slot count.
        Returns the context.

        Raises ContextError for a public context (no secret key) given as `context`."""

        if context is None:
            with warnings.catch_warnings():
                if self.params.name.startswith("toy-"):
                    warnings.simplefilter("ignore")  # compile() already warned about the toy preset
                context = Context(self.params.name, self.device or "cpu")
        self.ctx = context
        self._program = None  # its transforms belong to the context
        prog = self.program()
        slots = self._bootstrap_slots(context)
        kw = dict(bootstrap=True, bootstrap_slots=slots) if slots else {}
        if self.uses_lut:
            kw = dict(lut=self.lut.lut, bootstrap_slots=slots)
        uses = prog.rotations()
        top = [r for r, lvl in uses.items() if lvl >= self.params.max_level]
        low = {r: lvl for r, lvl in uses.items() if lvl < self.params.max_level}
        context.keygen(rotations=sorted(top), power_of_two_rotations=False, low_level_rotations=low, **kw)
        return context

    def use_context(self, context):
        """Run this model under `context`'s keys without making any: a server's public context
        (fhe.load of the client's saved ctx.public(), fhetorch.distributed.share_context) or
        another client's. Checks first that it holds every key the plan uses: each rotation at the
        level it runs at, bootstrapping's for the model's slot count where it bootstraps, the
        switching keys where it runs lookup tables. Returns the context.

        Raises ParameterError for a context of another preset, MissingKeyError naming the first
        key it lacks (the client makes them with cm.keygen())."""
        if context.params != self.params:
            raise ParameterError(f"CompiledModel.use_context: the model is compiled for {self.params.name}, the "
                                 f"context is {context.params.name}")
        self.ctx, self._program = context, None  # the program's transforms belong to the context
        missing = self._missing_key(context)
        if missing:
            self.ctx, self._program = None, None
            raise MissingKeyError(f"CompiledModel.use_context: the context lacks {missing}; the client makes every "
                                  "key the model needs with cm.keygen() before saving ctx.public()")
        return context

    def _bootstrap_slots(self, context) -> list:
        """The slot counts whose bootstrapping keys the plan uses ([] without bootstraps): the
        model's packing, and the full one too where lookup tables switch over it."""
        prog = self.program()
        if self.uses_lut:
            return sorted({prog.slots, context.slots})
        return [prog.slots] if self.plan.bootstraps else []

    def _missing_key(self, context) -> str | None:
        """The first key of the plan that `context` lacks (described), or None."""
        need = dict(self.program().rotations())
        slots = self._bootstrap_slots(context)
        if slots:
            if context.encapsulation_keys is None:
                return "bootstrapping keys"
            for step, lvl in key_levels(self.params, context.bootstrap_config, slots).items():
                need[step] = max(need.get(step, 0), lvl)
        if self.uses_lut and context.switch_keys is None:
            return "the switching keys of its lookup tables"
        for step, lvl in sorted(need.items()):  # a step's key serves every level up to its highest use
            g = galois_element(step, context.n)
            low = next((l for l in range(lvl, -1, -1) if not context.has_galois_key(g, l)), None)
            if low is not None:
                return f"the rotation key for step {step} at level {low}"
        return None

    def report(self) -> str:
        """The plan, then what running it takes: the linear transforms (diagonals), the rotation
        keys and their memory (each at the levels it is used at), the bootstrapping keys, the
        estimated key memory, and the expected latency on the H100 (plan.py's model). Needs no
        keys; after cm.keygen() it adds the memory of the keys generated.

        Raises nothing."""

        prog, p = self.program(), self.params
        names = [n for n, (_, _, m) in prog.chains.items() if m is not None]
        diags = {n: len(prog.offsets(n)) for n in names}
        total = sum(diags.values())
        rots = prog.rotations()
        k, alpha = len(p.special_primes), p.alpha

        def key(level):
            return switching_key_bytes(p.n, p.key_limbs(min(level, p.max_level)).stop, k, alpha)

        rot_bytes = sum(key(lvl) for lvl in rots.values())
        full = 2 * key(p.max_level)  # relinearisation and conjugation
        big = max(diags, key=diags.get) if diags else None
        rows = [str(self.plan),
                f"linear transforms: {len(names)}, {total} diagonals in all (encoded at every call; largest: "
                f"{big} with {diags.get(big, 0)}); slots {prog.slots}",
                f"rotation keys: {len(rots)} steps, {rot_bytes / 2**30:.2f} GiB at their levels; relinearisation and "
                f"conjugation {full / 2**30:.2f} GiB"]
        if self.plan.bootstraps:

            sparse = 2 * prog.slots <= p.n // 2
            both = dict(rots)
            for r, lvl in rotation_levels(p, bootstrap_config(p.name), prog.slots).items():  # a shared step keeps the higher level
                both[r] = max(both.get(r, 0), lvl)
            bts_bytes = sum(key(lvl) for lvl in both.values()) - rot_bytes + key(p.max_level)  # + encapsulation
            rows.append(f"bootstrapping: {self.plan.bootstraps} of {prog.slots} slots "
                        f"({'sparse, one EvalMod' if sparse else 'full'}); its keys {bts_bytes / 2**30:.2f} GiB more "
                        f"({len(both) - len(rots)} more rotation steps, shared ones at their higher level)")
            rot_bytes += bts_bytes
        luts = self.lut_layers
        if luts:
            cfg = switch_config(p.name, self.lut.lut)
            ops = ", ".join(f"{op} x{sum(1 for l in luts if l.op == op)}" for op in sorted({l.op for l in luts}))
            tables = sum(comparisons(l, layer_module(l, prog.modules)) if l.kind == "max" else 1 for l in luts)
            # a max pooling's tables convert all slots; the others one period of their input's layout
            values = [(comparisons(l, layer_module(l, prog.modules)), prog.slots) if l.kind == "max"
                      else (1, prog.switch_values[l.name]) for l in luts]
            product = [l.name for l in luts if self.lut_form(l.name) == "product"]
            sharp = any(l.kind == "relu" for l in luts if l.name in product) and self.lut_sharpen
            forms = (f"{len(product)} in the product form (x times a factor by LUT, one CKKS product more"
                     + (f"; a ReLU's step of sharpen(x), {self.lut_sharpen} stage(s)" if sharp else "")
                     + f"), {len(luts) - len(product)} direct")
            rows.append(f"lookup tables (CKKS <-> TFHE switching, {cfg.tfhe}, {self.lut_bits}-bit grid): "
                        f"{len(luts)} layers ({ops}; {forms}), {tables} tables of one PBS per value (a max pooling: "
                        f"one per comparison and slot): {sum(k * m for k, m in values)} PBS per input, "
                        f"~{sum(k * lut_seconds(m) for k, m in values):.1f} s on an H100")
        if self.argmax:
            k = self.layers[-1].shape[0]
            rows.append(f"argmax head: {k * (k - 1) // 2} comparisons and {k} win tests, two switches of {prog.slots} "
                        f"slots; the output is the class (-1 where the top logits tie within a grid step)")
        rows.append(f"key memory (estimated): {(rot_bytes + full) / 2**30:.2f} GiB")
        rows.append(f"expected latency on an H100 (graph-replayed): ~{self.plan.estimated_s:.2f} s (plan.py's model: "
                    f"{self.plan.bootstraps} bootstraps, the layers by their diagonals and levels)")
        if self.ctx is not None and self.ctx.secret_key is not None:
            rows.append(f"keys generated: {self.ctx.key_bytes() / 2**30:.2f} GiB")
        if self.ctx is not None:
            rows.append(str(self.ctx.memory_report()))
        return "\n".join(rows)

    def program(self):
        """The encrypted program (layouts, slot maps, their linear transforms), built once.

        Raises UnsupportedLayerError for a layer without an encrypted form."""
        if self._program is None:

            self._program = Program(self)
        return self._program

    def encrypt(self, x: torch.Tensor):
        """One input (the model's input shape, with or without a batch dimension of 1), packed in
        the plan's input layout, divided by its bound, encrypted at the top level.

        Raises MissingKeyError before cm.keygen(), ShapeError for another input shape or a batch
        of several, EncodingError for NaN/inf or values beyond the calibrated bound."""
        return self.program().encrypt(self._need_ctx("encrypt"), x)

    def __call__(self, ex, *, progress: bool = False, timing: bool = False, graph: bool | None = None):
        """The encrypted forward pass (bootstrapping where the plan says); progress: a tqdm bar
        over the layers; timing: seconds per layer kind in cm.program().times, and of the switches'
        phases ("to_lwe", "pbs", "to_ckks") in cm.program().switch_times (synchronises);
        graph: on CUDA, capture the whole pass in one CUDA graph at the first call and replay it
        (default unless progress or timing; the first call runs it three times).

        Raises MissingKeyError before cm.keygen(), LayoutError for an input not made by
        cm.encrypt, ContextError for one encrypted under other keys."""
        return self.program().run(self._need_ctx("run"), ex, progress=progress, timing=timing, graph=graph)

    def decrypt(self, ey) -> torch.Tensor:
        """float64 output (batch dimension of 1) of an encrypted forward pass.

        Raises MissingKeyError before cm.keygen(), LayoutError for anything but this model's
        output, ContextError for one encrypted under other keys."""
        return self.program().decrypt(self._need_ctx("decrypt"), ey)

    def _need_ctx(self, what):
        if self.ctx is None:
            raise MissingKeyError(f"CompiledModel.{what}: no keys yet; call cm.keygen() first")
        return self.ctx

    # --- internals ---------------------------------------------------------------------------
    def _simulation_module(self):
        gm = copy.deepcopy(self.graph_module).to(torch.float64)  # copy first: .to() converts modules in place
        polys = []
        modules = dict(self.graph_module.named_modules())
        for layer in self.layers:
            if layer.kind not in ("relu", "act", "max"):
                continue
            node = next(n for n in gm.graph.nodes if n.name == layer.name)
            if layer.kind == "max":
                k, st, pad, dil = max_pool_args(layer, layer_module(layer, modules))
                src = next(l for l in self.layers if l.name == layer.inputs[0])
                mod = MaxPoolSim(windows(src.shape, layer.shape, k, st, pad, dil), self.lut_bits,
                                 self.bounds[layer.inputs[0]], layer.name, self.lut_form(layer.name))
            elif layer.kind == "act":
                mod = LUTActSim(activation_function(layer, modules), self.lut_bits,
                                self.bounds[layer.inputs[0]], layer.name, self.lut_form(layer.name))
            elif isinstance(self.relu_for(layer.name), LUTReLU):
                mod = LUTReLUSim(self.lut_bits, self.bounds[layer.inputs[0]], layer.name, self.lut_form(layer.name),
                                 self.lut_sharpen)
            else:
                mod = PolyReLU(self.relu_for(layer.name), self.bounds[layer.inputs[0]], layer.name)
            target = f"_fhe_relu_{len(polys)}"
            gm.add_submodule(target, mod)
            polys.append(mod)
            with gm.graph.inserting_after(node):
                new = gm.graph.call_module(target, (node.args[0],))
            node.replace_all_uses_with(new)
            gm.graph.erase_node(node)
        gm.recompile()
        return gm, polys


class _RangeInterpreter(fx.Interpreter):
    """Runs a graph and records, per value with a bound, how many entries exceed it and by how much."""

    def __init__(self, gm, bounds, outside):
        super().__init__(gm)
        self.bounds, self.outside = bounds, outside

    def run_node(self, n):
        out = super().run_node(n)
        b = self.bounds.get(n.name)
        if b is not None and isinstance(out, torch.Tensor) and out.is_floating_point():
            r = out.abs() / b
            over = r > 1
            if bool(over.any()):
                self.outside[n.name] = (int(over.sum()), float(r.max()))
        return out


def _range_classes(layers: list) -> dict:
    """Union-find: value name -> class representative (ReLU in/out, addition in/out, free maps)."""
    parent = {}

    def find(a):
        parent.setdefault(a, a)
        while parent[a] != a:
            parent[a] = parent[parent[a]]
            a = parent[a]
        return a

    def union(a, b):
        parent[find(a)] = find(b)

    for l in layers:
        find(l.name)
        if l.kind in ("relu", "add", "max") or l.op in ("identity", "flatten"):
            for i in l.inputs:
                union(i, l.name)
    return {l.name: find(l.name) for l in layers}


def _calibrate(gm: fx.GraphModule, layers: list, inputs: torch.Tensor) -> dict:
    """max |value| per layer output over the calibration inputs (float64)."""
    peak = {}

    class Probe(fx.Interpreter):
        def run_node(self, n):
            out = super().run_node(n)
            if isinstance(out, torch.Tensor) and out.is_floating_point():
                m = float(out.abs().max()) if out.numel() else 0.0
                if not math.isfinite(m):  # max() would drop a NaN, and an inf has no bound
                    raise EncodingError(f"nn.compile: layer {n.name!r} gives NaN or inf on the calibration inputs "
                                        "(finite inputs): check the model's weights")
                peak[n.name] = max(peak.get(n.name, 0.0), m)
            return out

    g64 = copy.deepcopy(gm).to(torch.float64)
    with torch.no_grad():
        Probe(g64).run(inputs.to(torch.float64))
    return {l.name: peak.get(l.name, 0.0) for l in layers}


def relu_options(relu, layers: list) -> tuple:
    """(default approximation, {ReLU layer name: [approximations]} or None) of compile's relu=:
    one option for every ReLU; "auto": per ReLU, the composite polynomial or a lookup table,
    whichever the planner finds faster; or a dict {layer: option} (the fx node name, or the
    module path of an nn.ReLU: "layer1.0.relu"; "default": the others' option, else
    "composite"), whose values may be "auto" too.

    Raises ApproximationError for an unknown option or a name that is no ReLU layer."""
    def choices(opt):
        return [composite_relu(), LUTReLU()] if isinstance(opt, str) and opt == "auto" else [relu_approximation(opt)]

    if not isinstance(relu, dict):
        if isinstance(relu, str) and relu == "auto":
            return choices("composite")[0], {l.name: choices("auto") for l in layers if l.kind == "relu"}
        return relu_approximation(relu), None
    relus = [l for l in layers if l.kind == "relu"]
    names = {l.name for l in relus} | {l.node.target for l in relus if l.node is not None and l.node.op == "call_module"}
    unknown = sorted(str(k) for k in relu if k != "default" and k not in names)
    if unknown:
        raise ApproximationError(f"nn.compile: relu={{...}} names {unknown}, which are no ReLU layers of the model; "
                                 f"its ReLUs: {sorted(names)}")
    default = relu.get("default", "composite")
    out = {}
    for l in relus:
        target = l.node.target if l.node is not None and l.node.op == "call_module" else None
        out[l.name] = choices(relu.get(l.name, relu.get(target, default)))
    first = choices(default)[0]
    return first, out


def lut_forms(lut_form, layers: list) -> dict:
    """{layer name: "product" | "direct"} for every layer that may run a lookup table (ReLU, "act",
    "max") from compile's lut_form=: "product" (the product form where the op has one: ReLU,
    GELU, SiLU, Hardswish, max pooling; lut.py; the direct form for Sigmoid and Tanh), "direct",
    or a dict {layer: form} (the fx node name, or a module path: "act"; "default": the others'
    form, else "product").

    Raises ApproximationError for an unknown form, a name that is no lookup-table layer, or
    "product" asked by name of a layer without a product form (Sigmoid, Tanh)."""
    luts = [l for l in layers if l.kind in ("relu", "act", "max")]
    targets = {l.name: l.node.target for l in luts if l.node is not None and l.node.op == "call_module"}
    per = lut_form if isinstance(lut_form, dict) else {"default": lut_form}
    for k, v in per.items():
        if not (isinstance(v, str) and v in FORMS):
            raise ApproximationError(f"nn.compile: lut_form{'' if k == 'default' else f'[{k!r}]'} must be one of "
                                     f"{FORMS}, got {v!r}")
    unknown = sorted(str(k) for k in per if k != "default" and k not in {*targets.values(), *(l.name for l in luts)})
    if unknown:
        raise ApproximationError(f"nn.compile: lut_form={{...}} names {unknown}, which are no lookup-table layers "
                                 f"(ReLU, activation, max pooling) of the model; its: "
                                 f"{sorted({l.name for l in luts} | set(targets.values()))}")
    out = {}
    for l in luts:
        named = per.get(l.name, per.get(targets.get(l.name)))
        form = named if named is not None else per.get("default", "product")
        has = l.kind == "max" or l.op in PRODUCT_OPS
        if named == "product" and not has:
            raise ApproximationError(f"nn.compile: lut_form: {l.name} ({l.op}) has no product form (fn(x) = x g(x) with "
                                     f"g in [0, 1]: {', '.join(PRODUCT_OPS)}, max pooling); use 'direct'")
        out[l.name] = form if has else "direct"
    return out


def relu_approximation(relu="composite"):
    """The ReLU the compiled model computes: "lut" (or a LUTReLU: through TFHE lookup tables,
    exact on a grid; fhetorch/nn/lut.py), else a polynomial on [-1, 1] (below).

    Raises ApproximationError for an unknown option."""
    if isinstance(relu, str) and relu == "lut":
        return LUTReLU()
    if isinstance(relu, LUTReLU):
        return relu
    return _polynomial_relu(relu)



def _polynomial_relu(relu):
    """The HEFunction used for ReLU on [-1, 1]: "composite" (Lee et al. 2022, {15, 15, 27}), a tuple of
    odd degrees for another composite, an int degree for one Chebyshev interpolant, or a
    ChebyshevFunction / Composite on [-1, 1] itself (e.g. a least-squares fit made with
    fhetorch.ckks.polynomial.fit_least_squares and from_coefficients).

    Raises ApproximationError for anything else (even degrees in the tuple, another interval)."""
    if isinstance(relu, (ChebyshevFunction, Composite)):
        interval = tuple(relu.stages[0].interval if isinstance(relu, Composite) else relu.interval)
        if interval != (-1.0, 1.0):
            raise ApproximationError(f"nn.compile: a ReLU approximation must take [-1, 1] (values are scaled "
                                     f"into it), got {interval}")
        return relu
    if isinstance(relu, str) and relu == "composite":
        return composite_relu()
    if isinstance(relu, (tuple, list)):
        return composite_relu(tuple(relu))
    if isinstance(relu, int):
        return chebyshev(torch.relu, (-1.0, 1.0), relu)
    raise ApproximationError(f"nn.compile: relu must be 'composite', 'lut', a tuple of odd degrees, an int degree or a "
                             f"ChebyshevFunction / Composite on [-1, 1], got {relu!r}")


def compile(model: nn.Module, calibration_inputs: torch.Tensor, *, preset: str = "n16-bts40", device=None,
            relu="composite", margin: float = 1.25, argmax: bool = False, lut_form="product") -> CompiledModel:
    """Trace, fold batch norm, calibrate value ranges, approximate ReLU and plan levels and
    bootstraps for `preset` (see the module docstring). calibration_inputs: a batch like the
    data the model will see (e.g. a few hundred training images). relu: "composite" (default),
    "lut", a polynomial option (relu_approximation), "auto" (per ReLU, polynomial or lookup
    table by the planner's latency model), or per layer {"layer1.0.relu": "lut", "default":
    ...} (relu_options). argmax: the encrypted output
    is the class, not the logits (nn/argmax.py: lookup tables; bootstrappable presets):
    cm.decrypt gives a (1,) int64 tensor, -1 where the top logits tie within a grid step, and
    cm.simulate the classes the same way. lut_form: how lookup-table layers compute (lut.py,
    lut_forms): "product" (default: x times a factor by LUT where fn(x) = x g(x), one level more,
    x's precision kept), "direct" (fn by LUT), or per layer {"act": "direct", "default": ...}.

    Raises UnsupportedLayerError for a layer without an encrypted form (naming it and what to
    use instead), ShapeError for calibration inputs that are not a batch the model takes,
    EncodingError for NaN/inf in them, ApproximationError for a margin below 1, an unknown
    relu option or lut_form, LevelError when no plan fits the preset's levels, ParameterError for an unknown
    preset."""
    if not isinstance(calibration_inputs, torch.Tensor) or calibration_inputs.dim() < 2 \
            or calibration_inputs.shape[0] == 0:
        raise ShapeError("nn.compile: calibration_inputs must be a batch tensor (n, ...) of representative inputs")
    if margin < 1:
        raise ApproximationError(f"nn.compile: margin must be >= 1 (a bound below the largest calibrated value), "
                                 f"got {margin}")
    bad = int((~torch.isfinite(calibration_inputs)).sum())
    if bad:
        raise EncodingError(f"nn.compile: calibration_inputs hold {bad} NaN or inf values; the value ranges are "
                            "calibrated from them: give finite inputs")
    params = _preset(preset)
    gm, layers = lower(model, calibration_inputs[:2])
    layouts, slots = model_layouts(layers, dict(gm.named_modules()), params.n // 2)  # what the encrypted run cannot do, now
    peak = _calibrate(gm, layers, calibration_inputs)
    cls = _range_classes(layers)
    class_peak = {}
    for name, rep in cls.items():
        class_peak[rep] = max(class_peak.get(rep, 0.0), peak[name])
    peaks = {name: class_peak[rep] for name, rep in cls.items()}
    bounds = {name: _round_bound(p * margin) for name, p in peaks.items()}
    fn, per_layer = relu_options(relu, layers)
    forms = lut_forms(lut_form, layers)
    values = model_switch_values(layers, layouts, slots)
    plan = make_plan(layers, params, fn, slots, per_layer, forms, values)  # refuses lookup tables on a preset that cannot bootstrap
    if argmax and bootstrap_config(params.name) is None:
        raise ParameterError(f"nn.compile(argmax=True): the argmax head runs lookup tables, which need a "
                             f"bootstrappable preset; {params.name!r} is not")
    return CompiledModel(model, gm, layers, bounds, fn, plan, params, device, peaks=peaks, margin=margin,
                         argmax=argmax)


def _round_bound(b: float) -> float:
    """Bounds rounded up to 2 significant bits (stable under small calibration changes)."""
    if b <= 0:
        return 1.0
    e = math.floor(math.log2(b))
    return math.ceil(b / 2.0 ** (e - 1)) * 2.0 ** (e - 1)


__all__ = ["CompiledModel", "LUTActSim", "LUTReLUSim", "Layer", "PolyReLU", "RangeReport", "compile", "lut_forms",
           "relu_approximation", "relu_options"]
