"""User text in report.md (issue 31, case 8): labels and titles carrying HTML or a javascript:
link are shown, not run, in a Markdown viewer that renders raw HTML."""

from __future__ import annotations

from ctxsim.harness.model import trace as tr
from ctxsim.harness.synth import generate, load_preset

from tests.fuzz.judge import run_cli

HOSTILE = "<img src=x onerror=alert(1)><script>alert(2)</script>[x](javascript:alert(3))"


def test_escape_by_hand():
    from ctxsim.harness.report.mdtext import escape

    assert escape("<b>`<b>`</b>") == "&lt;b&gt;`<b>`&lt;/b&gt;"       # a code span is left as it is
    assert escape("[x](javascript:1)") == "[x]\\(javascript:1)"
    assert escape("retention [0.52, 0.57] **best** `novacode`") == "retention [0.52, 0.57] **best** `novacode`"


def test_a_hostile_label_and_title_are_inert_in_report_md(tmp_path):
    t = tmp_path / "t.jsonl"
    tr.write(generate(load_preset("short", ["calls=8"]), 1), t)
    g = tmp_path / "g.toml"
    g.write_text(f'traces = ["{t}"]\nseeds = [0]\n[[strategies]]\nname = "append_only"\nlabel = """{HOSTILE}"""\n')
    assert run_cli(["sweep", str(g), "--out", str(tmp_path / "sw"), "--workers", "1", "--no-progress"]).status == 0
    o = run_cli(["report", str(tmp_path / "sw"), "--out", str(tmp_path / "rep"), "--title", HOSTILE])
    assert o.status == 0, o.stderr
    md = (tmp_path / "rep" / "report.md").read_text()
    assert "&lt;script&gt;" in md                       # the label is there, as text
    outside = "".join(md.split("`")[::2])               # text outside code spans
    assert "<script" not in outside and "<img" not in outside and "](javascript" not in outside
