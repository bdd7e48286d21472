"""``kill -9`` of a sweep's main process (issue 31, case 3): its pool workers die with it instead
of running on as orphans; SIGHUP / SIGQUIT end a command like SIGTERM (its ``finally`` runs)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
GRID = '''traces = ["preset:short"]
preset_set = {calls = 200}   # long enough that the signal lands mid-sweep, not as it exits, on a loaded machine too
seeds = [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23]
[[strategies]]
name = "novacode"
set = {memory = false}
'''

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")


def _children(pid: int) -> list[int]:
    out = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                fields = (d / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == pid:
                out.append(int(d.name))
    return out


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def _sweep(tmp_path: Path) -> subprocess.Popen:
    (tmp_path / "g.toml").write_text(GRID)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.Popen([sys.executable, "-c", "import sys; from ctxsim.harness.cli import main; sys.exit(main())", "sweep", str(tmp_path / "g.toml"), "--out",
                             str(tmp_path / "sw"), "--workers", "2", "--no-progress"], cwd=tmp_path, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, preexec_fn=_default_signals)


def _default_signals() -> None:
    """The sweep starts with the signals' default dispositions: a suite run under ``nohup`` (SIGHUP
    ignored) or as a background job of a shell without job control (SIGQUIT ignored) hands the
    ignored ones down, and a command rightly keeps a signal its caller chose to ignore (the CLI
    installs its handler only over the default), so the test would send a signal nobody hears."""
    for name in ("SIGTERM", "SIGHUP", "SIGQUIT"):
        signal.signal(getattr(signal, name), signal.SIG_DFL)


def _wait_for(cond, limit_s: float = 120.0) -> bool:
    t0 = time.monotonic()
    while time.monotonic() - t0 < limit_s:
        if cond():
            return True
        time.sleep(0.2)
    return False


def test_kill_9_of_a_sweep_takes_its_workers_with_it(tmp_path):
    p = _sweep(tmp_path)
    workers: list[int] = []
    try:
        assert _wait_for(lambda: len(_children(p.pid)) >= 2), "the pool never started"
        workers = _children(p.pid)
        os.kill(p.pid, signal.SIGKILL)
        p.wait()
        assert _wait_for(lambda: not any(_alive(w) for w in workers), 30), "orphaned pool workers"
    finally:
        for w in workers:
            if _alive(w):
                os.kill(w, signal.SIGKILL)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT])
def test_a_terminating_signal_stops_the_workers_and_exits_128_plus_sig(tmp_path, sig):
    p = _sweep(tmp_path)
    workers: list[int] = []
    try:
        assert _wait_for(lambda: len(_children(p.pid)) >= 2), "the pool never started"
        workers = _children(p.pid)
        assert p.poll() is None, "the sweep ended before the signal could be sent (give it more work)"
        p.send_signal(sig)
        assert p.wait(timeout=60) == 128 + sig
        assert _wait_for(lambda: not any(_alive(w) for w in workers), 30)
        assert not list((tmp_path / "sw").rglob("*.tmp*"))   # no temporary file left behind
    finally:
        if p.poll() is None:
            p.kill()
        for w in workers:
            if _alive(w):
                os.kill(w, signal.SIGKILL)


def test_a_worker_that_dies_is_a_failed_row_and_exit_1(tmp_path, monkeypatch):
    """A pool worker killed mid-run (OOM killer, a segfault in a C extension): its run, and the
    runs the broken pool can no longer do, are failure rows in the results; the sweep says how
    many and exits 1 (before: a BrokenProcessPool traceback)."""
    from ctxsim.harness.model import trace as tr
    from ctxsim.harness.replay import engine
    from ctxsim.harness.sweep import grid as sweep
    from ctxsim.harness.synth import generate, load_preset

    from tests.fuzz.judge import run_cli

    t = tmp_path / "t.jsonl"
    tr.write(generate(load_preset("short", ["calls=6"]), 1), t)
    g = tmp_path / "g.toml"
    g.write_text(f'traces = ["{t}"]\nseeds = [0, 1, 2]\n[[strategies]]\nname = "append_only"\n')
    real = engine.replay

    def dies_on_seed_1(trace, strategy, params, cfg, *a, **k):
        if cfg.seed == 1:
            os._exit(9)
        return real(trace, strategy, params, cfg, *a, **k)

    monkeypatch.setattr(engine, "replay", dies_on_seed_1)
    o = run_cli(["sweep", str(g), "--out", str(tmp_path / "sw"), "--workers", "2", "--no-progress"])
    assert o.exception == "" and o.status == 1, (o.exception, o.stderr)
    df = sweep.load_results(tmp_path / "sw")
    assert len(df) == 3 and "worker process died" in " ".join(df["error"])
    assert "runs failed" in o.stderr
