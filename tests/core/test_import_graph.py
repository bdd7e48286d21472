"""Issue 30: no import circles. The module-level imports of harness/ and strategies/ (those a
module runs when it is imported; an import inside a function is a deliberate deferral, and
``if TYPE_CHECKING:`` blocks run never) form no cycle."""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _modules() -> dict[str, Path]:
    out = {}
    for pkg in ("harness", "strategies"):
        for p in (ROOT / pkg).rglob("*.py"):
            parts = p.relative_to(ROOT).with_suffix("").parts
            name = ".".join(("ctxsim", *parts))
            out[name.removesuffix(".__init__")] = p
    return out


def _edges(name: str, path: Path, mods: dict[str, Path]) -> set[str]:
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    got: set[str] = set()
    for node in ast.parse(path.read_text(encoding="utf-8")).body:   # module level only
        if isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*up, *([node.module] if node.module else [])])
            for a in node.names:
                target = f"{base}.{a.name}"
                got.add(target if target in mods else base)
        elif isinstance(node, ast.Import):
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


def test_no_import_cycles():
    mods = _modules()
    graph = {m: _edges(m, p, mods) for m, p in mods.items()}
    assert len(graph) > 50   # the walk found the packages
    assert _cycles(graph) == [], "import circles"


def test_a_circle_is_found(tmp_path):
    """Two modules importing each other at module level are a circle; an import inside a function
    is no edge."""
    (tmp_path / "harness").mkdir()
    (tmp_path / "harness" / "a.py").write_text("from ctxsim.harness import b\n")
    (tmp_path / "harness" / "b.py").write_text("from ctxsim.harness.a import x\n")
    (tmp_path / "harness" / "c.py").write_text("def f():\n    from ctxsim.harness import a\n")
    mods = {f"ctxsim.harness.{n}": tmp_path / "harness" / f"{n}.py" for n in "abc"}
    graph = {m: _edges(m, p, mods) for m, p in mods.items()}
    assert graph == {"ctxsim.harness.a": {"ctxsim.harness.b"}, "ctxsim.harness.b": {"ctxsim.harness.a"},
                     "ctxsim.harness.c": set()}
    assert _cycles(graph) == [["ctxsim.harness.a", "ctxsim.harness.b"]]
