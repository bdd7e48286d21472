"""Build the synthetic sessions' corpus (``harness/synth/corpus/click-8.1.8.json.gz``), offline, once.

The corpus is a real project and real runs of its real test suite, shipped as package data so that
``ctxsim synth`` reads nothing from the machine (no installed package, no stdlib source) and
downloads nothing: the same preset and seed give the same bytes everywhere.

* The project: click 8.1.8 (BSD-3-Clause, Pallets), its PyPI sdist
  (``pip download click==8.1.8 --no-binary :all: --no-deps``, sha256 in :data:`SDIST_SHA256`),
  unpacked to ``/workspace/project`` (the synthetic sessions' working directory). Shipped: the
  Python sources, tests, docs (.rst), changelog, README, license and config files; not the images.
* Mutations: single-token changes of the real sources (``<`` ↔ ``<=``, ``and`` ↔ ``or``,
  ``True`` ↔ ``False``, ``is`` ↔ ``is not``, ``in`` ↔ ``not in``, ``not x`` → ``x``, ``+`` ↔ ``-``,
  a small integer ±1), drawn with a fixed seed; kept when the mutated file parses and 1 to
  :data:`MAX_FAILING` tests fail. A mutation is one bug a session's task fixes; up to two second
  mutations a few lines away in the same function are the agent's wrong attempts.
* Test runs: the real output of ``python -m pytest ...`` run in ``/workspace/project`` (with
  ``PYTHONPATH=src``) on the clean tree, on each mutation, and on each mutation with its wrong
  attempt, with Python 3.11.7 and pytest 8.3.4 (the newest pytest click 8.1.8's suite collects
  under: pytest 9 rejects one of its parametrize calls). The output is kept byte for byte.

Run: ``python -m ctxsim.harness.synth.corpus_build SDIST.tar.gz PYTHON_WITH_PYTEST`` (about an hour on one
core). The builder is committed for provenance; the suite never runs it.
"""

from __future__ import annotations

import ast
import gzip
import hashlib
import io
import json
import os
import random
import re
import shutil
import subprocess
import sys
import tarfile
import tokenize
from pathlib import Path

SDIST = "click-8.1.8.tar.gz"
SDIST_SHA256 = "ed53c9d8990d83c2a27deae68e4ee337473f6330c040a31d4225c9574d16096a"
SDIST_URL = "https://pypi.org/project/click/8.1.8/#files"
WORKDIR = Path("/workspace/project")
OUT = Path(__file__).resolve().parent / "corpus" / "click-8.1.8.json.gz"
SHIP_SUFFIXES = (".py", ".rst", ".md", ".txt", ".toml", ".ini", ".cfg", ".in")
MAX_FAILING = 40         # a mutation breaking more is not one focused bug (import-time breakage)
CANDIDATES = 330         # mutations screened with the full suite (about 4 s each)
WRONG_ATTEMPTS = 2       # nearby second mutations tried per bug (the agent's wrong attempts)
RUN_TIMEOUT_S = 60        # the clean suite takes 3-4 s
SEED = 20_241_219        # click 8.1.8's release date: the candidate draw is fixed
SKIP_FILES = ("src/click/_winconsole.py", "src/click/__init__.py")

SWAP = {"<": "<=", "<=": "<", ">": ">=", ">=": ">", "==": "!=", "!=": "==", "+": "-", "-": "+",
        "and": "or", "or": "and", "True": "False", "False": "True"}


def mutation_candidates(path: str, text: str) -> list[dict]:
    """Every single-token mutation of ``text`` that still parses, as a whole-line replacement."""
    lines = text.split("\n")
    toks = list(tokenize.generate_tokens(io.StringIO(text).readline))
    out = []
    for i, t in enumerate(toks):
        (row, col), (erow, ecol) = t.start, t.end
        if row != erow:
            continue
        line = lines[row - 1]
        if line.lstrip().startswith(("def ", "@", "class ", "#")) or "->" in line:
            continue  # signatures and annotations: a type change is not a behaviour bug
        nxt = toks[i + 1] if i + 1 < len(toks) else None
        new = None
        if t.type == tokenize.OP and t.string in SWAP:
            new = SWAP[t.string]
        elif t.type == tokenize.NAME and t.string in SWAP:
            new = SWAP[t.string]
        elif t.type == tokenize.NAME and t.string == "is":
            if nxt is not None and nxt.string == "not":
                ecol, new = nxt.end[1], "is"
            else:
                new = "is not"
        elif t.type == tokenize.NAME and t.string == "in" and i and toks[i - 1].string != "not" \
                and not line.lstrip().startswith("for "):
            new = "not in"
        elif t.type == tokenize.NAME and t.string == "not" and nxt is not None and nxt.string not in ("in",) \
                and (i == 0 or toks[i - 1].string != "is"):
            ecol, new = nxt.start[1], ""
        elif t.type == tokenize.NUMBER and t.string in ("0", "1", "2"):
            new = {"0": "1", "1": "2", "2": "1"}[t.string]
        if new is None:
            continue
        mutated = line[:col] + new + line[ecol:]
        if mutated == line:
            continue
        new_text = "\n".join(lines[: row - 1] + [mutated] + lines[row:])
        try:
            ast.parse(new_text)
        except SyntaxError:
            continue
        out.append({"path": path, "line": row, "old": line, "new": mutated,
                    "op": f"{line[col:ecol].strip()} -> {new or '(removed)'}"})
    return out


