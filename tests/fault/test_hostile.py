"""Hostile input (issue 31, cases 6 and 7): file names in ``meta.files``, tool_use ids that make
odd or long file names, strategy specs that are not MODULE:CLASS, ``inf`` in a price table. Each
is refused where it enters (exit 2, one line) or handled: never a traceback, no lost result."""

from __future__ import annotations

import errno
import json
from pathlib import Path

import pytest
from ctxsim.harness.model import trace as tr
from ctxsim.harness.model.conversation import Block, Message

from tests.fuzz.judge import run_cli
from tests.helpers_traces import header

BIG = 60_000   # over every strategy's spill / pointer threshold (N-SPILL-1: 50,000 characters)


def _trace(ids: list[str], size: int = BIG, files: dict | None = None) -> tr.Trace:
    h = header(meta={"files": files} if files is not None else {})
    events: list = [tr.UserEvent(t=1.0, text="read them")]
    t = 2.0
    uses = [tr.ToolUseContent(id=i, name="Read", input={"file_path": f"/src/f{k}.py"}) for k, i in enumerate(ids)]
    events.append(tr.AssistantEvent(t=t, content=[tr.TextContent(text="reading"), *uses]))
    for k, u in enumerate(uses):
        t += 0.5
        events.append(tr.ToolResultEvent(t=t, tool_use_id=u.id, content=chr(ord("a") + k) * size))
    events.append(tr.AssistantEvent(t=t + 1, content=[tr.TextContent(text="thinking")]))
    events.append(tr.UserEvent(t=t + 4000, text="go on"))   # an hour later: a cold cache
    events.append(tr.AssistantEvent(t=t + 4001, content=[tr.TextContent(text="done")]))
    return tr.validate_events(h, events, "hostile")


def _write(tmp_path: Path, trace: tr.Trace, name: str = "t.jsonl") -> Path:
    p = tmp_path / name
    tr.write(trace, p)
    return p


# --- meta.files --------------------------------------------------------------------------------

@pytest.mark.parametrize("key,words", [("home", "a folder of every run directory"),
                                       ("project", "a folder of every run directory"),
                                       ("a\x00b", "control character"),
                                       ("x" * 300, "300 bytes"),
                                       ("d/" + "é" * 130, "260 bytes")])
def test_meta_files_keys_the_run_folder_refuses_are_refused_by_validate_and_run(tmp_path, key, words):
    good = _write(tmp_path, _trace(["toolu_1"], size=10))
    lines = good.read_text().splitlines()
    h = json.loads(lines[0])
    h.setdefault("meta", {})["files"] = {key: "text"}
    bad = tmp_path / "bad.jsonl"
    bad.write_text("\n".join([json.dumps(h), *lines[1:]]) + "\n")
    for argv in (["validate", str(bad)], ["run", str(bad), "-s", "append_only", "-q"]):
        o = run_cli(argv)
        assert o.exception == "" and o.status == 2, (argv, o.exception, o.stderr)
        assert len(o.error_lines) == 1 and words in o.stderr and f"{bad}:1" in o.stderr, o.stderr


@pytest.mark.parametrize("value", [5, "Read", [""], [3], {"a": 1}])
def test_a_tool_result_whose_tools_loaded_are_not_tool_names_is_refused_with_its_line(tmp_path, value):
    """meta.tools_loaded (the tools a tool search loaded, which the recorded strategy re-keys on) must
    be a list of tool names: anything else is refused where it enters, naming the line (was: a
    TypeError from tuple(5) in the replay)."""
    lines = _write(tmp_path, _trace(["toolu_1"], size=10)).read_text().splitlines()
    at = next(i for i, x in enumerate(lines) if '"tool_result"' in x)
    ev = json.loads(lines[at])
    ev["meta"] = {tr.TOOLS_LOADED: value}
    lines[at] = json.dumps(ev)
    bad = tmp_path / "bad.jsonl"
    bad.write_text("\n".join(lines) + "\n")
    for argv in (["validate", str(bad)], ["run", str(bad), "-s", "recorded", "-q"]):
        o = run_cli(argv)
        assert o.exception == "" and o.status == 2, (argv, o.exception, o.stderr)
        assert "tools_loaded" in o.stderr and f"{bad}:{at + 1}" in o.stderr, o.stderr


def test_a_file_under_home_is_still_seeded(tmp_path):
    p = _write(tmp_path, _trace(["toolu_1"], size=10, files={"home/CLAUDE.md": "be brief"}))
    o = run_cli(["run", str(p), "-s", "novacode", "-q"])
    assert o.status == 0 and o.exception == "", o.stderr


# --- strategy specs ---------------------------------------------------------------------------------

@pytest.mark.parametrize("spec,words", [(":X", "MODULE:CLASS"), ("..foo:X", "MODULE:CLASS"), (".foo:X", "MODULE:CLASS"),
                                        ("os:", "MODULE:CLASS"), ("ctxsim.strategies.base:Strategy", "a base class"),
                                        ("ctxsim.strategies.templates:ThresholdCompactor", "a base class"),
                                        ("ctxsim.strategies.templates:PeerStrategy", "a base class")])
def test_strategy_specs_that_name_no_strategy_are_exit_2(tmp_path, spec, words):
    p = _write(tmp_path, _trace(["toolu_1"], size=10))
    o = run_cli(["run", str(p), "-s", spec, "-q"])
    assert o.exception == "" and o.status == 2 and len(o.error_lines) == 1 and words in o.stderr, o.stderr


