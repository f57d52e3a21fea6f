"""docs/glossary.md, one name per concept: the names it lists under "synonyms to avoid" are not
identifiers anywhere in fhetorch/ (Python tokens, class members) or csrc/ (code outside comments
and strings), except the renames still listed under "To apply"; and each of those is still in
the tree (an applied rename leaves that list)."""
import ast
import io
import pathlib
import re
import tokenize

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
GLOSSARY = (ROOT / "docs" / "glossary.md").read_text()
PY = sorted((ROOT / "fhetorch").rglob("*.py"))
CPP = sorted(p for ext in ("h", "cpp", "cu", "cuh") for p in (ROOT / "csrc").rglob(f"*.{ext}"))


def _rows():
    """(concept, names cell, avoid cell) of every 4-column table row."""
    for line in GLOSSARY.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")] if line.startswith("|") else []
        if len(cells) == 4 and cells[0] != "concept" and not set(cells[0]) <= set("- "):
            yield cells[0], cells[1], cells[3]


def _names(cell: str) -> list:
    return [n.removesuffix("()") for n in re.findall(r"`([^`]+)`", cell)]


AVOID = sorted({n for _, _, avoid in _rows() for n in _names(avoid)})
TO_APPLY = GLOSSARY.split("## To apply", 1)[1]
PENDING = sorted({n.removesuffix("()") for n in re.findall(r"`([^`]+)`\s*->", TO_APPLY)})


def _python_names() -> set:
    """Every Python name token, except torch's own attributes (torch.multiply, torch.Tensor.mul):
    the dispatch table names torch's API, which is not ours to rename."""
    out = set()
    for p in PY:
        prev = []
        for tok in tokenize.generate_tokens(io.StringIO(p.read_text()).readline):
            if tok.type == tokenize.NAME and not (prev[-2:] == ["torch", "."] or prev[-4:] == ["torch", ".", "Tensor", "."]):
                out.add(tok.string)
            if tok.type not in (tokenize.NL, tokenize.NEWLINE, tokenize.COMMENT):
                prev = (prev + [tok.string])[-4:]
    return out


def _members() -> set:
    """'Class.member' for every method, field and class attribute of a class under fhetorch/."""
    out = set()
    for p in PY:
        for cls in ast.walk(ast.parse(p.read_text())):
            if isinstance(cls, ast.ClassDef):
                for node in cls.body:
                    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                        out.add(f"{cls.name}.{node.name}")
                    elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
                        out.add(f"{cls.name}.{node.target.id}")
                    elif isinstance(node, ast.Assign):
                        out |= {f"{cls.name}.{t.id}" for t in node.targets if isinstance(t, ast.Name)}
    return out


def _cpp_names() -> set:
    comment_or_string = re.compile(r'//[^\n]*|/\*.*?\*/|"(?:\\.|[^"\\])*"|\'(?:\\.|[^\'\\])\'', re.S)
    out = set()
    for p in CPP:
        out |= set(re.findall(r"\b[A-Za-z_]\w*\b", comment_or_string.sub(" ", p.read_text())))
    return out


IDENTIFIERS = _python_names() | _cpp_names() | _members()


def test_glossary_parses():
    rows = list(_rows())
    assert len(rows) > 50, "the glossary tables lost their rows"
    assert AVOID
    assert set(PENDING) <= set(AVOID), f"'To apply' names that no row lists to avoid: {set(PENDING) - set(AVOID)}"
    named = {n for _, names, _ in rows for n in _names(names)}
    assert not named & set(AVOID), f"names both used and avoided: {named & set(AVOID)}"
    concepts = [c for c, _, _ in rows]
    assert len(concepts) == len(set(concepts)), "a concept is listed twice"


@pytest.mark.parametrize("name", AVOID)
def test_synonym_is_not_an_identifier(name):
    if name in PENDING:
        assert name in IDENTIFIERS, f"{name!r} is gone from fhetorch/ and csrc/: remove it from 'To apply'"
        pytest.skip(f"{name!r}: rename pending (docs/glossary.md, To apply)")
    assert name not in IDENTIFIERS, f"{name!r} is an identifier in fhetorch/ or csrc/; docs/glossary.md says avoid it"
