"""Issues 30 and 40: the packages of harness/ (and strategies/) build on each other in one direction.

Every import counts, at module level or deferred inside a function (a deferral keeps ``ctxsim
--help`` fast; it does not make an upward dependency acceptable); only ``if TYPE_CHECKING:`` blocks,
which never run, are left out. Two checks on that graph:

* no circle between modules (Tarjan's strongly connected components);
* the layer order that harness/__init__.py lists: each package's docstring names what it may import
  (``May import: ...``), only packages listed before it, and it imports nothing else.
"""

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TOP = {"harness": "ctxsim.harness", "strategies": "ctxsim.strategies"}


def _modules(root: Path = ROOT) -> dict[str, Path]:
    out = {}
    for pkg in TOP:
        for p in (root / pkg).rglob("*.py"):
            parts = p.relative_to(root).with_suffix("").parts
            out[".".join(("ctxsim", *parts)).removesuffix(".__init__")] = p
    return out


def _type_checking(node: ast.AST) -> bool:
    t = getattr(node, "test", None)
    return isinstance(node, ast.If) and (isinstance(t, ast.Name) and t.id == "TYPE_CHECKING"
                                          or isinstance(t, ast.Attribute) and t.attr == "TYPE_CHECKING")


def _imports(tree: ast.AST):
    """Every import statement, at any depth, outside ``if TYPE_CHECKING:`` blocks."""
    stack = [tree]
    while stack:
        node = stack.pop()
        if _type_checking(node):
            stack.extend(node.orelse)
            continue
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield node
        stack.extend(ast.iter_child_nodes(node))


def _edges(name: str, path: Path, mods: dict[str, Path]) -> set[str]:
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    got: set[str] = set()
    for node in _imports(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*up, *([node.module] if node.module else [])])
            for a in node.names:
                target = f"{base}.{a.name}"
                got.add(target if target in mods else base)
        else:
            got.update(a.name for a in node.names)
    return {t for t in got if t in mods and t != name}


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's strongly connected components of more than one module: the import circles."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    cycles = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                cycles.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return cycles


def _package(module: str) -> str | None:
    """The layer a module belongs to: ``strategies``, or the package of harness/ it is in (None: the
    harness package itself)."""
    parts = module.split(".")
    if parts[1] == "strategies":
        return "strategies"
    return parts[2] if len(parts) > 2 else None


def layer_order(root: Path = ROOT) -> list[str]:
    """The packages in the order harness/__init__.py lists them (``1. ``name``: ...``)."""
    doc = ast.get_docstring(ast.parse((root / "harness" / "__init__.py").read_text(encoding="utf-8"))) or ""
    return re.findall(r"^\d+\. ``(\w+)``", doc, re.M)


def may_import(path: Path) -> set[str] | None:
    """What a package's docstring says it may import (None: it says nothing)."""
    doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""
    m = re.search(r"^May import: (.*?)(?:\n\n|\Z)", doc, re.M | re.S)
    if m is None:
        return None
    said = m.group(1).replace("\n", " ").strip().rstrip(".")
    if said.startswith("nothing"):
        return set()
    if said.startswith("every package"):
        return {"*"}
    said = re.sub(r"\(.*?\)", "", said)
    return {w.strip() for w in said.split(",") if w.strip()}


