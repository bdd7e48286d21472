"""Results files keep one typed column per parameter when strategies disagree on its type (issue 28,
item 5): ``compare --report`` with codex (``compaction``: bool) beside observation_masking
(``compaction``: "auto") crashed in pyarrow."""

import pandas as pd
from ctxsim.harness.replay.engine import RunConfig, replay
from ctxsim.harness.report.build import write_report
from ctxsim.harness.sweep import columns
from hypothesis import given
from hypothesis import strategies as st

from tests.helpers_traces import Builder


def test_a_mixed_column_is_written_as_text_with_its_types_and_read_back():
    df = pd.DataFrame({"key": ["a", "b", "c", "d"], "param.compaction": [True, "auto", False, None],
                       "param.n": [1, 2.5, None, 4]})
    enc = columns.encode(df)
    assert enc["param.compaction"].tolist() == ["true", "auto", "false", None]
    assert enc["type.param.compaction"].tolist() == ["bool", "str", "bool", None]
    assert "type.param.n" not in enc  # ints and floats share a numeric column
    back = columns.decode(enc)
    assert back["param.compaction"].tolist() == [True, "auto", False, None]
    assert list(back.columns) == list(df.columns)


def test_a_string_that_reads_like_json_stays_a_string(tmp_path):
    df = pd.DataFrame({"param.x": ["true", True, "[1]", [1]]})
    enc = columns.encode(df)
    enc.to_parquet(tmp_path / "r.parquet")
    back = columns.decode(pd.read_parquet(tmp_path / "r.parquet"))
    assert back["param.x"].tolist() == ["true", True, "[1]", [1]]


values = st.one_of(st.none(), st.booleans(), st.integers(-10**9, 10**9), st.text(max_size=5),
                   st.lists(st.integers(0, 9), max_size=3))


@given(st.lists(values, min_size=1, max_size=8))
def test_encode_then_parquet_then_decode_is_the_identity(vals):
    import io

    buf = io.BytesIO()
    columns.encode(pd.DataFrame({"param.v": pd.Series(vals, dtype=object)})).to_parquet(buf)
    back = columns.decode(pd.read_parquet(io.BytesIO(buf.getvalue())))["param.v"].tolist()
    kinds = {type(v) for v in vals if v is not None}
    if len(kinds) > 1 and not kinds <= {int, float}:  # mixed: every value back with its own type
        assert [type(v) for v in back] == [type(v) for v in vals] and back == vals


def test_a_report_of_strategies_that_type_compaction_differently_is_written(tmp_path):
    b = Builder().user("keep going")
    for i in range(6):
        b.call(f"step {i}", [f"output {i}\n" * 20])
    t = b.call("done").build()
    # set, as a user sets them: a configuration's columns are the parameters set (a default is no column)
    given = {"novacode": {"compaction": True}, "codex": {"compaction": "auto"}, "truncate": {}}
    runs = [replay(t, s, given[s], RunConfig(window=200_000)) for s in ("novacode", "codex", "truncate")]
    kinds = {type(r.metrics["params"].get("compaction")) for r in runs[:2]}
    assert kinds == {bool, str}, kinds  # the premise: the same name, two types
    out = write_report(runs, tmp_path, target=0.0)
    back = columns.decode(pd.read_parquet(out / "runs.parquet"))
    got = dict(zip(back["strategy"], back["param.compaction"], strict=True))
    assert {k: type(v) for k, v in got.items() if k != "truncate"} == {"novacode": bool, "codex": str}
