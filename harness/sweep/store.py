"""A sweep's results store: one SQLite database under ``--out`` (issue 44).

``DIR/results.sqlite`` holds the grid a sweep was asked for (each entry's label and run key), one
row per finished run (its flat metrics as JSON, so a value keeps its type: ``True`` and ``"auto"``
in one column), the run's per-probe scores and per-call rows (Parquet bytes), and what the sweep
ran under. Only the coordinating process writes it, one transaction per finished run, in WAL mode
(a reader sees whole runs while a sweep goes on); workers return their rows and never touch
``--out``. A sweep that ends puts the database back in rollback-journal mode, so the finished store
is one file that a report can read from a read-only folder.

One sweep at a time: :class:`SweepLock` holds ``DIR/.sweep.lock`` (``flock``) for the sweep's life.
The kernel releases it when its process dies, even by ``kill -9``; the file then still names the
dead process, and the next sweep takes it over and says so.

A report reads only from here (:meth:`Store.read`, a read-only connection) and writes nothing here.
What it cannot read is said, never silently dropped: rows that do not decode, runs whose per-probe
scores are missing, a database that fails SQLite's integrity check (:meth:`Store.health`).
"""

from __future__ import annotations

import io
import json
import math
import os
import socket
import sqlite3
import stat
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

FILE = "results.sqlite"
LOCK = ".sweep.lock"
SCHEMA = 1

_TABLES = """
CREATE TABLE IF NOT EXISTS meta(name TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS grid(pos INTEGER PRIMARY KEY, label TEXT NOT NULL, key TEXT NOT NULL, spec TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS runs(key TEXT PRIMARY KEY, base TEXT NOT NULL, env TEXT NOT NULL, failed INTEGER NOT NULL,
                                has_probes INTEGER NOT NULL, row TEXT NOT NULL, finished REAL NOT NULL);
CREATE TABLE IF NOT EXISTS probes(key TEXT PRIMARY KEY, data BLOB NOT NULL);
CREATE TABLE IF NOT EXISTS calls(key TEXT PRIMARY KEY, data BLOB NOT NULL);
"""


class StoreError(ValueError):
    """A store that cannot be used (in use, damaged, not a store): bad input, one line."""


# --- one sweep per folder -------------------------------------------------------------------------------

class SweepLock:
    """``DIR/.sweep.lock``, held (``flock``, exclusive) for a sweep's life. Its content names the
    holder (process, host, start) for the message a second sweep gets; a clean release empties it,
    so content found on acquiring is a holder that died (``taken_over``)."""

    def __init__(self, out: str | Path) -> None:
        self.path = Path(out) / LOCK
        self.fd: int | None = None
        self.taken_over = ""

    def acquire(self) -> SweepLock:
        import fcntl

        try:   # never through a symbolic link: the lock is truncated and written (a planted link to a file
            # elsewhere would empty it: the fresh hostile set of issue 44)
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0), 0o644)
        except OSError as e:
            raise StoreError(f"{self.path}: cannot be used as the sweep's lock "
                             f"({'a symbolic link' if self.path.is_symlink() else e.strerror or e}): "
                             "remove it, or give another --out") from None
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            os.close(fd)
            raise StoreError(f"{self.path}: not a regular file, so not a sweep's lock: remove it, or give another --out")
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _read_fd(fd)
            os.close(fd)
            raise StoreError(f"--out {self.path.parent} is in use by another sweep ({describe(holder)}): wait for it "
                             "to end, or give another --out") from None
        before = _read_fd(fd)
        if before.get("pid"):
            self.taken_over = f"{describe(before, since=False)}, no longer running"
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps({"pid": os.getpid(), "host": socket.gethostname(),
                                  "started": time.strftime("%Y-%m-%d %H:%M:%S")}).encode(), 0)
        self.fd = fd
        return self

    def release(self) -> None:
        if self.fd is None:
            return
        import fcntl

        try:
            os.ftruncate(self.fd, 0)   # a clean end: the next sweep finds no holder to name
        except OSError:
            pass
        fcntl.flock(self.fd, fcntl.LOCK_UN)
        os.close(self.fd)
        self.fd = None

    def __enter__(self) -> SweepLock:
        return self.acquire()

    def __exit__(self, *exc: Any) -> None:
        self.release()


def _read_fd(fd: int) -> dict[str, Any]:
    try:
        data = os.pread(fd, 4096, 0)
        return json.loads(data) if data.strip() else {}
    except (OSError, ValueError):
        return {}


