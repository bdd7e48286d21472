import pytest
from ctxsim.harness.replay.engine import RunConfig, replay
from ctxsim.harness.report.build import write_report

from tests.report.sessions import WINDOW, dump_session

CONFIGS = [("append_only", {"cache_breakpoints": True}), ("cut_no_summary", {}), ("truncate", {}), ("novacode", {})]


@pytest.fixture(scope="session")
def dump_runs():
    t = dump_session()
    runs = [replay(t, s, p, RunConfig(window=w)) for w in (WINDOW, 1_000_000) for s, p in CONFIGS]
    return runs


@pytest.fixture(scope="session")
def dump_report(dump_runs, tmp_path_factory):
    out = tmp_path_factory.mktemp("report")
    write_report(dump_runs, out, target=0.5, title="dump session")
    return out
