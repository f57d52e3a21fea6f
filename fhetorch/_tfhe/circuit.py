"""LUT circuits in waves (ArctyrEX: a DAG of bootstraps levelized into waves of batched PBS).

`circuit(fn)` traces fn over stand-ins of its LWETensor arguments (TracedLWE): each operation
on a stand-in runs the LWETensor operation itself on meta tensors (so the degree and noise-level
rules, and their MessageOverflowError, are the LWETensor's own and fire at trace time) and
records it as a node of a DAG; a LUT applied to a stand-in is a PBS node. A PBS node's wave is
one more than the latest wave its input depends on (ASAP levelization: a wave holds every PBS
whose inputs are ready). A run executes, for w = 0, 1, ...: the linear nodes depending on waves up to w, then
every PBS of wave w + 1 as ONE Context.apply_lut call over all their ciphertexts (a
per-ciphertext LUT index picks each node's function), whatever the functions.

A traced plan is specialised to its inputs' shapes, degrees and noise levels and to the
constants among the arguments (like torch.jit.trace), and cached per signature. Inside another
circuit a circuit is inlined (its nodes join the outer DAG and its waves).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import torch

from ..errors import ContextError, MessageOverflowError, UnsupportedOperationError
from .lut import LUT
from .lwe_tensor import LWETensor

# LWETensor methods a stand-in records (the linear and shape operations)
_RECORDED = ("add", "sub", "mul", "neg", "__add__", "__radd__", "__sub__", "__rsub__", "__mul__", "__rmul__",
             "__neg__", "__getitem__", "reshape", "view", "flatten", "unsqueeze", "squeeze", "transpose", "permute",
             "sum")


@dataclass
class _Node:
    kind: str  # "input", "call" (a linear or shape operation) or "lut" (a PBS)
    target: object  # call: method name or torch function; lut: the LUT over the whole message space
    args: tuple  # call: arguments with _Ref in place of traced values; lut: (input node,)
    kwargs: dict
    wave: int  # a PBS: the wave it runs in; else the latest wave it depends on (0: none)
    meta: LWETensor  # the value's shape, degree and noise level, data on the meta device


@dataclass(frozen=True)
class _Ref:
    node: int


class TracedLWE:
    """Stands for an LWETensor while a circuit is traced: shape, degree and noise_level as the
    real value's; operations are recorded. `context` is the trace, so `lut(x)` records a PBS."""

    def __init__(self, trace: "_Trace", node: int):
        self.context = trace
        self.node = node

    @property
    def meta(self) -> LWETensor:
        return self.context.nodes[self.node].meta

    shape = property(lambda self: self.meta.shape)
    ndim = property(lambda self: self.meta.ndim)
    degree = property(lambda self: self.meta.degree)
    noise_level = property(lambda self: self.meta.noise_level)

    def numel(self) -> int:
        return self.meta.numel()

    def dim(self) -> int:
        return self.meta.ndim

    def size(self, dim: int | None = None):
        return self.meta.size(dim)

    def __len__(self) -> int:
        return len(self.meta)

    def __repr__(self) -> str:
        return f"TracedLWE(node={self.node}, shape={tuple(self.shape)}, degree={self.degree}, " \
               f"noise_level={self.noise_level})"

    def __bool__(self):
        raise UnsupportedOperationError("circuit: the truth value of an encrypted tensor is unknown while tracing; "
                                        "a circuit's control flow must not depend on encrypted values")

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        trace = _find_trace(args)
        return trace.record(func, args, kwargs or {})


def _recorder(name):
    def method(self, *args, **kwargs):
        return self.context.record(name, (self, *args), kwargs)
    method.__name__ = name
    method.__doc__ = f"Records LWETensor.{name} (see there for what it raises)."
    return method


for _name in _RECORDED:
    setattr(TracedLWE, _name, _recorder(_name))


def _find_trace(obj):
    if isinstance(obj, TracedLWE):
        return obj.context
    if isinstance(obj, (list, tuple)):
        for o in obj:
            t = _find_trace(o)
            if t is not None:
                return t
    return None


def _invoke(target, args, kwargs):
    if isinstance(target, str):
        return getattr(args[0], target)(*args[1:], **kwargs)
    return target(*args, **kwargs)


