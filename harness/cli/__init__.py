"""The ``ctxsim`` command line. Each subcommand is one module of this package exposing
``register(subparsers)``, which adds its parser and sets ``func(args) -> int``.

Exit status: 0 success, 2 bad input (the message names the file and line, or the option),
1 internal error. Every outcome is said in one line on stderr: an internal error names the
exception and where it was raised (the strategy and the line of its code when a strategy raised
it), with the traceback under ``--debug``; a terminating signal says which one.

May import: every package.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import io
import os
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
    p.add_argument("--debug", action="store_true",
                   help="on an internal error (a bug of ctxsim or of a strategy), print the traceback, not one line")
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
_USER_ERRORS = {"ctxsim.harness.files.atomic": ("WriteError",), "ctxsim.harness.files.extras": ("MissingExtra",),
                "ctxsim.harness.fidelity.recorded": ("FidelityGap",), "ctxsim.harness.llm.live": ("LiveError",),
                "ctxsim.harness.provider.models": ("UnknownModelError", "ModelsFileError"),
                "ctxsim.harness.provider.tokenizer": ("UnknownTokenizer",),
                "ctxsim.harness.llm.response_store": ("StoreMiss",), "ctxsim.harness.replay.rundirs": ("SessionDirInUse",), "ctxsim.harness.model.trace": ("TraceError",),
                "ctxsim.strategies.registry": ("StrategyError",)}


# signals that end a command like SIGTERM: a closed terminal (HUP), Ctrl-backslash (QUIT)
EXIT_SIGNALS = ("SIGTERM", "SIGHUP", "SIGQUIT")


class Stopped(SystemExit):
    """The exit of a terminating signal (never taken for a strategy's own sys.exit). A sweep's run
    lets an exception with ``from_signal`` through (ctxsim.harness.sweep.executors.run_one): the
    user stopped the sweep, the run did not fail."""

    from_signal = True


def _exit_on_sigterm(command: str | None = None) -> None:
    """SIGTERM (a killed job, a CI timeout), SIGHUP and SIGQUIT exit through Python, so every
    ``finally`` runs: run directories are removed, partial outputs are not left behind. The exit
    is said in one line (before: exit 143 and not a word)."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        return

    def stop(signum, frame):
        prefix = f"ctxsim {command}" if command else "ctxsim"
        print(f"{prefix}: stopped by {signal.Signals(signum).name} (exit {128 + signum})", file=sys.stderr)
        raise Stopped(128 + signum)

    for name in EXIT_SIGNALS:
        sig = getattr(signal, name, None)
        if sig is not None and signal.getsignal(sig) in (signal.SIG_DFL, None):
            signal.signal(sig, stop)


def _show_warning(command: str | None):
    """``warnings.showwarning`` for a command: ctxsim's own warnings (a repair made while reading a
    file) as one line ``ctxsim CMD: warning: ...``, any other as Python prints it."""
    import warnings

    default = warnings.showwarning

    def show(message, category, filename, lineno, file=None, line=None):
        sj = sys.modules.get("ctxsim.harness.files.strictjson")
        if sj is not None and issubclass(category, sj.InputRepaired):
            print(f"ctxsim {command}: warning: {message}", file=sys.stderr)
        else:
            default(message, category, filename, lineno, file, line)

    return show


def internal_line(e: BaseException) -> str:
    """One line for an exception that is no user's fault: the exception and the line of code that
    raised it, and, when it came out of a strategy's code, that strategy (its spec, as ``--strategy``
    takes it) and the line of the strategy's own file."""
    import traceback

    frames = list(traceback.walk_tb(e.__traceback__))
    what = f"{type(e).__name__}: {one_line(str(e))}".rstrip(": ") if str(e) else type(e).__name__
    base = sys.modules.get("ctxsim.strategies.base")
    strategy = None
    if base is not None:
        for frame, _ in frames:
            obj = frame.f_locals.get("self")
            if isinstance(obj, base.Strategy):
                strategy = type(obj)
    site = frames[-1] if frames else None
    if strategy is not None:
        import inspect

        try:
            own = inspect.getsourcefile(strategy)
        except TypeError:
            own = None
        mine = [f for f in frames if own and f[0].f_code.co_filename == own]
        site = mine[-1] if mine else site
    at = f" at {site[0].f_code.co_filename}:{site[1]} in {site[0].f_code.co_name}" if site else ""
    import os

    harness = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep   # ctxsim.harness
    strategies = os.path.join(os.path.dirname(harness.rstrip(os.sep)), "strategies") + os.sep
    mod = sys.modules.get("ctxsim.strategies")
    if mod is not None and getattr(mod, "__file__", None):
        strategies = os.path.dirname(os.path.abspath(mod.__file__)) + os.sep
    here = (harness, strategies)
    if site and strategy is None and not site[0].f_code.co_filename.startswith(here):
        ours = [f for f in frames if f[0].f_code.co_filename.startswith(here)]
        if ours:   # raised inside a library (pandas ...): say which line of ctxsim called it
            at += f" (called from {ours[-1][0].f_code.co_filename}:{ours[-1][1]} in {ours[-1][0].f_code.co_name})"
    hint = "(--debug prints the traceback)"
    if strategy is not None:
        spec = f"{strategy.__module__}:{strategy.__qualname__}"
        return f"error: strategy {spec} raised {what}{at} {hint}"
    return f"internal error: {what}{at} {hint}"


def one_line(text: str, limit: int = 300) -> str:
    """A message's first line, at most ``limit`` characters, saying what was left out (an
    exception's text of several lines, or of thousands of characters, printed whole broke the one
    line an error is)."""
    lines = text.strip().splitlines() or [""]
    first = lines[0][:limit] + ("…" if len(lines[0]) > limit else "")
    return first + (f" (+{len(lines) - 1} more line{'s' if len(lines) > 2 else ''})" if len(lines) > 1 else "")


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
    for mod, names in _USER_ERRORS.items():
        m = sys.modules.get(mod)
        if m is not None and any(isinstance(e, getattr(m, name)) for name in names):
            return True
    return False


def main(argv: list[str] | None = None) -> int:
    import warnings

    parser = _parser()
    args = parser.parse_args(argv)
    _exit_on_sigterm(getattr(args, "command", None))
    if args.tokenizer:   # process-wide, inherited by sweep workers (ctxsim.harness.provider.tokenizer.ENV)
        import os

        os.environ["CTXSIM_TOKENIZER"] = args.tokenizer
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    with warnings.catch_warnings(), _reader_may_leave():
        warnings.showwarning = _show_warning(args.command)
        return _run(args)


class _Stdout:
    """Standard output whose reader may stop reading (``ctxsim compare ... --report DIR | head``): the lines
    nobody reads are dropped and the command goes on, so the files it was asked for (a report, ``--json
    PATH``, ``-o``) are still written; a broken pipe used to stop it there with exit 0 and no report."""

    def __init__(self, stream) -> None:
        self._stream, self.gone = stream, False

    def write(self, text: str) -> int:
        if not self.gone:
            try:
                return self._stream.write(text)
            except BrokenPipeError:
                self._leave()
        return len(text)

    def flush(self) -> None:
        if not self.gone:
            try:
                self._stream.flush()
            except BrokenPipeError:
                self._leave()

    def isatty(self) -> bool:
        return not self.gone and self._stream.isatty()

    def _leave(self) -> None:
        self.gone = True
        try:   # what the stream still buffers is flushed at exit: to nothing, not to the closed pipe
            null = os.open(os.devnull, os.O_WRONLY)
            os.dup2(null, self._stream.fileno())
            os.close(null)
        except (OSError, ValueError, io.UnsupportedOperation):
            pass

    def __getattr__(self, name: str):
        return getattr(self._stream, name)


@contextlib.contextmanager
def _reader_may_leave():
    out = sys.stdout
    sys.stdout = _Stdout(out)
    try:
        yield
    finally:
        sys.stdout = out


def _run(args) -> int:
    try:
        return int(args.func(args) or 0)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except SystemExit as e:   # a strategy that calls sys.exit() ended the run: said, exit 1 (was: exit 0, nothing)
        line = internal_line(e)
        if args.debug or isinstance(e, Stopped) or not line.startswith("error: strategy "):
            raise
        print(f"ctxsim {args.command}: {line}", file=sys.stderr)
        return 1
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
        if _is_user_error(e):
            print(f"ctxsim {args.command}: error: {e}", file=sys.stderr)
            return 2
        if args.debug:
            raise
        sj = sys.modules.get("ctxsim.harness.files.strictjson")
        if sj is not None and isinstance(e, sj.NotFinite):   # every input is checked: a bug, said so
            print(f"ctxsim {args.command}: internal error: {e} (a bug: every input is checked; the output was not "
                  "written)", file=sys.stderr)
            return 1
        print(f"ctxsim {args.command}: {internal_line(e)}", file=sys.stderr)
        return 1
    except BaseException as e:   # not an Exception (a strategy's own BaseException subclass): one line too
        if args.debug or isinstance(e, GeneratorExit):
            raise
        print(f"ctxsim {args.command}: {internal_line(e)}", file=sys.stderr)
        return 1
