"""ctxsim as an installed tool (issue 32): data found through ctxsim.harness.files.bundled, the optional parts behind
extras with a one-line message, the tokenizer choice, --version, calibrate-summariser's paths.
The wheel itself is built and run outside the checkout by .ci/wheel-check."""

import ast
import sys
from pathlib import Path

import pytest
from ctxsim.harness.cli import main
from ctxsim.harness.files import bundled

ROOT = Path(__file__).resolve().parents[1]


def test_in_a_checkout_the_repository_folders_are_used():
    assert bundled.in_checkout()
    assert bundled.presets_dir() == ROOT / "traces" / "presets"
    assert bundled.trace_schema() == ROOT / "traces" / "trace.schema.json"
    assert bundled.example_sweep("demo") == ROOT / "sweeps" / "demo.toml"
    assert bundled.example_sweep("demo.toml") == ROOT / "sweeps" / "demo.toml"
    assert bundled.example_sweep("../sweeps/demo") is None and bundled.example_sweep("nope") is None
    assert bundled.example_sweeps() == ["demo", "example", "thresholds"]


def test_setup_maps_exactly_the_folders_bundled_reads():
    tree = ast.parse((ROOT / "setup.py").read_text(encoding="utf-8"))
    mapped = next(ast.literal_eval(n.value) for n in tree.body
                  if isinstance(n, ast.Assign) and n.targets[0].id == "MAPPED")
    data = "ctxsim.harness.data."
    assert {k[len(data):]: v for k, v in mapped.items() if k.startswith(data) and "." not in k[len(data):]} == bundled.FOLDERS
    assert mapped["ctxsim.harness"] == "harness" and mapped["ctxsim.strategies"] == "strategies"   # issue 32
    assert all((ROOT / v).is_dir() for v in mapped.values())


def test_a_missing_data_folder_is_named(monkeypatch, tmp_path):
    monkeypatch.setattr(bundled, "REPO", tmp_path)
    with pytest.raises(bundled.MissingData, match="traces/ is missing from this install"):
        bundled.presets_dir()


def test_shared_logs_only_from_a_checkout(monkeypatch):
    monkeypatch.setattr(bundled, "in_checkout", lambda: False)
    assert bundled.shared_logs("claude-code") is None


def test_require_names_the_extra(monkeypatch):
    from ctxsim.harness.files.extras import MissingExtra, require

    assert require("live", "json") is sys.modules["json"]
    with pytest.raises(MissingExtra) as e:
        require("dask", "no_such_module_ctxsim.sub")
    assert str(e.value) == ("no_such_module_ctxsim.sub is not installed: this needs ctxsim's [dask] extra "
                            "(pip install 'ctxsim[dask]')")


def test_require_does_not_hide_a_broken_import_inside_an_installed_module(tmp_path, monkeypatch):
    from ctxsim.harness.files.extras import require

    (tmp_path / "ctxsim_broken_mod.py").write_text("import ctxsim_not_there_either\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ModuleNotFoundError) as e:
        require("live", "ctxsim_broken_mod")
    assert e.value.name == "ctxsim_not_there_either"


def test_a_missing_extra_is_a_user_error_naming_it(monkeypatch):
    import ctxsim.harness.files.extras as ex
    from ctxsim.harness.cli import _is_user_error
    from ctxsim.harness.provider.tokenizer import Tokenizer

    def missing(extra, module):
        raise ex.MissingExtra(f"{module} is not installed: this needs ctxsim's [{extra}] extra "
                              f"(pip install 'ctxsim[{extra}]')")

    monkeypatch.setattr(ex, "require", missing)
    with pytest.raises(ex.MissingExtra, match=r"ctxsim\[claude-tokenizer\]") as e:
        Tokenizer("claude")
    assert _is_user_error(e.value)   # exit 2 with the message, no traceback


def test_tokenizers_count_with_their_own_vocabulary_and_cache_per_tokenizer():
    from ctxsim.harness.cli import _parser
    from ctxsim.harness.model.conversation import Block
    from ctxsim.harness.provider.tokenizer import BACKENDS, Tokenizer

    tok_opt = next(a for a in _parser()._actions if a.dest == "tokenizer")
    assert list(tok_opt.choices) == list(BACKENDS)
    cl, cla = Tokenizer("cl100k"), Tokenizer("claude")
    assert cl.count("hello world") == 2 and cla.count("hello world") == 2
    # cl100k splits digits in threes (123|456|789|012|345|678|90), the Claude vocabulary in runs
    # (123456789|0123456|7890)
    text = "12345678901234567890"
    assert (cl.count(text), cla.count(text)) == (7, 3)
    b = Block.text_block(text)
    assert (cl.block(b), cla.block(b), cl.block(b)) == (cl.count(text), cla.count(text), cl.count(text))


def test_an_unknown_tokenizer_is_refused(monkeypatch):
    from ctxsim.harness.provider.tokenizer import UnknownTokenizer, get_tokenizer

    monkeypatch.setenv("CTXSIM_TOKENIZER", "gpt2")
    with pytest.raises(UnknownTokenizer, match="known: cl100k, claude"):
        get_tokenizer()


def test_version(capsys):
    with pytest.raises(SystemExit) as e:
        main(["--version"])
    assert e.value.code == 0
    import tomllib

    want = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["version"]
    assert capsys.readouterr().out == f"ctxsim {want}\n"


def test_fidelity_help_says_30_percent(capsys):
    with pytest.raises(SystemExit):
        main(["fidelity", "--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert "first 30% of calls" in out and "%%" not in out


def test_calibrate_summariser_writes_into_the_user_data_folder_when_installed(monkeypatch, tmp_path):
    from ctxsim.harness.cli import calibrate_summariser as cs

    packaged = ROOT / "harness" / "data" / "summary_survival.json"
    assert cs.default_output(packaged) == packaged           # a checkout: `make calibration` refits the committed file
    monkeypatch.setattr(bundled, "in_checkout", lambda: False)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path))
    assert cs.default_output(packaged) == tmp_path / "ctxsim" / "summary_survival.json"


def test_calibrate_summariser_without_logs_outside_a_checkout_says_so(monkeypatch, capsys):
    monkeypatch.setattr(bundled, "in_checkout", lambda: False)
    assert main(["calibrate-summariser"]) == 2
    err = capsys.readouterr().err
    assert "no LOG given" in err and "only when run from a ctxsim checkout" in err


def test_the_spec_in_docs_is_the_projects_spec():
    shared = ROOT / ".." / "shared" / "spec" / "novacode.md"
    if not shared.exists():
        pytest.skip("../shared/spec not present")
    assert (ROOT / "docs" / "spec" / "novacode.md").read_text(encoding="utf-8") == shared.read_text(encoding="utf-8")
