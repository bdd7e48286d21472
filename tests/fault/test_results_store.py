"""A sweep's results store (issue 44, items 1, 5, 6, 7 and the Dask part of 9), tried as a hostile
user would: a resume after the prices, the tokenizer or ctxsim changed; two sweeps on one folder;
two labels for one setting; a damaged or partial store; a report on a read-only folder; a Dask
scheduler killed mid-sweep."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
from ctxsim.harness.model import trace as tr
from ctxsim.harness.synth import generate, load_preset

from tests.fuzz.judge import run_cli

REPO = Path(__file__).resolve().parents[2]
STORE = "results.sqlite"


@pytest.fixture
def grid(tmp_path):
    t = tmp_path / "t.jsonl"
    tr.write(generate(load_preset("short", ["calls=8"]), 2), t)
    cfg = tmp_path / "g.toml"
    cfg.write_text(f'traces = ["{t}"]\nmodels = ["claude-sonnet-4-6"]\nseeds = [0, 1]\n'
                   '[[strategies]]\nname = "append_only"\n')
    return cfg, tmp_path / "sw"


def sweep(cfg, out, *extra, pre=()):
    return run_cli([*pre, "sweep", str(cfg), "--out", str(out), "--workers", "1", "--no-progress", *extra])


def _clear_price_cache():
    from ctxsim.harness.provider import models

    models.load_table.cache_clear()


def _rows(out: Path) -> pd.DataFrame:
    from ctxsim.harness.sweep.store import Store

    with Store.read(out) as s:
        return s.results()


# --- item 1: a resume never mixes rows made under other prices, another tokenizer or another ctxsim ---

def test_a_resume_after_the_prices_changed_redoes_every_run_and_says_so(grid, tmp_path, monkeypatch):
    cfg, out = grid
    assert sweep(cfg, out).status == 0
    before = _rows(out)["cost_usd"].sort_values().to_numpy()
    from ctxsim.harness.provider.models import load_table

    spec = load_table().get("claude-sonnet-4-6").model_dump()
    prices = tmp_path / "tenfold.toml"
    tenfold = {**spec, **{k: spec[k] * 10 for k in ("input", "output", "cache_write_5m", "cache_write_1h", "cache_read")},
               "as_of": "2099-01-01", "source": "a test: ten times the price"}
    prices.write_text('[models."claude-sonnet-4-6"]\n' + "".join(
        f"{k} = {v!r}\n".replace("'", '"') for k, v in tenfold.items() if v is not None and k != "name"))
    monkeypatch.setenv("CTXSIM_MODELS", str(prices))
    _clear_price_cache()
    try:
        o = sweep(cfg, out)
        assert o.status == 0, o.stderr
        assert "2 runs in the grid, 0 already done, 2 to run" in o.stdout
        assert "2 runs done before under another price table: redone" in o.stdout
        after = _rows(out)["cost_usd"].sort_values().to_numpy()
        assert len(after) == 2 and after == pytest.approx(before * 10)
        rep = run_cli(["report", str(out), "--out", str(tmp_path / "rep"), "--no-ledger"])
        assert rep.status == 0, rep.stderr
        md = (tmp_path / "rep" / "report.md").read_text()
        assert "ten times the price" in md and "2099-01-01" in md   # only the prices the rows were billed at
    finally:
        monkeypatch.delenv("CTXSIM_MODELS")
        _clear_price_cache()


def test_a_resume_with_another_tokenizer_redoes_every_run_and_says_so(grid, monkeypatch):
    pytest.importorskip("anthropic_tokenizer")
    cfg, out = grid
    monkeypatch.delenv("CTXSIM_TOKENIZER", raising=False)
    assert sweep(cfg, out).status == 0
    monkeypatch.setenv("CTXSIM_TOKENIZER", "cl100k")   # main() sets it; monkeypatch puts it back
    o = sweep(cfg, out, pre=["--tokenizer", "claude"])
    assert o.status == 0, o.stderr
    assert "2 runs done before under another tokenizer (cl100k, now claude): redone" in o.stdout


def test_a_resume_under_another_ctxsim_version_redoes_every_run_and_says_so(grid, monkeypatch):
    cfg, out = grid
    assert sweep(cfg, out).status == 0
    from ctxsim.harness.sweep import keys

    monkeypatch.setattr(keys, "ctxsim_version", lambda: "99.0.0")
    o = sweep(cfg, out)
    assert o.status == 0, o.stderr
    assert "2 runs done before under another ctxsim version" in o.stdout and "now 99.0.0" in o.stdout
    again = sweep(cfg, out)   # and those new rows are the ones kept: nothing more to do
    assert "2 already done, 0 to run" in again.stdout


# --- item 5: one sweep per folder -----------------------------------------------------------------------

_HOLD = """
import sys, time
from ctxsim.harness.sweep.store import SweepLock
lock = SweepLock(sys.argv[1]).acquire()
print("locked", flush=True)
time.sleep(600)
"""


def _holder(out: Path) -> subprocess.Popen:
    out.mkdir(parents=True, exist_ok=True)
    p = subprocess.Popen([sys.executable, "-c", _HOLD, str(out)], stdout=subprocess.PIPE, text=True,
                         env={**os.environ, "PYTHONPATH": str(REPO)})
    assert p.stdout.readline().strip() == "locked"
    return p


def test_a_second_sweep_on_a_folder_in_use_is_refused_and_a_dead_holder_s_lock_is_taken_over(grid):
    cfg, out = grid
    p = _holder(out)
    try:
        o = sweep(cfg, out)
        assert o.status == 2 and o.exception == "", (o.stderr, o.exception)
        assert len(o.error_lines) == 1 and f"is in use by another sweep (process {p.pid}" in o.stderr
        assert not (out / STORE).exists()
        rep = run_cli(["report", str(out), "--no-ledger"])   # nor does a report write into it meanwhile
        assert rep.status == 2
    finally:
        p.send_signal(signal.SIGKILL)
        p.wait()
    o = sweep(cfg, out)   # kill -9 left its lock file: the next sweep takes it over
    assert o.status == 0, o.stderr
    assert f"process {p.pid}, no longer running" in o.stdout
    assert len(_rows(out)) == 2


def test_two_sweeps_started_together_on_one_folder_never_both_run_it(grid, tmp_path):
    """Two sweep processes started at once on one --out: while one holds the folder the other is
    refused in one line; if the first is done before the second starts (a loaded machine staggers
    their start-up), the second finds every run done and runs none. Either way the store holds the
    grid's 2 runs once. (The refusal itself is checked deterministically, against a held lock, by
    the test above; asserting it here failed under load when the two did not overlap.)"""
    cfg, out = grid
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    cmd = [sys.executable, "-c", "import sys; from ctxsim.harness.cli import main; sys.exit(main())", "sweep", str(cfg),
           "--out", str(out), "--workers", "1", "--no-progress"]
    ps = [subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(2)]
    res = [(p.wait(timeout=300), p.stdout.read(), p.stderr.read()) for p in ps]
    assert all("Traceback" not in r[2] for r in res), res
    if sorted(r[0] for r in res) == [0, 2]:
        refused = next(r for r in res if r[0] == 2)
        assert "is in use by another sweep" in refused[2]
    else:
        assert [r[0] for r in res] == [0, 0], res
        assert sum("2 already done, 0 to run" in r[1] for r in res) == 1, res
    assert len(_rows(out)) == 2


# --- item 6: a label asked for is a label kept --------------------------------------------------------------

def test_two_entries_with_the_same_settings_and_different_labels_both_survive(tmp_path):
    t = tmp_path / "t.jsonl"
    tr.write(generate(load_preset("short", ["calls=8"]), 2), t)
    cfg = tmp_path / "g.toml"
    cfg.write_text(f'traces = ["{t}"]\nseeds = [0]\n'
                   '[[strategies]]\nname = "append_only"\nlabel = "baseline"\n'
                   '[[strategies]]\nname = "append_only"\nlabel = "tuned"\n')
    o = sweep(cfg, tmp_path / "sw")
    assert o.status == 0, o.stderr
    assert "1 run in the grid (1 more entry asks for a setting already in it under another label: run once, kept " \
        "under each), 0 already done, 1 to run" in o.stdout
    df = _rows(tmp_path / "sw")
    assert sorted(df["label"]) == ["baseline", "tuned"]
    assert df["cost_usd"].nunique() == 1     # one replay, shown under both labels
    assert run_cli(["report", str(tmp_path / "sw"), "--no-ledger"]).status == 0
    md = (tmp_path / "sw" / "report.md").read_text()
    assert "baseline" in md and "tuned" in md


# --- item 7: a report reads only the store, writes only its --out, and names what is missing -----------

def _tree(d: Path) -> dict[str, tuple[int, int]]:
    return {str(p.relative_to(d)): (p.stat().st_size, p.stat().st_mtime_ns) for p in sorted(d.rglob("*"))}


def test_a_report_elsewhere_writes_nothing_in_the_sweep_folder_even_read_only(grid, tmp_path):
    cfg, out = grid
    assert sweep(cfg, out).status == 0
    before = _tree(out)
    modes = {p: p.stat().st_mode for p in [out, *out.rglob("*")]}
    for p in [*out.rglob("*"), out]:
        p.chmod(0o555 if p.is_dir() else 0o444)
    try:
        o = run_cli(["report", str(out), "--out", str(tmp_path / "rep"), "--no-ledger"])
        assert o.status == 0 and o.exception == "", (o.stderr, o.exception)
    finally:
        for p, m in modes.items():
            p.chmod(m)
    assert _tree(out) == before
    assert (tmp_path / "rep" / "report.md").exists()


def _first_lines(md: str, n: int = 12) -> str:
    return "\n".join(md.splitlines()[:n])


def test_missing_per_probe_scores_are_named_in_the_report_and_redone_on_resume(tmp_path):
    t = tmp_path / "t.jsonl"
    tr.write(generate(load_preset("short", ["calls=30"]), 2), t)
    cfg = tmp_path / "g.toml"
    cfg.write_text(f'traces = ["{t}"]\nseeds = [0, 1, 2]\n[[strategies]]\nname = "novacode"\n')
    out = tmp_path / "sw"
    assert sweep(cfg, out).status == 0
    with sqlite3.connect(out / STORE) as db:
        (key,) = db.execute("SELECT key FROM probes ORDER BY key LIMIT 1").fetchone()
        db.execute("DELETE FROM probes WHERE key = ?", (key,))
    o = run_cli(["report", str(out), "--no-ledger"])
    assert o.status == 0, o.stderr
    head = _first_lines((out / "report.md").read_text())
    assert "1 run has no per-probe scores" in head and "2 of 3 seeds" in head, head
    assert "1 run has no per-probe scores" in o.stderr
    again = sweep(cfg, out)
    assert "2 already done, 1 to run" in again.stdout and "1 run without its per-probe scores: redone" in again.stdout


def test_fewer_runs_than_asked_are_named_in_the_report_s_first_lines(grid):
    cfg, out = grid
    assert sweep(cfg, out, "--limit", "1").status == 0
    o = run_cli(["report", str(out), "--no-ledger"])
    assert o.status == 0, o.stderr
    head = _first_lines((out / "report.md").read_text())
    assert "**Partial results**" in head and "1 of 2 runs of the grid missing" in head, head
    assert "append_only" in head and "1 of 2 seeds" in head


def test_a_damaged_row_is_named_in_the_report_and_redone_on_resume(grid):
    cfg, out = grid
    assert sweep(cfg, out).status == 0
    with sqlite3.connect(out / STORE) as db:
        (key,) = db.execute("SELECT key FROM runs ORDER BY key LIMIT 1").fetchone()
        db.execute("UPDATE runs SET row = '{\"cost_usd\": tru' WHERE key = ?", (key,))
    o = run_cli(["report", str(out), "--no-ledger"])
    assert o.status == 0, o.stderr
    head = _first_lines((out / "report.md").read_text())
    assert "**Damaged results**" in head and "1 run could not be read" in head, head
    again = sweep(cfg, out)
    assert "1 already done, 1 to run" in again.stdout and "1 run unreadable (damaged?): redone" in again.stdout


def test_a_store_that_is_not_a_database_is_one_line_and_exit_2(grid):
    cfg, out = grid
    assert sweep(cfg, out).status == 0
    (out / STORE).write_bytes(b"this is not a database" * 100)
    for argv in (["report", str(out), "--no-ledger"], ["sweep", str(cfg), "--out", str(out), "--no-progress"]):
        o = run_cli(argv)
        assert o.status == 2 and o.exception == "", (argv, o.stderr, o.exception)
        assert len(o.error_lines) == 1 and f"{out / STORE}: damaged" in o.stderr


def test_someone_else_s_database_under_that_name_is_never_written_into(grid):
    cfg, out = grid
    out.mkdir()
    with sqlite3.connect(out / STORE) as db:
        db.execute("CREATE TABLE accounts(id INTEGER)")
    before = (out / STORE).read_bytes()
    o = sweep(cfg, out)
    assert o.status == 2 and len(o.error_lines) == 1 and "not a ctxsim results store" in o.stderr, o.stderr
    assert (out / STORE).read_bytes() == before


def test_a_store_damaged_inside_is_named_in_the_report_s_first_lines(tmp_path):
    t = tmp_path / "t.jsonl"
    tr.write(generate(load_preset("short", ["calls=30"]), 2), t)
    cfg = tmp_path / "g.toml"
    cfg.write_text(f'traces = ["{t}"]\nseeds = [0, 1, 2, 3, 4, 5]\n[[strategies]]\nname = "novacode"\n')
    out = tmp_path / "sw"
    assert sweep(cfg, out).status == 0
    db = (out / STORE).read_bytes()
    page = 4096
    # scribble over one page of the per-call tables (the last pages of the file)
    pos = len(db) - 3 * page
    (out / STORE).write_bytes(db[:pos] + b"\xff" * page + db[pos + page:])
    o = run_cli(["report", str(out), "--no-ledger"])
    assert o.exception == "", o.exception
    if o.status == 0:
        head = _first_lines((out / "report.md").read_text())
        assert "**Damaged results**" in head, head
    else:
        assert o.status == 2 and len(o.error_lines) == 1 and "damaged" in o.stderr


# --- item 9 (Dask): a scheduler killed mid-sweep ------------------------------------------------------------

DASK_GRID = '''traces = ["preset:short"]
preset_set = {calls = 60}
seeds = [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15]
[[strategies]]
name = "novacode"
set = {memory = false}
'''


def _wait(cond, limit_s: float = 120.0) -> bool:
    t0 = time.monotonic()
    while time.monotonic() - t0 < limit_s:
        if cond():
            return True
        time.sleep(0.2)
    return False


def _count(out: Path) -> int:
    try:
        with sqlite3.connect(f"file:{out / STORE}?mode=ro", uri=True, timeout=1) as db:
            return db.execute("SELECT count(*) FROM runs").fetchone()[0]
    except sqlite3.Error:
        return 0


def test_a_dask_scheduler_killed_mid_sweep_is_one_line_and_its_worker_writes_nothing_after(tmp_path):
    pytest.importorskip("distributed")
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    sfile = tmp_path / "scheduler.json"
    sched = subprocess.Popen([sys.executable, "-m", "distributed.cli.dask_scheduler", "--host", "127.0.0.1", "--port", "0",
                              "--no-dashboard", "--scheduler-file", str(sfile)], env=env, cwd=tmp_path,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    worker = None
    try:
        assert _wait(lambda: sfile.exists() and sfile.stat().st_size > 0, 60)
        import json

        address = json.loads(sfile.read_text())["address"]
        worker = subprocess.Popen([sys.executable, "-m", "distributed.cli.dask_worker", address, "--nthreads", "1",
                                   "--no-dashboard", "--nworkers", "1"], env=env, cwd=tmp_path,
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        (tmp_path / "g.toml").write_text(DASK_GRID)
        out = tmp_path / "sw"
        client = subprocess.Popen([sys.executable, "-c", "import sys; from ctxsim.harness.cli import main; sys.exit(main())",
                                   "sweep", str(tmp_path / "g.toml"), "--out", str(out), "--executor", "dask",
                                   "--scheduler", address, "--no-progress"], env=env, cwd=tmp_path,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        assert _wait(lambda: _count(out) >= 1, 240), "no run finished"
        assert client.poll() is None, "the sweep ended before the scheduler could be killed"
        sched.send_signal(signal.SIGKILL)
        sched.wait()
        status = client.wait(timeout=120)
        err = client.stderr.read()
        assert status == 2 and "Traceback" not in err and "CancelledError" not in err, err
        lines = [x for x in err.splitlines() if x.strip()]
        assert len(lines) == 1 and "the Dask scheduler" in lines[0] and "finished runs are kept" in lines[0], err
        after = _tree(out)
        time.sleep(8)   # the worker may still be replaying: nothing of it lands in --out
        assert _tree(out) == after
        assert not list(out.rglob("*.parquet.tmp*")) and not (out / "runs").exists()
    finally:
        for p in (worker, sched):
            if p is not None and p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()


def test_a_resume_after_the_replay_code_changed_redoes_every_run_and_says_so(grid, monkeypatch):
    """A checkout's version does not move when a strategy or the engine is edited: the code's own
    digest does, and a resume redoes the runs."""
    cfg, out = grid
    assert sweep(cfg, out).status == 0
    from ctxsim.harness.sweep import keys

    monkeypatch.setattr(keys, "code_hash", lambda: "edited")
    o = sweep(cfg, out)
    assert "2 runs done before under another replay code (strategies, engine): redone" in o.stdout


def test_a_lock_or_store_planted_as_a_link_is_refused_and_nothing_outside_is_written(tmp_path):
    """The fresh hostile set of issue 44: ``<out>/.sweep.lock`` linked to a file elsewhere was
    truncated; ``<out>/results.sqlite`` linked to another sweep's store had its grid replaced."""
    from ctxsim.harness.sweep import store

    victim = tmp_path / "victim.txt"
    victim.write_text("keep me")
    out = tmp_path / "o"
    out.mkdir()
    (out / store.LOCK).symlink_to(victim)
    with pytest.raises(store.StoreError, match="a symbolic link"):
        store.SweepLock(out).acquire()
    assert victim.read_text() == "keep me"
    other = tmp_path / "a"
    other.mkdir()
    store.Store.open(other).db.close()
    b = tmp_path / "b"
    b.mkdir()
    (b / store.FILE).symlink_to(other / store.FILE)
    with pytest.raises(store.StoreError, match="a symbolic link, so this --out would write into"):
        store.Store.open(b)