def describe(holder: dict[str, Any], since: bool = True) -> str:
    if not holder.get("pid"):
        return "a process that did not say which"
    where = f" on {holder['host']}" if holder.get("host") and holder["host"] != socket.gethostname() else ""
    started = f", started {holder['started']}" if since and holder.get("started") else ""
    return f"process {holder['pid']}{where}{started}"


def holder(out: str | Path) -> dict[str, Any] | None:
    """Who holds ``out``'s lock now (None: no sweep is running there). Reads only: opens the lock
    file read-only, never creates it."""
    import fcntl

    try:
        fd = os.open(Path(out) / LOCK, os.O_RDONLY)
    except OSError:
        return None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return _read_fd(fd) or {"pid": None}
        fcntl.flock(fd, fcntl.LOCK_UN)
        return None
    finally:
        os.close(fd)


# --- the database ---------------------------------------------------------------------------------------

def _json_default(v: Any) -> Any:
    if hasattr(v, "item"):
        return v.item()
    if isinstance(v, (set, tuple)):
        return list(v)
    return str(v)


def encode_row(row: dict[str, Any]) -> str:
    return json.dumps(row, default=_json_default, allow_nan=True, sort_keys=True)


# The run metrics that are numbers (harness/replay/metrics.py, flattened by executors.flatten, and the
# row's timings): a stored row holding anything else there was edited or damaged after the sweep wrote
# it. It is named with its key and field and left out, never aggregated (issue 44, case 9e).
NUMERIC_FIELDS = frozenset({
    "cost_usd", "calls", "side_calls", "turns", "turns_failed", "rejected_requests", "retries", "cache_hit_rate",
    "overflows", "pairing_violations", "rejected_side_calls", "spills", "readbacks", "peak_context_tokens",
    "peak_main_context_tokens", "window", "seed", "failed_at_call", "run_s", "run_cpu_s", "retention.score",
    "retention.goal", "retention.probes", "retention.probes_not_reached"})
NUMERIC_PREFIXES = ("tokens.", "latency_s.", "compactions.", "estimator.", "by_kind.")


BOOL_FIELDS = frozenset({"completed"})   # a run row's flags: true or false, nothing read as one


def _cell(v: Any) -> Any:
    """A row's value as a table cell: a list or object (a parameter such as gemini_cli's ``mcp_tools
    = []``) as its JSON text, which groups and compares like any setting (a list cell ended make
    sweep's summary in pandas' "unhashable type: 'list'"); text that is no UTF-8 with its bytes escaped."""
    if isinstance(v, (list, dict)):
        return json.dumps(v, sort_keys=True)
    if isinstance(v, str) and not v.isascii():
        try:
            v.encode("utf-8")
        except UnicodeEncodeError:   # a file name of bytes that are not UTF-8 (surrogate escapes): shown with
            # those bytes escaped, since no table or Parquet file can hold the text (a sweep ended in pyarrow's error)
            return v.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    return v


def bad_value(row: Any) -> str | None:
    """Why a decoded run row cannot be used (None: it can): not an object, a metric that is not a
    finite number at least 0 (every metric of a run is a cost, a count, a share, a time or a score;
    ``null`` allowed: a metric a run did not measure), or a flag that is not true or false."""
    if not isinstance(row, dict):
        return f"a {type(row).__name__}, not a run row"
    for k, v in row.items():
        if v is None:
            continue
        if k in BOOL_FIELDS and not isinstance(v, bool):
            return f"{k} is {json.dumps(v)[:40]}, not true or false"
        if not (k in NUMERIC_FIELDS or k.startswith(NUMERIC_PREFIXES)):
            continue
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            return f"{k} is {json.dumps(v)[:40]}, not a number"
        if not math.isfinite(v) or v < 0:
            return f"{k} is {v}, not a finite number at least 0"
    return None


def frame_bytes(df: pd.DataFrame) -> bytes:
    buf = io.BytesIO()
    df.to_parquet(buf, index=False)
    return buf.getvalue()


def frame(data: bytes) -> pd.DataFrame:
    return pd.read_parquet(io.BytesIO(data))