class _Trace:
    """The DAG being recorded: nodes in creation (hence topological) order."""

    def __init__(self, context):
        self.real = context
        self.params = context.params
        self.nodes: list[_Node] = []
        self._luts: dict = {}  # (input node, table) -> node: one PBS per distinct function of a value

    def _add(self, node: _Node) -> TracedLWE:
        self.nodes.append(node)
        return TracedLWE(self, len(self.nodes) - 1)

    def input(self, x: LWETensor) -> TracedLWE:
        meta = LWETensor(self.real, torch.empty(x.data.shape, dtype=torch.int64, device="meta"), x.degree,
                         x.noise_level)
        return self._add(_Node("input", None, (), {}, 0, meta))

    def _template(self, obj):
        if isinstance(obj, TracedLWE):
            if obj.context is not self:
                raise ContextError("circuit: a value of another circuit's trace was used")
            return _Ref(obj.node)
        if isinstance(obj, LWETensor):
            raise ContextError("circuit: an LWETensor that is not an argument of the circuit was used inside it; "
                               "pass every ciphertext the function uses as an argument")
        if isinstance(obj, (list, tuple)):
            return type(obj)(self._template(o) for o in obj)
        return obj

    def record(self, target, args, kwargs) -> TracedLWE:
        args, kwargs = self._template(tuple(args)), {k: self._template(v) for k, v in kwargs.items()}
        result = _invoke(target, _substitute(args, self._meta), {k: _substitute(v, self._meta)
                                                                  for k, v in kwargs.items()})
        if not isinstance(result, LWETensor):
            name = target if isinstance(target, str) else getattr(target, "__name__", str(target))
            raise UnsupportedOperationError(f"circuit: {name} does not give an LWETensor; a circuit records "
                                            "operations from LWETensors to LWETensors")
        refs = _refs((args, tuple(kwargs.values())))
        wave = max((self.nodes[r].wave for r in refs), default=0)
        return self._add(_Node("call", target, args, kwargs, wave, result))

    def _meta(self, ref: _Ref) -> LWETensor:
        return self.nodes[ref.node].meta

    def apply_lut(self, x, lut, *, index=None) -> TracedLWE:
        """Records a PBS of every element of x through lut (Context.apply_lut's contract)."""
        if index is not None or isinstance(lut, (list, tuple)):
            raise UnsupportedOperationError("circuit: inside a circuit apply one LUT per call (slice the tensor "
                                            "and apply each slice's LUT); a wave batches them into one launch")
        ref = self._template(x)
        meta = self.nodes[ref.node].meta
        self.real._check_lut_input(meta, [lut])
        space = self.params.message_space
        table = tuple(lut.tables_for(space))  # the LUT over the whole input space, as the PBS reads it
        key = (ref.node, table)
        if key not in self._luts:
            out = LWETensor(self.real, torch.empty(meta.data.shape, dtype=torch.int64, device="meta"), max(table))
            whole = LUT.from_table(torch.tensor(table))
            self._luts[key] = self._add(_Node("lut", whole, (ref.node,), {}, self.nodes[ref.node].wave + 1, out))
        return self._luts[key]

    def apply_many_luts(self, x, luts) -> list:
        """Several functions of x: recorded as one PBS node each (same values as a many-LUT PBS)."""
        return [self.apply_lut(x, lut) for lut in luts]


def _substitute(obj, value_of):
    if isinstance(obj, _Ref):
        return value_of(obj)
    if isinstance(obj, (list, tuple)):
        return type(obj)(_substitute(o, value_of) for o in obj)
    if isinstance(obj, dict):
        return {k: _substitute(v, value_of) for k, v in obj.items()}
    return obj


def _refs(obj) -> list:
    if isinstance(obj, _Ref):
        return [obj.node]
    if isinstance(obj, (list, tuple)):
        return [r for o in obj for r in _refs(o)]
    return []


# ---------------------------------------------------------------------------- argument trees

def _flatten(obj):
    """(LWETensor-like leaves, a hashable spec of everything else). Containers: tuple, list, and
    objects with _circuit_flatten() -> (children, aux) and classmethod _circuit_unflatten(aux, children)."""
    if isinstance(obj, (LWETensor, TracedLWE)):
        return [obj], ("lwe",)
    if isinstance(obj, (list, tuple)):
        leaves, specs = [], []
        for o in obj:
            lv, sp = _flatten(o)
            leaves += lv
            specs.append(sp)
        return leaves, (type(obj).__name__, tuple(specs))
    if hasattr(obj, "_circuit_flatten"):
        children, aux = obj._circuit_flatten()
        leaves, spec = _flatten(tuple(children))
        return leaves, ("node", type(obj), aux, spec)
    try:
        hash(obj)
    except TypeError:
        raise UnsupportedOperationError(f"circuit: arguments must be LWETensors, tuples or lists of them, or "
                                        f"hashable constants; got {type(obj).__name__}") from None
    return [], ("const", obj)


