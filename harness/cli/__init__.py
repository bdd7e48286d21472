"""The ``ctxsim`` command line. Each subcommand is one module of this package exposing
``register(subparsers)``, which adds its parser and sets ``func(args) -> int``.

Exit status: 0 success, 2 bad input (the message names the file and line, or the option),
1 internal error.

May import: every package.
"""

from __future__ import annotations

import argparse
import importlib
import sys

# the order of `ctxsim --help`
COMMANDS = ["synth", "importer", "probes", "validate", "strategies", "run", "compare", "fidelity", "sweep", "report",
            "check_strategy", "calibrate", "calibrate_summariser", "calibrate_recovery", "reproduce"]


class BadInput(Exception):
    """Raised by a subcommand for input the user must fix (exit 2)."""


def version() -> str:
    """The installed distribution's version (pyproject.toml's, when run from a checkout without one)."""
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as dist_version

    try:
        return dist_version("ctxsim")
    except PackageNotFoundError:
        import tomllib

        from ctxsim.harness.files import bundled

        pyproject = bundled.REPO / "pyproject.toml"
        return tomllib.loads(pyproject.read_text(encoding="utf-8"))["project"]["version"] if pyproject.is_file() \
            else "unknown"


class _Version(argparse.Action):
    """``--version``, looked up only when asked (importlib.metadata costs a tenth of a second)."""

    def __call__(self, parser, namespace, values, option_string=None):
        print(f"ctxsim {version()}")   # on stdout, as argparse's own version action
        parser.exit()


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="ctxsim",
        description="Replay coding-agent sessions through context strategies and measure cost, "
        "cache hit rate, latency and task retention.",
    )
    p.add_argument("--version", action=_Version, nargs=0, help="show the version and exit")
    p.add_argument("--tokenizer", choices=["cl100k", "claude"], default=None,
                   help="the provider's offline tokenizer for every count of this command (default cl100k, or "
                   "CTXSIM_TOKENIZER; claude: the anthropic-tokenizer package, extra [claude-tokenizer]; README, "
                   "'Which tokenizer'). A token scale is fitted for the tokenizer it was fitted with: import and "
                   "run with the same one")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMANDS:
        importlib.import_module(f"ctxsim.harness.cli.{name}").register(sub)
    return p


# exceptions that mean "bad input" (exit 2), by module: a module that was never imported cannot
# have raised one, so none is imported just to be caught (`ctxsim --help` stays light)
_USER_ERRORS = {"ctxsim.harness.files.atomic": "WriteError", "ctxsim.harness.files.extras": "MissingExtra", "ctxsim.harness.fidelity.recorded": "FidelityGap",
                "ctxsim.harness.llm.live": "LiveError", "ctxsim.harness.provider.models": "UnknownModelError",
                "ctxsim.harness.provider.tokenizer": "UnknownTokenizer", "ctxsim.harness.llm.response_store": "StoreMiss", "ctxsim.harness.model.trace": "TraceError",
                "ctxsim.strategies.registry": "StrategyError"}


# signals that end a command like SIGTERM: a closed terminal (HUP), Ctrl-backslash (QUIT)
EXIT_SIGNALS = ("SIGTERM", "SIGHUP", "SIGQUIT")


def _exit_on_sigterm() -> None:
    """SIGTERM (a killed job, a CI timeout), SIGHUP and SIGQUIT exit through Python, so every
    ``finally`` runs: run directories are removed, partial outputs are not left behind."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        return
    for name in EXIT_SIGNALS:
        sig = getattr(signal, name, None)
        if sig is not None and signal.getsignal(sig) in (signal.SIG_DFL, None):
            signal.signal(sig, lambda signum, frame: sys.exit(128 + signum))


def _disk_error(e: BaseException) -> str | None:
    """One line for an OSError of the file system (full disk, quota, read-only) that escaped a
    command, naming the path when the error has one; None for any other exception."""
    from ctxsim.harness.files.atomic import is_disk_error, reason

    if not is_disk_error(e):
        return None
    where = getattr(e, "filename", None)
    return f"{where}: cannot write: {reason(e)}" if where else f"cannot write: {reason(e)}"


def _is_user_error(e: BaseException) -> bool:
    if isinstance(e, BadInput):
        return True
    for mod, name in _USER_ERRORS.items():
        m = sys.modules.get(mod)
        if m is not None and isinstance(e, getattr(m, name)):
            return True
    return False


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    _exit_on_sigterm()
    if args.tokenizer:   # process-wide, inherited by sweep workers (ctxsim.harness.provider.tokenizer.ENV)
        import os

        os.environ["CTXSIM_TOKENIZER"] = args.tokenizer
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        return int(args.func(args) or 0)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0
    except Exception as e:
        live = sys.modules.get("ctxsim.harness.llm.live")
        if live is not None and isinstance(e, live.LiveUnavailable):   # the API is down: exit 1, said why
            print(f"ctxsim {args.command}: error: {e}", file=sys.stderr)
            return 1
        disk = _disk_error(e)
        if disk is not None:   # a full disk is the machine, not a bug: exit 2, one line
            print(f"ctxsim {args.command}: error: {disk}", file=sys.stderr)
            return 2
        if not _is_user_error(e):
            raise
        print(f"ctxsim {args.command}: error: {e}", file=sys.stderr)
        return 2