@dataclass
class Resume:
    """What a sweep found in its store for the grid it was asked: the keys done (or failed), and
    what it must redo with the reason."""

    done: set[str] = field(default_factory=set)
    failed: set[str] = field(default_factory=set)
    damaged: set[str] = field(default_factory=set)        # rows that do not decode
    no_probes: set[str] = field(default_factory=set)      # runs whose per-probe scores are missing
    other_env: dict[str, str] = field(default_factory=dict)   # key -> how its earlier run's environment differed

    def notes(self) -> list[str]:
        out = []
        if self.damaged:
            out.append(f"{_runs(len(self.damaged))} unreadable (damaged?): redone")
        if self.no_probes:
            out.append(f"{_runs(len(self.no_probes))} without {_its(len(self.no_probes))} per-probe scores: redone")
        by: dict[str, int] = {}
        for why in self.other_env.values():
            by[why] = by.get(why, 0) + 1
        out += [f"{_runs(n)} done before under {why}: redone" for why, n in by.items()]
        return out


def _runs(n: int) -> str:
    return f"{n} run{'s' if n != 1 else ''}"


def _its(n: int) -> str:
    return "its" if n == 1 else "their"


@dataclass
class Health:
    """What a reader could not use in a store: said in a report's first lines."""

    integrity: str = ""                                  # SQLite's quick_check, when not "ok"
    damaged: list[str] = field(default_factory=list)     # run keys whose row does not decode / cannot be read
    why: dict[str, str] = field(default_factory=dict)    # key -> what is wrong with its row, where known
    no_probes: list[str] = field(default_factory=list)   # run keys whose per-probe scores are missing / unreadable
    running: dict[str, Any] | None = None                # a sweep is writing this store now