def blocks_of(text: str) -> list[list]:
    """def/class spans (first line incl. decorators, last line, depth, kind, qualified name)."""
    out: list[list] = []

    def walk(nodes, depth: int, prefix: str) -> None:
        for n in nodes:
            if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                start = min([d.lineno for d in n.decorator_list] + [n.lineno])
                name = f"{prefix}{n.name}"
                out.append([start, n.end_lineno, depth, "class" if isinstance(n, ast.ClassDef) else "def", name])
                walk(n.body, depth + 1, name + ".")

    walk(ast.parse(text).body, 0, "")
    return sorted(out)


def segments_of(text: str) -> list[list[int]]:
    """Statement spans of every module and class body: ``[first, last, depth]`` (1-based, inclusive),
    each statement's span starting right after the previous statement of its body (so comments and
    blank lines above it belong to it) and including its decorators. Any run of consecutive spans of
    one body is a piece of code that parses (after a dedent, for a class body): what a read of a
    source file returns when it starts and ends on a statement of that body."""
    out: list[list[int]] = []

    def walk(body, depth: int, start: int) -> None:
        prev = start
        for n in body:
            first = min([d.lineno for d in getattr(n, "decorator_list", [])] + [n.lineno])
            out.append([min(prev, first), n.end_lineno, depth])
            prev = n.end_lineno + 1
            if isinstance(n, ast.ClassDef):
                walk(n.body, depth + 1, n.body[0].lineno)

    walk(ast.parse(text).body, 0, 1)
    return sorted(out)


def index(files: dict[str, str]) -> dict:
    """What the generator needs to know about the Python files' structure (computed here, offline,
    so that generation does not depend on the ``ast`` of whatever Python runs it)."""
    py = {k: v for k, v in files.items() if k.endswith(".py")}
    return {"blocks": {k: blocks_of(v) for k, v in py.items()}, "segments": {k: segments_of(v) for k, v in py.items()}}


def function_at(blocks: list[list], line: int) -> str:
    best = ""
    for start, end, _, kind, name in blocks:
        if start <= line <= end and kind == "def":
            best = name
    return best


def pytest(python: str, args: list[str]) -> dict:
    cmd = [python, "-m", "pytest", *args, "-p", "no:cacheprovider"]
    env = dict(os.environ, PYTHONPATH="src", PYTHONHASHSEED="0", COLUMNS="80", NO_COLOR="1")
    env.pop("PYTEST_ADDOPTS", None)
    try:
        p = subprocess.run(cmd, cwd=WORKDIR, env=env, capture_output=True, text=True, timeout=RUN_TIMEOUT_S)
    except subprocess.TimeoutExpired:  # a mutation that loops forever: not a bug a session can show
        return {"cmd": "timeout", "exit": -1, "out": ""}
    shown = "python -m pytest " + " ".join(args)
    return {"cmd": shown, "exit": p.returncode, "out": (p.stdout + p.stderr).rstrip("\n")}


def failing_of(run: dict) -> list[str]:
    return re.findall(r"^FAILED (\S+)", run["out"], re.M) + re.findall(r"^ERROR (\S+)", run["out"], re.M)


def apply(path: Path, base: str, edits: list[dict]) -> None:
    lines = base.split("\n")
    for e in edits:
        assert lines[e["line"] - 1] == e["old"], e
        lines[e["line"] - 1] = e["new"]
    path.write_text("\n".join(lines), encoding="utf-8")


