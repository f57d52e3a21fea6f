"""The error contract (issue 11, "Errors"): every FHE condition raises a class of
fhetorch/errors.py, all deriving from fhetorch.FHEError, one class per condition; no bare
builtin exception for an FHE condition anywhere under fhetorch/ (read with ast); every public
function and method of the facade documents what it raises, naming classes that exist.
"""
import ast
import builtins
import inspect
import pathlib
import re

import warnings

import pytest
import torch

import fhetorch as fhe
from fhetorch import errors
from fhetorch._ckks import evaluator as ev

PKG = pathlib.Path(fhe.__file__).resolve().parent

# Builtin exceptions no fhetorch code raises by name: each FHE condition has its class. Not
# listed: IndexError (a dimension out of range, as torch raises it) and AttributeError (the
# module __getattr__ protocol), which are Python's own conditions.
FORBIDDEN = {"Exception", "ValueError", "RuntimeError", "KeyError", "TypeError", "AssertionError",
             "NotImplementedError", "ArithmeticError", "ZeroDivisionError", "OverflowError", "LookupError"}

# (module, function, builtin): truly Python-level argument errors, each with its reason.
ALLOWED = {
    # a plaintext tensor where only an EncryptedTensor has a power basis: the argument's Python
    # type is wrong (torch raises TypeError for such arguments too)
    ("tensor/functions.py", "power_basis", "TypeError"),
    # len() of a 0-d LWETensor: Python's sequence protocol expects TypeError (torch.Tensor too)
    ("_tfhe/lwe_tensor.py", "__len__", "TypeError"),
}

CLASSES = [getattr(errors, n) for n in errors.__all__ if n != "InsecureParametersWarning"]


def _raises(path: pathlib.Path):
    """(function name, raised name, line) of every `raise Name(...)` / `raise Name` in a module."""
    tree = ast.parse(path.read_text())
    owner = {}
    for f in ast.walk(tree):
        if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for n in ast.walk(f):
                owner.setdefault(id(n), f.name)  # ast.walk is breadth-first: the outermost function
    for node in ast.walk(tree):
        if isinstance(node, ast.Raise) and node.exc is not None:
            exc = node.exc.func if isinstance(node.exc, ast.Call) else node.exc
            if isinstance(exc, ast.Name):
                yield owner.get(id(node), "<module>"), exc.id, node.lineno


MODULES = sorted(PKG.rglob("*.py"))


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(PKG)))
def test_no_builtin_exception_for_fhe_conditions(path):
    rel = str(path.relative_to(PKG))
    for func, name, line in _raises(path):
        if name in FORBIDDEN:
            assert (rel, func, name) in ALLOWED, \
                f"fhetorch/{rel}:{line} ({func}) raises the builtin {name}; raise the fhetorch.errors class of the " \
                "condition (or justify it in ALLOWED)"


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(PKG)))
def test_raised_classes_live_in_errors(path):
    """Every exception class fhetorch raises by name is a builtin or defined in errors.py, and no
    other module defines an exception class."""
    rel = str(path.relative_to(PKG))
    tree = ast.parse(path.read_text())
    if rel != "errors.py":
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef):
                bases = {b.id for b in node.bases if isinstance(b, ast.Name)}
                assert not {n for n in bases if n.endswith(("Error", "Exception", "Warning"))}, \
                    f"fhetorch/{rel}:{node.lineno} defines the exception {node.name}; define it in fhetorch/errors.py"
    for func, name, line in _raises(path):
        if name.endswith("Error") and not hasattr(builtins, name):
            assert name in errors.__all__, f"fhetorch/{rel}:{line} raises {name}, which fhetorch/errors.py lacks"


def test_allow_list_is_current():
    found = {(str(p.relative_to(PKG)), f, n) for p in MODULES for f, n, _ in _raises(p)}
    assert ALLOWED <= found, f"stale ALLOWED entries: {ALLOWED - found}"


@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: c.__name__)
def test_every_class_is_an_fhe_error_and_public(cls):
    assert issubclass(cls, fhe.FHEError)
    assert getattr(fhe, cls.__name__) is cls, f"fhetorch.{cls.__name__} is not re-exported"
    assert cls.__doc__ and cls.__module__ == "fhetorch.errors"


def test_hierarchy():
    assert not issubclass(fhe.MissingKeyError, KeyError)  # a key nobody looked up: no KeyError quoting
    assert str(fhe.MissingKeyError("rotate: no key")) == "rotate: no key"
    assert not hasattr(errors, "KeyError_") and not hasattr(fhe, "KeyError_")
    assert fhe.MissingKeyError.__name__ == "MissingKeyError"  # the name tracebacks show
    # compatibility where it is free: generic handlers of the builtin keep working
    for cls, base in ((fhe.ShapeError, ValueError), (fhe.ParameterError, ValueError), (fhe.EncodingError, ValueError),
                      (fhe.LayoutError, ValueError), (fhe.ApproximationError, ValueError),
                      (fhe.SecurityError, fhe.ParameterError), (fhe.SlotError, fhe.EncodingError),
                      (fhe.UnsupportedOperationError, NotImplementedError),
                      (fhe.UnsupportedLayerError, fhe.UnsupportedOperationError),
                      (fhe.IntegerArgumentError, TypeError), (fhe.EncryptedValueError, TypeError),
                      (fhe.InternalError, RuntimeError)):
        assert issubclass(cls, base), (cls, base)
    for cls in (fhe.LevelError, fhe.ScaleError, fhe.ContextError, fhe.MissingKeyError, fhe.SerializationError):
        assert not issubclass(cls, (ValueError, TypeError, RuntimeError, KeyError)), cls
    assert fhe.nn.UnsupportedLayerError is fhe.UnsupportedLayerError
    assert issubclass(fhe.InsecureParametersWarning, UserWarning)