class Store:
    """A sweep's results database. :meth:`open` for the sweep (writes), :meth:`read` for a report."""

    def __init__(self, path: Path, db: sqlite3.Connection, writable: bool) -> None:
        self.path, self.db, self.writable = path, db, writable

    # --- opening ---

    @classmethod
    def open(cls, out: str | Path) -> Store:
        """The store of ``out`` for writing (created if absent), in WAL mode."""
        path = Path(out) / FILE
        for p in (path, *(path.with_name(path.name + x) for x in ("-wal", "-shm"))):
            if p.is_symlink():   # another sweep's store (or any file) reached through a link: never written
                raise StoreError(f"{p}: a symbolic link, so this --out would write into "
                                 f"{os.path.realpath(p)}: give another --out")
        try:
            db = sqlite3.connect(path, timeout=30, isolation_level=None)
            tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
            if tables and "meta" not in tables:   # someone's own database: never written into
                db.close()
                raise StoreError(f"{path}: a SQLite database that is not a ctxsim results store (tables "
                                 f"{', '.join(sorted(tables)[:3])}): give another --out")
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA synchronous=NORMAL")   # WAL: a finished transaction survives a killed process
            db.executescript(_TABLES)
            schema = db.execute("SELECT value FROM meta WHERE name = 'schema'").fetchone()
            if schema is None:
                db.execute("INSERT INTO meta VALUES ('schema', ?)", (str(SCHEMA),))
            elif int(schema[0]) != SCHEMA:
                raise StoreError(f"{path}: a results store of another ctxsim (schema {schema[0]}, this one reads "
                                 f"{SCHEMA}): give another --out")
        except sqlite3.DatabaseError as e:
            raise db_error(path, e, "opening it", "move it away or give another --out") from None
        return cls(path, db, True)

    @classmethod
    def read(cls, out: str | Path) -> Store:
        """The store of ``out``, read-only (nothing under ``out`` is created or changed)."""
        path = Path(out) / FILE
        if not path.is_file():
            raise StoreError(f"{out}: no sweep results ({FILE} not found)")
        try:
            db = sqlite3.connect(path.resolve().as_uri() + "?mode=ro", uri=True, timeout=30, isolation_level=None)
            db.execute("PRAGMA query_only=1")
            names = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        except sqlite3.DatabaseError as e:
            raise db_error(path, e, "opening it") from None
        if not {"grid", "runs"} <= names:
            raise StoreError(f"{path}: not a ctxsim results store (no grid or runs table)")
        return cls(path, db, False)

    def close(self) -> None:
        """Closes; a writer first folds the WAL back into the file (one file, readable read-only)."""
        if self.writable:
            try:
                self.db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
                self.db.execute("PRAGMA journal_mode=DELETE")
            except sqlite3.Error:
                pass
        self.db.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def _guard(self, what: str):
        return _Guard(self.path, what)

    # --- the grid ---

    def set_grid(self, entries: Sequence[tuple[str, str, dict[str, Any]]], config: dict[str, Any],
                 env: dict[str, str]) -> None:
        """The grid this sweep asks for: (label, key, spec) per entry, replacing an earlier grid's."""
        with self._guard("writing the grid"):
            self.db.execute("BEGIN IMMEDIATE")
            self.db.execute("DELETE FROM grid")
            self.db.executemany("INSERT INTO grid VALUES (?, ?, ?, ?)",
                                [(i, label, key, encode_row(spec)) for i, (label, key, spec) in enumerate(entries)])
            for name, value in (("config", config), ("env", env)):
                self.db.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)", (name, encode_row(value)))
            self.db.execute("COMMIT")

    def grid(self) -> list[tuple[str, str, dict[str, Any]]]:
        with self._guard("reading the grid"):
            rows = self.db.execute("SELECT label, key, spec FROM grid ORDER BY pos").fetchall()
        out = []
        for label, key, spec in rows:
            try:
                out.append((label, key, json.loads(spec)))
            except ValueError:
                out.append((label, key, {}))
        return out

    def meta(self, name: str) -> Any:
        try:
            row = self.db.execute("SELECT value FROM meta WHERE name = ?", (name,)).fetchone()
            return json.loads(row[0]) if row else None
        except (sqlite3.Error, ValueError):
            return None

    # --- runs ---

    def resume(self, keys: Iterable[str], bases: dict[str, str], env: dict[str, str]) -> Resume:
        """Which of ``keys`` are done; for the rest, why (damaged, per-probe scores missing, done
        under another environment: ``bases`` maps each key to its setting's digest)."""
        from ctxsim.harness.sweep import keys as run_keys

        keys = list(dict.fromkeys(keys))
        out = Resume()
        with self._guard("reading the runs"):
            have_probes = {k for (k,) in self.db.execute("SELECT key FROM probes")}
            stored = {}
            for k in keys:
                try:
                    r = self.db.execute("SELECT failed, has_probes, row FROM runs WHERE key = ?", (k,)).fetchone()
                except sqlite3.DatabaseError:
                    out.damaged.add(k)
                    continue
                if r is not None:
                    stored[k] = r
            wanted = {bases[k] for k in keys if k not in stored and k in bases}
            earlier: dict[str, str] = {}
            if wanted:
                for base, env_json in self.db.execute("SELECT base, env FROM runs"):
                    if base in wanted and base not in earlier:
                        earlier[base] = env_json
        for k, (failed, has_probes, row) in stored.items():
            try:
                bad = bad_value(json.loads(row))
            except ValueError:
                bad = "does not decode"
            if bad is not None:
                out.damaged.add(k)
                continue
            if has_probes and k not in have_probes:
                out.no_probes.add(k)
            elif failed:
                out.failed.add(k)
            else:
                out.done.add(k)
        for k in keys:
            if k in stored or k in out.damaged or bases.get(k) not in earlier:
                continue
            try:
                old = json.loads(earlier[bases[k]])
            except ValueError:
                old = {}
            out.other_env[k] = run_keys.difference(old, env)
        return out

    def write_run(self, key: str, base: str, env: dict[str, str], row: dict[str, Any],
                  probes: pd.DataFrame | None = None, calls: pd.DataFrame | None = None) -> None:
        """One finished run, whole: its row, per-probe scores and per-call rows, in one transaction."""
        row = {k: v for k, v in row.items() if k != "label"}   # the grid holds the labels
        has_probes = probes is not None and len(probes) > 0
        blobs = (frame_bytes(probes) if has_probes else None, frame_bytes(calls) if calls is not None else None)
        with self._guard(f"writing run {key}"):
            self.db.execute("BEGIN IMMEDIATE")
            try:
                self.db.execute("INSERT OR REPLACE INTO runs VALUES (?, ?, ?, ?, ?, ?, ?)",
                                (key, base, encode_row(env), int(bool(row.get("error"))), int(has_probes),
                                 encode_row(row), time.time()))
                for table, blob in zip(("probes", "calls"), blobs, strict=True):
                    if blob is None:
                        self.db.execute(f"DELETE FROM {table} WHERE key = ?", (key,))
                    else:
                        self.db.execute(f"INSERT OR REPLACE INTO {table} VALUES (?, ?)", (key, blob))
                self.db.execute("COMMIT")
            except BaseException:
                self.db.execute("ROLLBACK")
                raise

    def results(self, health: Health | None = None) -> pd.DataFrame:
        """One row per grid entry whose run is in the store (a run under each label the grid gives
        it), sorted by key then label. A row that cannot be read is left out and named in
        ``health.damaged`` (and ``df.attrs["damaged"]``)."""
        health = health if health is not None else Health()
        rows = []
        for label, key, _ in self.grid():
            try:
                with self._guard(f"reading run {key}"):
                    r = self.db.execute("SELECT row FROM runs WHERE key = ?", (key,)).fetchone()
            except StoreError:
                health.damaged.append(key)
                continue
            if r is None:
                continue
            try:
                row = json.loads(r[0])
                bad = bad_value(row)
            except ValueError:
                bad = "does not decode"
            if bad is not None:
                health.damaged.append(key)
                health.why.setdefault(key, bad)
                continue
            rows.append({"key": key, "label": label, **{k: _cell(v) for k, v in row.items() if k not in ("key", "label")}})
        health.damaged = list(dict.fromkeys(health.damaged))
        if not rows:
            df = pd.DataFrame()
        else:
            df = pd.DataFrame(rows).sort_values(["key", "label"], kind="stable").reset_index(drop=True)
        df.attrs["damaged"] = list(health.damaged)
        return df

    def _frames(self, table: str, keys: Iterable[str], bad: list[str] | None) -> dict[str, pd.DataFrame]:
        out = {}
        for k in dict.fromkeys(str(k) for k in keys):
            try:
                r = self.db.execute(f"SELECT data FROM {table} WHERE key = ?", (k,)).fetchone()
                if r is not None:
                    out[k] = frame(r[0])
            except Exception:  # noqa: BLE001 - a damaged page or blob: this run's table is missing, and said
                if bad is not None:
                    bad.append(k)
        return out

    def probes(self, keys: Iterable[str], health: Health | None = None) -> dict[str, pd.DataFrame]:
        """Per-probe scores of the runs that have them; one missing where the run made probes (or
        unreadable) is named in ``health.no_probes``."""
        keys = list(dict.fromkeys(str(k) for k in keys))
        bad: list[str] = []
        got = self._frames("probes", keys, bad)
        if health is not None:
            expected = set()
            for k in keys:
                try:
                    r = self.db.execute("SELECT has_probes FROM runs WHERE key = ?", (k,)).fetchone()
                except sqlite3.DatabaseError:
                    continue
                if r is not None and r[0]:
                    expected.add(k)
            health.no_probes = sorted(set(bad) | (expected - set(got)))
        return got

    def calls(self, keys: Iterable[str], bad: list[str] | None = None) -> dict[str, pd.DataFrame]:
        return self._frames("calls", keys, bad)

    def health(self) -> Health:
        """SQLite's quick check, and whether a sweep is writing the store now."""
        h = Health(running=holder(self.path.parent))
        try:
            res = [r[0] for r in self.db.execute("PRAGMA quick_check(5)")]
            if res != ["ok"]:   # one line: its messages hold line breaks and "*** in database main ***"
                lines = [x.strip() for r in res for x in str(r).splitlines()]
                h.integrity = "; ".join(x for x in lines if x and not x.startswith("***"))
        except sqlite3.DatabaseError as e:
            h.integrity = str(e)
        return h

    def keys(self) -> set[str]:
        with self._guard("reading the runs"):
            return {k for (k,) in self.db.execute("SELECT key FROM runs")}


class _Guard:
    """A database error inside it is a :class:`StoreError` naming the store (one line, exit 2)."""

    def __init__(self, path: Path, what: str) -> None:
        self.path, self.what = path, what

    def __enter__(self) -> None:
        return None

    def __exit__(self, tp, e, tb) -> bool:
        if isinstance(e, sqlite3.DatabaseError):
            raise db_error(self.path, e, self.what) from None
        return False


def db_error(path: Path, e: sqlite3.DatabaseError, what: str,
             fix: str = "run the sweep again into a new --out") -> StoreError:
    """One line for a database error: a full disk or another trouble of the machine (locked,
    read-only, I/O) as it is, anything else as a damaged store."""
    text = str(e)
    if isinstance(e, sqlite3.OperationalError) or "full" in text:
        if "full" in text:
            return StoreError(f"{path}: cannot write: No space left on device ({text}) while {what}")
        return StoreError(f"{path}: {text} while {what}")
    return StoreError(f"{path}: damaged ({text}) while {what}: {fix}")