def build(sdist: Path, python: str) -> dict:
    digest = hashlib.sha256(sdist.read_bytes()).hexdigest()
    if digest != SDIST_SHA256:
        raise SystemExit(f"{sdist}: sha256 {digest} is not click 8.1.8's {SDIST_SHA256}")
    if WORKDIR.exists():
        shutil.rmtree(WORKDIR)
    WORKDIR.mkdir(parents=True)
    with tarfile.open(sdist) as tf:
        root = tf.getnames()[0].split("/")[0]
        tf.extractall(WORKDIR.parent / "_unpack", filter="data")
    shutil.move(str(WORKDIR.parent / "_unpack" / root), str(WORKDIR.parent / "_tmp_project"))
    shutil.rmtree(WORKDIR)
    shutil.move(str(WORKDIR.parent / "_tmp_project"), str(WORKDIR))
    shutil.rmtree(WORKDIR.parent / "_unpack")

    files = {}
    for p in sorted(WORKDIR.rglob("*")):
        rel = p.relative_to(WORKDIR).as_posix()
        if p.is_file() and p.suffix in SHIP_SUFFIXES and rel != "PKG-INFO":
            files[rel] = p.read_text(encoding="utf-8")
    blocks = {k: blocks_of(v) for k, v in files.items() if k.endswith(".py")}
    modules = sorted(k for k in files if re.fullmatch(r"tests/test_\w+\.py", k))

    clean = {"suite_q": pytest(python, ["-q"]), "suite_v": pytest(python, ["-v"]), "modules": {}}
    for m in modules:
        clean["modules"][m] = {"q": pytest(python, [m, "-q"]), "v": pytest(python, [m, "-v"])}
    print(clean["suite_q"]["out"].splitlines()[-1], flush=True)

    per_file = {path: mutation_candidates(path, text) for path, text in files.items()
                if path.startswith("src/click/") and path.endswith(".py") and path not in SKIP_FILES}
    cands = [c for path in sorted(per_file) for c in per_file[path]]
    rng = random.Random(SEED)
    rng.shuffle(cands)
    mutations = []
    for n, c in enumerate(cands[:CANDIDATES]):
        target = WORKDIR / c["path"]
        base = files[c["path"]]
        apply(target, base, [c])
        try:
            screen = pytest(python, ["-q", "--tb=no", "-rfE"])
            failing = failing_of(screen)
            if screen["exit"] < 0 or not (1 <= len(failing) <= MAX_FAILING) or "error" in screen["out"].splitlines()[-1]:
                continue
            module = failing[0].split("::")[0]
            c = dict(c, id=f"m{len(mutations) + 1:03d}", function=function_at(blocks[c["path"]], c["line"]),
                     failing=failing, module=module)
            c["runs"] = {"x": pytest(python, [module, "-x", "-q"]),
                         "short": pytest(python, [module, "-q", "--tb=short"]),
                         "test": pytest(python, [failing[0], "-q"]),
                         "suite": pytest(python, ["-q"])}
            near = [w for w in per_file[c["path"]]
                    if 0 < abs(w["line"] - c["line"]) <= 8 and function_at(blocks[c["path"]], w["line"]) == c["function"]]
            c["wrong"] = []
            for w in rng.sample(near, min(len(near), WRONG_ATTEMPTS)):
                apply(target, base, [c, w])
                run = pytest(python, [module, "-x", "-q"])
                if run["exit"] > 0:  # still failing: a wrong first attempt
                    c["wrong"].append(dict(w, runs={"x": run}))
            mutations.append(c)
            print(f"{n + 1}/{CANDIDATES} kept {c['id']} {c['path']}:{c['line']} {c['op']} ({len(failing)} failing)", flush=True)
        finally:
            target.write_text(base, encoding="utf-8")
    return {
        "project": "click", "version": "8.1.8", "license": "BSD-3-Clause (LICENSE.txt)",
        "source": {"sdist": SDIST, "sha256": SDIST_SHA256, "from": SDIST_URL},
        "runner": {"python": sys.version.split()[0], "pytest": "8.3.4", "cwd": str(WORKDIR),
                   "env": "PYTHONPATH=src PYTHONHASHSEED=0 COLUMNS=80"},
        "files": files, **index(files), "clean": clean, "mutations": mutations,
    }


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv == ["--reindex"]:  # recompute the structure index of the shipped files, keep the runs
        data = json.loads(gzip.decompress(OUT.read_bytes()))
        data.update(index(data["files"]))
    elif len(argv) == 2:
        data = build(Path(argv[0]), argv[1])
    else:
        print(__doc__)
        return 2
    raw = json.dumps(data, ensure_ascii=False, sort_keys=True, separators=(",", ":")).encode("utf-8")
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_bytes(gzip.compress(raw, compresslevel=9, mtime=0))
    print(f"{OUT}: {len(data['mutations'])} mutations, {len(raw):,} bytes raw, {OUT.stat().st_size:,} gzipped")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
