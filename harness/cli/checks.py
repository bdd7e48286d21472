"""Checks every command makes before any work starts (an option out of range, an output it could
not write, an output that is one of its inputs), and writing outputs all or nothing.

A replay of a long trace takes minutes: an unwritable ``--json`` found after it, or a negative
``--token-scale`` that gives a negative cost, wastes them or, worse, looks like a result. Each
check raises :class:`ctxsim.harness.cli.BadInput` naming the option (exit 2).
"""

from __future__ import annotations

import math
import os
import tempfile
from collections.abc import Callable, Iterable
from pathlib import Path

MAX_SEED = 2 ** 32 - 1        # numpy's SeedSequence entropy per word (the engine seeds numpy with it)
MAX_TOKEN_SCALE = 10.0        # same bound as a trace's recorded.token_scale (ctxsim.harness.model.trace)
MIN_TOKEN_SCALE = 0.1


def _bad(msg: str) -> Exception:
    from ctxsim.harness.cli import BadInput

    return BadInput(msg)


def seed(value: int | None, flag: str = "--seed") -> None:
    if value is not None and not 0 <= value <= MAX_SEED:
        raise _bad(f"{flag} must be a whole number in 0..{MAX_SEED}, got {value}")


def token_scale(value: float | None, flag: str = "--token-scale") -> None:
    if value is not None and not (math.isfinite(value) and MIN_TOKEN_SCALE <= value <= MAX_TOKEN_SCALE):
        raise _bad(f"{flag} is true tokens per cl100k token: a number in {MIN_TOKEN_SCALE}..{MAX_TOKEN_SCALE:g} "
                   f"(tokenizers differ by tens of per cent), got {value}")


def window(value: int | None, flag: str = "--window") -> None:
    from ctxsim.harness.model.trace import MAX_TOKENS

    if value is not None and not 0 < value <= MAX_TOKENS:
        raise _bad(f"{flag} must be a positive number of tokens up to {MAX_TOKENS:,}, got {value}")


def fraction(value: float | None, flag: str, *, open_low: bool = False, open_high: bool = False) -> None:
    if value is None:
        return
    ok = math.isfinite(value) and (0 < value if open_low else 0 <= value) and (value < 1 if open_high else value <= 1)
    if not ok:
        lo, hi = "(0" if open_low else "[0", "1)" if open_high else "1]"
        raise _bad(f"{flag} must be a number in {lo}, {hi}, got {value}")


def side_call_kinds() -> tuple[str, ...]:
    """The side-call kinds ``--fail`` can name (ctxsim.harness.llm.services)."""
    from ctxsim.harness.llm import services as llm

    return (llm.SUMMARY, llm.VERIFY, llm.MEMORY_SELECT, llm.MEMORY_EXTRACT, llm.MEMORY_CONSOLIDATE, llm.JUDGE,
            llm.SUBAGENT, llm.READBACK)


def strategy_fits(cls, trace, path: str | Path, flag: str = "--strategy") -> None:
    """A strategy that re-enacts a recorded agent (``needs_recorded_trace``) needs an imported log."""
    if getattr(cls, "needs_recorded_trace", False) and trace.header.recorded is None:
        raise _bad(f"{flag} {cls.name}: it re-enacts a recorded agent, and {path} is not an imported log "
                   "(no header.recorded: `ctxsim import` writes it)")


# --- outputs --------------------------------------------------------------------------------------

def output(flag: str, dest: str | Path | None, *, sources: Iterable[str | Path] = (), folder: bool = False,
           suffixes: tuple[str, ...] = ()) -> Path | None:
    """Check before any work that ``dest`` can be written: not one of ``sources``, not a folder
    when a file is written (nor a file when a folder is), with a suffix in ``suffixes``, its
    parent creatable and writable. Returns the path (None for None or ``-``)."""
    if dest is None or str(dest) == "-":
        return None
    path = Path(dest)
    if suffixes and path.suffix not in suffixes:
        raise _bad(f"{flag} {dest}: use a file name ending in {' or '.join(suffixes)}")
    for src in sources:
        if src is not None and str(src) != "-" and _same(path, Path(src)):
            raise _bad(f"{flag} {dest}: that is an input of this command ({src}); write the output elsewhere")
    if path.exists():
        if folder and not path.is_dir():
            raise _bad(f"{flag} {dest}: a file, not a folder")
        if not folder and path.is_dir():
            raise _bad(f"{flag} {dest}: a folder; give a file name")
        _probe(flag, dest, path if folder else path.parent)
        return path
    parent = path.parent
    while not parent.exists():
        if parent.parent == parent:
            break
        parent = parent.parent
    if not parent.is_dir():
        raise _bad(f"{flag} {dest}: {parent} is a file, so {path.name} cannot be created under it")
    _probe(flag, dest, parent)
    return path


def _probe(flag: str, dest: str | Path, folder: Path) -> None:
    """Create and remove a file in ``folder``: the only test that holds for root, read-only file
    systems and /proc alike (``os.access`` says yes to root everywhere)."""
    try:
        fd, tmp = tempfile.mkstemp(prefix=".ctxsim-probe.", dir=folder)
        os.close(fd)
        os.unlink(tmp)
    except OSError as e:
        raise _bad(f"{flag} {dest}: cannot write in {folder}: {e.strerror or e}") from None


def distinct(**outputs: str | Path | None) -> None:
    """No two outputs of one command are the same file."""
    seen: dict[Path, str] = {}
    for flag, dest in outputs.items():
        if dest is None or str(dest) == "-":
            continue
        p = Path(dest).resolve()
        if p in seen:
            raise _bad(f"--{flag.replace('_', '-')} {dest}: the same file as --{seen[p].replace('_', '-')}")
        seen[p] = flag


def inside(a: Path, folder: Path) -> bool:
    """``a`` is inside ``folder`` (or is it), real paths compared (a folder a run clears must not hold
    its inputs or outputs)."""
    try:
        ra, rf = a.resolve(), folder.resolve()
        return ra == rf or rf in ra.parents
    except OSError:
        return False


def _same(a: Path, b: Path) -> bool:
    """``a`` is ``b``, or inside ``b`` when it is a folder (existing or not: an existing output
    folder inside an input folder was let through, and its traces read as sessions next time)."""
    try:
        if a.exists() and b.exists() and a.samefile(b):
            return True
        ra, rb = a.resolve(), b.resolve()
        return ra == rb or rb in ra.parents   # an output inside a source folder
    except OSError:
        return False


def atomic_write(path: str | Path, write: Callable[[Path], None], flag: str = "") -> None:
    """``write(tmp)`` to a temporary file beside ``path``, renamed into place when it succeeded
    (:func:`ctxsim.harness.files.atomic.write`: the umask honoured, nothing left on failure); an OSError is
    bad input naming the output: a full disk, a folder removed meanwhile."""
    from ctxsim.harness.files import atomic

    try:
        atomic.write(path, write)
    except atomic.WriteError as e:
        raise _bad(f"{flag + ' ' if flag else ''}{e}") from None


def atomic_write_text(path: str | Path, text: str, flag: str = "") -> None:
    atomic_write(path, lambda p: p.write_text(text, encoding="utf-8"), flag)


def price_table(models_file: str | Path | None):
    """The price table with ``--models`` (or ``CTXSIM_MODELS``) merged in, checked before any work: a
    missing, malformed or out-of-bounds file is bad input in one line (its message names the flag or
    the variable itself)."""
    from ctxsim.harness.provider.models import load_table

    try:
        return load_table(models_file)
    except ValueError as e:
        raise _bad(str(e)) from None