def layer_problems(root: Path = ROOT) -> list[str]:
    mods = _modules(root)
    order = layer_order(root)
    problems = []
    folders = {p.name for p in (root / "harness").iterdir() if (p / "__init__.py").is_file()} | {"strategies"}
    if sorted(order) != sorted(folders):
        problems.append(f"harness/__init__.py lists {sorted(order)}, the packages are {sorted(folders)}")
    allowed: dict[str, set[str]] = {}
    for pkg in order:
        init = root / ("strategies" if pkg == "strategies" else f"harness/{pkg}") / "__init__.py"
        said = may_import(init) if init.is_file() else None
        if said is None:
            problems.append(f"{pkg}: its docstring does not say what it may import")
            continue
        below = set(order[: order.index(pkg)])
        said = below if said == {"*"} else said
        if said - below:
            problems.append(f"{pkg} may import {sorted(said - below)}, which are not below it")
        allowed[pkg] = said
    for name, path in mods.items():
        src = _package(name)
        for target in _edges(name, path, mods):
            dst = _package(target)
            if src is None or dst is None or dst == src or src not in allowed:
                continue
            if dst not in allowed[src]:
                problems.append(f"{name} imports {target}: {src} may not import {dst}")
    return problems


def test_no_import_cycles():
    mods = _modules()
    graph = {m: _edges(m, p, mods) for m, p in mods.items()}
    assert len(graph) > 50   # the walk found the packages
    assert _cycles(graph) == [], "import circles"


def test_layers_import_only_what_lies_below_them():
    assert len(layer_order()) >= 10
    assert layer_problems() == []


def test_the_harness_folder_is_packages():
    """Issue 40: at most 15 modules at the top of harness/ (the rest lives in the packages)."""
    assert len(list((ROOT / "harness").glob("*.py"))) <= 15


ENGINE_MAX_LINES = 300   # issue 40: the engine stays small (one loop; the edges live in their own modules)


def test_the_engine_stays_small():
    n = len((ROOT / "harness" / "replay" / "engine.py").read_text(encoding="utf-8").splitlines())
    assert n <= ENGINE_MAX_LINES, f"harness/replay/engine.py has {n} lines: move an edge out of the loop"


def test_a_circle_is_found(tmp_path):
    """Two modules importing each other are a circle, also when one import is inside a function;
    an import under ``if TYPE_CHECKING:`` is no edge."""
    (tmp_path / "harness").mkdir()
    (tmp_path / "harness" / "a.py").write_text("from ctxsim.harness import b\n")
    (tmp_path / "harness" / "b.py").write_text("def f():\n    from ctxsim.harness.a import x\n")
    (tmp_path / "harness" / "c.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                                               "    from ctxsim.harness import a\n")
    mods = {f"ctxsim.harness.{n}": tmp_path / "harness" / f"{n}.py" for n in "abc"}
    graph = {m: _edges(m, p, mods) for m, p in mods.items()}
    assert graph == {"ctxsim.harness.a": {"ctxsim.harness.b"}, "ctxsim.harness.b": {"ctxsim.harness.a"},
                     "ctxsim.harness.c": set()}
    assert _cycles(graph) == [["ctxsim.harness.a", "ctxsim.harness.b"]]


def test_an_upward_import_is_found(tmp_path):
    """A lower package importing a higher one, even inside a function, breaks the order; so does a
    package that says it may import one above it."""
    h = tmp_path / "harness"
    for pkg, doc in (("low", "May import: nothing of ctxsim."), ("high", "May import: low.")):
        (h / pkg).mkdir(parents=True)
        (h / pkg / "__init__.py").write_text(f'"""{pkg}.\n\n{doc}\n"""\n')
    (tmp_path / "strategies").mkdir()
    (tmp_path / "strategies" / "__init__.py").write_text('"""s.\n\nMay import: low.\n"""\n')
    (h / "__init__.py").write_text('"""Layers.\n\n1. ``low``: a.\n2. ``strategies``: s.\n3. ``high``: b.\n"""\n')
    (h / "high" / "b.py").write_text("from ctxsim.harness.low import a\n")
    (h / "low" / "a.py").write_text("def f():\n    from ctxsim.harness.high import b\n")
    assert layer_problems(tmp_path) == ["ctxsim.harness.low.a imports ctxsim.harness.high.b: low may not import high"]
    (h / "low" / "__init__.py").write_text('"""low.\n\nMay import: high.\n"""\n')
    assert "low may import ['high'], which are not below it" in layer_problems(tmp_path)