# --- prices -----------------------------------------------------------------------------------------

@pytest.mark.parametrize("field", ["input", "output", "cache_read", "decode_tok_s", "ttft_base_s"])
@pytest.mark.parametrize("value", ["inf", "-inf", "nan"])
def test_inf_or_nan_in_a_price_table_is_refused(tmp_path, field, value):
    p = _write(tmp_path, _trace(["toolu_1"], size=10))
    row = {"provider": "anthropic", "window": 200000, "max_output": 32000, "input": 3.0, "output": 15.0,
           "cache_read": 0.3, "cache_write_5m": 3.75, "cache_write_1h": 6.0, field: value}
    body = "\n".join(f"{k} = {json.dumps(v) if isinstance(v, str) and k == 'provider' else v}" for k, v in row.items())
    (tmp_path / "m.toml").write_text(f'[models."my-model"]\n{body}\n')
    o = run_cli(["run", str(p), "-s", "append_only", "--models", str(tmp_path / "m.toml"), "--model", "my-model",
                 "-q", "--json", str(tmp_path / "o.json")])
    assert o.exception == "" and o.status == 2 and field in o.stderr, o.stderr
    assert not (tmp_path / "o.json").exists()


# --- spill names ------------------------------------------------------------------------------------

def test_spill_names_are_injective():
    from ctxsim.harness.files.filenames import safe_file_name

    ids = [".", " ", "..", "", "a/b", "a_b", "a b", "x" * 400, "x" * 401, "toolu_01", "é"]
    names = [safe_file_name(i) for i in ids]
    assert len(set(names)) == len(ids)
    assert names[5] == "a_b.txt" and names[9] == "toolu_01.txt"            # plain ids are kept as they are
    assert all(len(n.encode()) <= 255 and "/" not in n and n not in (".txt", "..txt") for n in names)


def test_dot_and_space_ids_spill_to_two_files_each_pointing_at_its_own_result(tmp_path):
    from ctxsim.strategies.novacode.spill import spill_message

    msg = Message("user", (Block.tool_result(".", "A" * BIG), Block.tool_result(" ", "B" * BIG)))
    out = spill_message(msg, tmp_path, threshold=50_000, budget=50_000)
    assert out.spilled == [".", " "]
    paths = [Path(b.meta["spilled"]) if hasattr(b, "meta") and "spilled" in (b.meta or {}) else None
             for b in out.message.blocks]
    files = sorted((tmp_path / "tool-results").iterdir())
    assert len(files) == 2 and {f.read_text()[0] for f in files} == {"A", "B"}
    for b, letter in zip(out.message.blocks, "AB", strict=True):
        named = [f for f in files if str(f) in b.text]
        assert len(named) == 1 and named[0].read_text()[0] == letter   # the placeholder names its own file
    del paths


def test_one_refused_name_does_not_skip_the_other_spills(tmp_path):
    from ctxsim.strategies.novacode.spill import spill_message, write_spill_file

    def writer(path: Path, content: str) -> None:
        if content.startswith("A"):
            raise OSError(errno.ENAMETOOLONG, "File name too long", str(path))
        write_spill_file(path, content)

    msg = Message("user", tuple(Block.tool_result(f"t{i}", c * BIG) for i, c in enumerate("ABC")))
    out = spill_message(msg, tmp_path, threshold=50_000, budget=50_000, write=writer)
    assert out.failed == ["t0"] and out.spilled == ["t1", "t2"] and out.not_tried == []


def test_a_failed_disk_still_skips_the_rest_of_the_message(tmp_path):
    from ctxsim.strategies.novacode.spill import spill_message

    def writer(path: Path, content: str) -> None:
        raise OSError(errno.EIO, "Input/output error", str(path))

    msg = Message("user", tuple(Block.tool_result(f"t{i}", c * BIG) for i, c in enumerate("ABC")))
    out = spill_message(msg, tmp_path, threshold=50_000, budget=50_000, write=writer)
    assert out.failed == ["t0"] and out.not_tried == ["t1", "t2"]


@pytest.mark.parametrize("strategy,sets", [
    ("novacode", []),
    ("on_demand_reading", ["elide_all_results=true", "min_pointer_chars=0", "keep_recent_reads=0",
                           "inline_read_tokens=100", "keep_read_tokens=0"]),
    ("tiered_budget", ["read_budget_chars=1000"]),
])
def test_hostile_tool_use_ids_run_clean(tmp_path, strategy, sets):
    ids = [".", " ", "x" * 400, "../../escape", "a\\b"]
    p = _write(tmp_path, _trace(ids))
    sd = tmp_path / "sess"
    argv = ["run", str(p), "-s", strategy, "--session-dir", str(sd), "-q", "--json", str(tmp_path / "o.json")]
    for s in sets:
        argv += ["--set", s]
    o = run_cli(argv)
    assert o.exception == "" and o.status == 0, (o.exception, o.stderr[-500:])
    written = [f for f in sd.rglob("*.txt") if f.stat().st_size >= BIG]
    assert written   # the results were written to files (the hostile names were used)
    assert all(sd.resolve() in f.resolve().parents for f in written)
    firsts = [f.read_text()[0] for f in written]
    assert len(firsts) == len(set(firsts))   # no result overwrote another