def _unflatten(spec, leaves):
    kind = spec[0]
    if kind == "lwe":
        return next(leaves)
    if kind in ("tuple", "list"):
        items = [_unflatten(s, leaves) for s in spec[1]]
        return tuple(items) if kind == "tuple" else items
    if kind == "node":
        return spec[1]._circuit_unflatten(spec[2], _unflatten(spec[3], leaves))
    return spec[1]


# ---------------------------------------------------------------------------- plans

@dataclass
class CircuitPlan:
    """A traced circuit for one input signature: the live DAG grouped by wave.

    stats: waves (batched PBS launches), pbs (ciphertexts bootstrapped per run), pbs_per_wave,
    luts_per_wave (distinct functions per launch), linear_ops (recorded linear/shape operations)."""

    nodes: list
    inputs: list
    outputs: list
    out_spec: tuple
    linear: list = field(default_factory=list)  # linear[w]: call nodes after wave w (0: before any)
    waves: list = field(default_factory=list)  # waves[w]: PBS nodes of wave w + 1
    wave_luts: list = field(default_factory=list)  # waves[w]'s distinct LUTs
    wave_ids: list = field(default_factory=list)  # waves[w]: each node's LUT position
    _index: dict = field(default_factory=dict)  # (wave, device) -> the per-ciphertext LUT index

    def __post_init__(self):
        live = set(self.outputs)
        for i in range(len(self.nodes) - 1, -1, -1):
            if i in live:
                node = self.nodes[i]
                live |= set(node.args) if node.kind == "lut" else set(_refs((node.args, tuple(node.kwargs.values()))))
        depth = max((self.nodes[i].wave for i in live if self.nodes[i].kind == "lut"), default=0)
        self.linear = [[] for _ in range(depth + 1)]
        self.waves = [[] for _ in range(depth)]
        for i in sorted(live):
            node = self.nodes[i]
            if node.kind == "call":
                self.linear[node.wave].append(i)
            elif node.kind == "lut":
                self.waves[node.wave - 1].append(i)
        for nodes in self.waves:
            tables = []
            ids = []
            for i in nodes:
                t = self.nodes[i].target.table
                if t not in tables:
                    tables.append(t)
                ids.append(tables.index(t))
            self.wave_ids.append(ids)
            self.wave_luts.append([LUT.from_table(torch.tensor(t)) for t in tables])

    @property
    def stats(self) -> dict:
        per_wave = [sum(self.nodes[i].meta.numel() for i in nodes) for nodes in self.waves]
        return dict(waves=len(self.waves), pbs=sum(per_wave), pbs_per_wave=per_wave,
                    luts_per_wave=[len(l) for l in self.wave_luts], linear_ops=sum(len(l) for l in self.linear))

    def run(self, context, leaves: list) -> list:
        if self.waves:
            context._need_eval_keys("circuit")
        env: dict = dict(zip(self.inputs, leaves))
        value = lambda ref: env[ref.node]  # noqa: E731
        for w, linear in enumerate(self.linear):  # linear nodes after wave w, then wave w + 1
            for i in linear:
                node = self.nodes[i]
                env[i] = _invoke(node.target, _substitute(node.args, value), _substitute(node.kwargs, value))
            if w < len(self.waves):
                self._run_wave(context, w, env)
        return [env[i] for i in self.outputs]

    def _run_wave(self, context, w: int, env: dict):
        nodes = self.waves[w]
        parts = [env[self.nodes[i].args[0]] for i in nodes]
        width = parts[0].data.shape[-1]
        flat = torch.cat([p.data.reshape(-1, width) for p in parts]) if len(parts) > 1 else \
            parts[0].data.reshape(-1, width)
        x = LWETensor(context, flat, max(p.degree for p in parts), max(p.noise_level for p in parts))
        luts = self.wave_luts[w]
        index = None if len(luts) == 1 else self._lut_index(w, flat.device)
        out = context.apply_lut(x, luts if index is not None else luts[0], index=index).data
        start = 0
        for i, p in zip(nodes, parts):
            n = p.numel()
            meta = self.nodes[i].meta
            env[i] = LWETensor(context, out[start:start + n].view(*p.shape, width), meta.degree, meta.noise_level)
            start += n

    def _lut_index(self, w: int, device) -> torch.Tensor:
        key = (w, str(device))
        if key not in self._index:  # built once per device: later runs launch without host work
            counts = torch.tensor([self.nodes[i].meta.numel() for i in self.waves[w]])
            self._index[key] = torch.repeat_interleave(torch.tensor(self.wave_ids[w]), counts).to(device)
        return self._index[key]