def test_one_class_per_condition():
    """No two classes share a docstring's first line (a copy is a condition named twice)."""
    firsts = [c.__doc__.strip().splitlines()[0] for c in CLASSES]
    assert len(set(firsts)) == len(firsts)


# --- the facade documents what it raises -------------------------------------------------------------
def _public_callables():
    """(qualified name, function) of every public function and method of the facade."""
    out = {}

    def add_class(prefix, cls):
        for name, member in vars(cls).items():
            if name.startswith("_") and name != "__call__":
                continue
            if isinstance(member, (staticmethod, classmethod)):
                member = member.__func__
            if inspect.isfunction(member) and member.__module__.startswith("fhetorch"):
                out[f"{prefix}.{name}"] = member

    add_class("Context", fhe.Context)
    add_class("EncryptedTensor", fhe.EncryptedTensor)
    add_class("nn.CompiledModel", fhe.nn.CompiledModel)
    for mod, prefix in ((fhe.ckks, "ckks"), (fhe.ckks.polynomial, "ckks.polynomial")):
        for name in mod.__all__:
            obj = getattr(mod, name)
            if inspect.isfunction(obj):
                out[f"{prefix}.{name}"] = obj
            elif inspect.isclass(obj) and obj is not fhe.Context:
                add_class(f"{prefix}.{name}", obj)
    for name in ("compile", "relu_approximation"):
        out[f"nn.{name}"] = getattr(fhe.nn, name)
    out["save"], out["load"] = fhe.save, fhe.load
    return out


PUBLIC = _public_callables()
# plain accessors of metadata: nothing to raise, nothing to document
ACCESSORS = {"EncryptedTensor.numel", "EncryptedTensor.dim", "EncryptedTensor.size", "EncryptedTensor.is_complex",
             "EncryptedTensor.cpu", "EncryptedTensor.cuda", "EncryptedTensor.neg", "EncryptedTensor.add",
             "EncryptedTensor.sub", "EncryptedTensor.mul", "EncryptedTensor.matmul"}


@pytest.mark.parametrize("name", sorted(set(PUBLIC) - ACCESSORS))
def test_public_docstring_lists_what_it_raises(name):
    doc = inspect.getdoc(PUBLIC[name]) or ""
    m = re.search(r"\bRaises\b(.*)", doc, re.S)
    assert m, f"{name}: the docstring has no 'Raises ...' paragraph (what it raises, or 'Raises nothing')"
    named = set(re.findall(r"\b([A-Z]\w*(?:Error|Warning))\b", m.group(1)))
    assert named or "nothing" in m.group(1).split("\n\n")[0], f"{name}: 'Raises' names no class"
    for cls in named:
        assert cls in errors.__all__ or isinstance(getattr(builtins, cls, None), type), \
            f"{name}: the docstring names {cls}, which is no fhetorch error nor builtin"


def test_accessors_are_plain():
    """The exempt accessors are what they say (delegations, metadata), and exist."""
    assert ACCESSORS <= set(PUBLIC)


# --- each condition raises its own class ------------------------------------------------------------
def test_conditions_raise_their_class(ctx_n10):
    x = torch.rand(8, dtype=torch.float64)
    with pytest.raises(fhe.SecurityError, match="make_params: insecure parameters"):
        fhe.ckks.make_params(12, levels=5)
    with pytest.raises(fhe.ParameterError, match="preset: unknown preset") as e:
        fhe.ckks.preset("toy-n99")
    assert not isinstance(e.value, fhe.SecurityError)
    with pytest.raises(fhe.SlotError, match="encode: got 8 values for 4 slots"):
        ctx_n10.encrypt_vector(x, slots=4)
    a, b = ctx_n10.encrypt_vector(x, slots=8), ctx_n10.encrypt_vector(x[:4], slots=4)
    with pytest.raises(fhe.SlotError, match="add: operands pack 8 and 4 slots"):
        ev.add(ctx_n10, a, b)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", fhe.InsecureParametersWarning)
        bare = fhe.Context("toy-n10")
    with pytest.raises(fhe.MissingKeyError, match=r"encrypt: no public key; call ctx.keygen\(\) first"):
        bare.encrypt(x)
    with pytest.raises(fhe.LevelError, match=r"encrypt: level must be in \[0, 8\], got 9"):
        ctx_n10.encrypt(x, level=9)
    with pytest.raises(fhe.UnsupportedOperationError, match="sin is not supported on EncryptedTensor"):
        torch.sin(ctx_n10.encrypt(x))