def test_a_users_strategy_file_edited_moves_its_runs_keys(tmp_path, monkeypatch):
    """The fresh hostile set of issue 44: a sweep over ``mystrat:Mine``, the file edited, the sweep
    again: "1 already done" kept the old rows (the code digest covers only ctxsim's code)."""
    import importlib

    from ctxsim.harness.sweep import keys
    from ctxsim.strategies.append_only import AppendOnly

    src = tmp_path / "mystrat_k44.py"
    src.write_text("from ctxsim.strategies.append_only import AppendOnly\n\nclass Mine(AppendOnly):\n    name = 'mine'\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    mod = importlib.import_module("mystrat_k44")
    before = keys.strategy_code(mod.Mine)
    src.write_text(src.read_text() + "\n    def breakpoints(self, history):\n        return ()\n")
    mod = importlib.reload(mod)
    after = keys.strategy_code(mod.Mine)
    assert before and after and before != after
    assert keys.strategy_code(AppendOnly) == ""   # ctxsim's own: in code_hash
    digest = [keys.setting_digest("mystrat_k44:Mine", {}, "h", None, None, True, 0, None, c) for c in (before, after)]
    assert digest[0] != digest[1]


def test_a_preset_generated_under_other_settings_is_not_reused(tmp_path):
    """The fresh hostile set of issue 44: ``preset_set = {calls = 20}`` changed to 10 kept the 20-call
    trace (reused by its name) and its run as done."""
    out = tmp_path / "sw"
    calls = []
    for n in (12, 6):
        cfg = tmp_path / "g.toml"
        cfg.write_text(f'traces = ["preset:short"]\npreset_seeds = [1]\nseeds = [0]\npreset_set = {{calls = {n}}}\n'
                       '[[strategies]]\nname = "append_only"\n')
        o = sweep(cfg, out)
        assert o.status == 0, o.stderr
        calls.append(sorted(_rows(out)["calls"].tolist()))
    assert calls[0] == [12] and 6 in calls[1]


def test_one_label_for_two_strategies_is_refused_in_one_line(tmp_path):
    t = tmp_path / "t.jsonl"
    tr.write(generate(load_preset("short", ["calls=8"]), 2), t)
    cfg = tmp_path / "g.toml"
    cfg.write_text(f'traces = ["{t}"]\nseeds = [0]\n[[strategies]]\nname = "novacode"\nlabel = "ours"\n'
                   '[[strategies]]\nname = "append_only"\nlabel = "ours"\n')
    o = sweep(cfg, tmp_path / "sw")
    assert o.status == 2 and len(o.error_lines) == 1, o.stderr
    assert "label 'ours' is given to novacode and to append_only" in o.stderr


def test_a_worker_under_other_prices_does_not_run_under_the_sweeps_key(tmp_path):
    """The fresh hostile set of issue 44: a Dask worker started with CTXSIM_MODELS at 10x prices stored
    its $3.18 under the client's key (the client's prices), and a local resume counted it as done."""
    from ctxsim.harness.sweep import executors, keys
    from ctxsim.harness.sweep.grid import RunSpec

    t = tmp_path / "t.jsonl"
    tr.write(generate(load_preset("short", ["calls=8"]), 2), t)
    here = keys.environment()
    spec = RunSpec("k1", "append_only", "append_only", (), str(t), "h", None, None, True, 0, False, (), "b",
                   tuple(sorted({**here, "prices": "someone-elses"}.items())))
    done = executors.run_one(spec)
    assert done.row["error"].startswith("EnvironmentMismatch: this worker runs under another price table")
    assert "cost_usd" not in done.row
    same = RunSpec(*[getattr(spec, f) for f in ("key", "strategy", "label", "params", "trace", "trace_hash", "model",
                                                  "window", "cache", "seed", "save_calls", "assume", "base")],
                   tuple(sorted(here.items())))
    assert executors.run_one(same).row["error"] == ""