class Circuit:
    """fn over LWETensors (and tuples, lists, RadixTensors of them, and hashable constants),
    run in waves of batched PBS. Calling it traces fn for the arguments' signature (once) and
    runs the plan; `plan(*args)` gives the plan (its `stats`), `stats` the last plan's."""

    def __init__(self, fn):
        self.fn = fn
        self._plans: dict = {}
        self.last_plan: CircuitPlan | None = None

    def __repr__(self) -> str:
        return f"circuit({getattr(self.fn, '__name__', self.fn)!r})"

    def plan(self, *args) -> CircuitPlan:
        """The traced plan for these arguments (cached per shapes, degrees, noise levels, constants).

        Raises ContextError for ciphertexts of several contexts or an LWETensor used inside fn
        that is not an argument, MessageOverflowError where an operation of fn could overflow
        (from the degrees, before anything runs), UnsupportedOperationError for an operation
        without an encrypted form, ParameterError for a LUT output outside the message space."""
        leaves, spec = _flatten(args)
        context = self._context(leaves)
        key = (spec, context.params, tuple((tuple(x.shape), x.degree, x.noise_level) for x in leaves))
        plan = self._plans.get(key)
        if plan is None:
            trace = _Trace(context)
            stand_ins = [trace.input(x) for x in leaves]
            out_leaves, out_spec = _flatten(self.fn(*_unflatten(spec, iter(stand_ins))))
            for x in out_leaves:
                trace._template(x)  # a ciphertext the circuit did not compute is refused
            plan = CircuitPlan(trace.nodes, [s.node for s in stand_ins], [x.node for x in out_leaves], out_spec)
            self._plans[key] = plan
        self.last_plan = plan
        return plan

    @property
    def stats(self) -> dict:
        """The last plan's stats (see CircuitPlan). Raises UnsupportedOperationError before any trace."""
        if self.last_plan is None:
            raise UnsupportedOperationError(f"{self!r}.stats: the circuit has not been traced yet; call it or "
                                            "plan(*args) first")
        return self.last_plan.stats

    def __call__(self, *args):
        """Runs fn in waves (see the class). Raises what plan() raises, and MissingKeyError
        without evaluation keys."""
        leaves, _ = _flatten(args)
        if any(isinstance(x, TracedLWE) for x in leaves):
            return self.fn(*args)  # inside another circuit's trace: inline
        plan = self.plan(*args)
        return _unflatten(plan.out_spec, iter(plan.run(leaves[0].context, leaves)))

    @staticmethod
    def _context(leaves):
        if not leaves:
            raise UnsupportedOperationError("circuit: the arguments hold no LWETensor")
        context = leaves[0].context
        for x in leaves[1:]:
            context._check_tensor("circuit", x)
        return context


def circuit(fn) -> Circuit:
    """fhe.tfhe.circuit(fn): fn traced into a DAG of PBS and linear LWE operations, run as one
    batched PBS launch per wave (see Circuit). Usable as a decorator. Raises nothing itself;
    calls raise what Circuit.plan and Circuit.__call__ say."""
    return Circuit(fn)


# ---------------------------------------------------------------------------- bivariate functions

def scale(x, factor: int, *, headroom: int = 0):
    """x * factor for a pack (x * factor + y): linear when x's noise level times factor^2 leaves
    `headroom` (the noise level of what is added next) within max_noise_level^2, otherwise by a
    PBS (LUT m -> factor m) whose output has noise level 1.

    Raises MessageOverflowError if x's values times factor leave the message space."""
    p = x.context.params
    if x.degree * factor >= p.message_space:
        raise MessageOverflowError(f"scale: values up to {x.degree} times {factor} leave the message space "
                                   f"[0, {p.message_space}) of {p.name}")
    if x.noise_level * factor * factor + headroom <= p.max_noise_level ** 2:
        return x * factor
    top = x.degree
    return LUT(lambda m: m * factor if m <= top else 0, bits=p.bits)(x)


def apply_bivariate(fn, a, b):
    """fn(a, b) element-wise for two LWETensors (or stand-ins in a circuit): the pack
    a * (b.degree + 1) + b, then one LUT (TFHE-rs's bivariate PBS). Broadcasts like +.

    Raises MessageOverflowError if the pack could leave the message space, ParameterError if
    fn's outputs are negative, not ints or outside the message space, ContextError for tensors
    of two contexts."""
    base = b.degree + 1
    packed = scale(a, base, headroom=b.noise_level) + b
    top = a.degree
    space = a.context.params.message_space
    return LUT.from_table([fn(v // base, v % base) if v // base <= top else 0 for v in range(space)])(packed)


__all__ = ["Circuit", "CircuitPlan", "TracedLWE", "apply_bivariate", "circuit", "scale"]
