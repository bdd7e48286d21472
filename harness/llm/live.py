"""Side calls answered by the real model, through the ``anthropic`` SDK (``--llm live``), or by a
store of recorded live answers with no network (``--llm replay``).

The simulated summariser, selector and judge rest on modelling assumptions; these backends replace
them with the model itself so the assumptions can be measured (``ctxsim calibrate``). They only
produce the *text* (and the usage the API reported) of a side call; the engine still validates,
bills, times and counts every call (``ctxsim.harness.llm.services``).

* Configuration comes from the environment, as for any Anthropic client: ``ANTHROPIC_API_KEY``,
  ``ANTHROPIC_BASE_URL`` (e.g. a proxy or the test suite's loopback server) and
  ``CTXSIM_LIVE_MODEL`` (default: the request's model, else ``claude-sonnet-4-6``);
  ``CTXSIM_LIVE_MAX_RETRIES`` and ``CTXSIM_LIVE_TIMEOUT`` (seconds) override the SDK's retry count
  and the per-call timeout. Keyword arguments override the environment.
* Retries are the SDK's own (exponential back-off, ``retry-after`` honoured, 429 / 5xx / 529
  retried). What is still failing after them is mapped onto the engine's failure model as
  :class:`~ctxsim.harness.llm.services.SideCallFailed`: a 400 "prompt is too long" is ``prompt_too_long`` (a failed
  compaction), 429 ``rate_limited``, 529 ``overloaded`` (both counted by NovaCode's breaker like any
  failed compaction), unpaired tool blocks ``pairing``, more than 4 ``cache_control`` markers
  ``too_many_breakpoints``, a timeout ``timeout``, anything else ``api_error``. A bad key, a
  forbidden or unknown model (401 / 403 / 404) is not a failed side call but a broken setup: it
  raises :class:`LiveError` and stops the run, instead of quietly opening a breaker.
* Each strategy sends its own prompt (``CallSpec.instructions``, plus ``CallSpec.sections`` when
  the prompt does not already name them) as the final user text after the conversation, so the
  call reads the conversation's cached prefix, as Claude Code's compaction calls do. The defaults
  below are used only when a strategy gives no prompt of its own.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from ctxsim.harness.llm.render import count_tokens_params, to_anthropic_params
from ctxsim.harness.llm.response_store import ResponseStore, restore_text
from ctxsim.harness.llm.services import (
    JUDGE,
    MEMORY_CONSOLIDATE,
    MEMORY_EXTRACT,
    MEMORY_SELECT,
    SUMMARY,
    VERIFY,
    BackendReply,
    CallSpec,
    LLMBackend,
    SideCallFailed,
)
from ctxsim.harness.model.conversation import Request, Usage

ENV_KEY = "ANTHROPIC_API_KEY"
ENV_BASE_URL = "ANTHROPIC_BASE_URL"
ENV_MODEL = "CTXSIM_LIVE_MODEL"
ENV_MAX_RETRIES = "CTXSIM_LIVE_MAX_RETRIES"
ENV_TIMEOUT = "CTXSIM_LIVE_TIMEOUT"
DEFAULT_LIVE_MODEL = "claude-sonnet-4-6"   # DESIGN.md / issue 2: the project's default model
ENV_MAX_FAILURES = "CTXSIM_LIVE_MAX_FAILURES"
# A hung API must fail a run within a minute with the defaults (issue 31): timeout × (1 + retries)
# plus the SDK's back-off (0.5 s, then up to 8 s; anthropic._constants) stays under 60 s.
# assumed: 25 s covers a summary call of the sizes strategies ask for (a few thousand tokens at
# the API's decode rate); longer ones need --llm-timeout. The SDK's own default (600 s × 3
# attempts) kept a run waiting half an hour per call.
DEFAULT_TIMEOUT_S = 25.0
DEFAULT_MAX_RETRIES = 1                    # assumed (the SDK's default is 2: 3 × 25 s would pass 60 s)
# assumed: a live run measures the live model; one side call the API failed (after the retries)
# is a run that did not measure it, so the run stops (exit 1, nothing written). A user who wants
# such failures counted as failed compactions, as the simulated failure model counts them, opts
# in with --llm-max-failures N > 1 (the run then stops only after N failures in a row).
DEFAULT_MAX_FAILURES = 1
# what says the API, not the request, failed (a prompt_too_long is the strategy's request)
API_DOWN_REASONS = frozenset({"api_error", "timeout", "overloaded", "rate_limited"})
JUDGE_MAX_TOKENS = 200                     # a cloze answer is a few words

Mode = Literal["simulated", "live", "replay"]
MODES: tuple[str, ...] = ("simulated", "live", "replay")


class LiveError(RuntimeError):
    """A live setup that cannot work (no key, bad key, unknown model): stops the run."""


class LiveUnavailable(RuntimeError):
    """The live API failed ``max_failures`` side calls in a row: the run stops (exit 1) rather
    than report numbers computed on failed compactions."""


# --- prompts ---------------------------------------------------------------------------------------

DEFAULT_INSTRUCTIONS: dict[str, str] = {
    SUMMARY: (
        "Your task is to write a detailed summary of the conversation above, so that the work can "
        "continue from the summary alone: the user's requests and intent, the decisions taken and why, "
        "the files and code involved, errors met and how they were fixed, constraints and preferences "
        "the user stated, what remains to do and what was being done last. Keep exact names, paths, "
        "numbers and identifiers. Do not call any tool; answer with the summary only."),
    VERIFY: (
        "Above is a conversation and, last, a summary of it. Check the summary against the "
        "conversation: list anything important it omits or gets wrong, then write the corrected "
        "summary in full. Do not call any tool."),
    MEMORY_SELECT: (
        "Above is the current conversation and a list of memory files with their descriptions. "
        "Select at most {max_memories} memories that will clearly help with the user's current "
        "request. Answer with the chosen file names, one per line, and nothing else; answer NONE if "
        "none is clearly useful."),
    MEMORY_EXTRACT: (
        "Extract from the recent conversation above what is worth remembering in future sessions: "
        "user preferences, feedback on how to work, project facts and conclusions, useful references. "
        "Write each as a block:\n---\nname: <short name>\ndescription: <one line>\ntype: "
        "user|feedback|project|reference\n---\n<body>\nAnswer NONE if nothing is worth keeping."),
    MEMORY_CONSOLIDATE: (
        "Above are memory files. Merge duplicates, drop what is stale or contradicted by newer "
        "entries, and write the resulting set in the same block format. Do not call any tool."),
}


def side_call_text(spec: CallSpec) -> str:
    """The final user text of a side call: the strategy's own prompt, else the default for its
    kind, with the required sections appended when the prompt does not name them all."""
    if spec.kind == JUDGE and not spec.instructions:
        fact = spec.params.get("fact")
        if not fact:
            raise ValueError("a judge call needs CallSpec.instructions or params['fact'] (the fact's text)")
        return cloze(str(fact))[0]
    text = spec.instructions or DEFAULT_INSTRUCTIONS.get(spec.kind, DEFAULT_INSTRUCTIONS[SUMMARY])
    if "{max_memories}" in text:
        text = text.replace("{max_memories}", str(spec.params.get("max_memories", 5)))
    return text + sections_addendum(text, spec.sections)


def sections_addendum(prompt: str, sections: Sequence[str]) -> str:
    """The list of required sections, when ``prompt`` does not name them all ('' otherwise)."""
    if not sections or all(s.lower() in prompt.lower() for s in sections):
        return ""
    listed = "\n".join(f"{i}. {s}" for i, s in enumerate(sections, 1))
    return f"\n\nUse exactly these sections, in this order, each under its own heading:\n{listed}"


def final_user_text(request: Request, spec: CallSpec) -> str | None:
    """What the backend appends to ``request``. The engine has already appended a strategy's own
    prompt as the final user message (``ctxsim.harness.replay.engine.Services.call``); then only the section list
    is added, when the prompt does not name the sections. With no prompt, the default for the kind."""
    msgs = request.messages
    if spec.instructions and len(msgs) and msgs[-1].role == "user" and msgs[-1].text == spec.instructions:
        return sections_addendum(spec.instructions, spec.sections).strip() or None
    return side_call_text(spec)


# --- the retention judge ------------------------------------------------------------------------------

_STOP = frozenset("the a an and or of to in on for with from that this these those is are was were be "
                  "been it its as at by not no but if then than into over under use uses using must "
                  "should will would can could have has had do does did".split())
_KEY_CHARS = re.compile(r"[0-9_./:\-]|[a-z][A-Z]")
_WORD = re.compile(r"[\w./:\-]+", re.UNICODE)


def key_tokens(text: str) -> list[str]:
    """The tokens that make a fact checkable: those with a digit or identifier punctuation
    (``_ . / - :``) or an inner capital; if none, its words of four letters or more that are not
    stop words. A summary that keeps all of them has kept the fact, however it is phrased."""
    words = [w.strip(".,;:!?()[]{}\"'`") for w in _WORD.findall(text)]
    words = [w for w in words if w]
    keys = [w for w in words if _KEY_CHARS.search(w)]
    if not keys:
        keys = [w for w in words if len(w) >= 4 and w.lower() not in _STOP]
    return keys or words


def normalise(text: str) -> str:
    return " ".join(text.casefold().split())


def cloze(fact: str) -> tuple[str, str]:
    """A fill-in-the-blank question for ``fact`` and its expected answer.

    The judge must *state* the fact, not recognise it: shown the fact, a model says "yes" to almost
    anything. So the most specific token (a key token, the longest first) is blanked out and the
    model is asked to fill it in from the conversation alone.
    """
    keys = key_tokens(fact)
    answer = max(keys, key=lambda w: (bool(re.search(r"\d", w)), len(w)))
    blanked = fact.replace(answer, "____", 1)
    prompt = (
        "Using only the conversation above (not general knowledge), fill in the blank:\n\n"
        f"{blanked}\n\nAnswer with the missing text only, or UNKNOWN if the conversation does not say.")
    return prompt, answer


@dataclass(frozen=True)
class JudgeVerdict:
    known: bool
    answer: str
    expected: str


def judge_answer(answer: str, expected: str) -> bool:
    a, e = normalise(answer), normalise(expected)
    return bool(e) and e in a and "unknown" not in a.split()[:1]


# --- usage and errors -----------------------------------------------------------------------------------

def usage_from_api(u: Mapping[str, Any], ttl_hint: str = "5m") -> Usage:
    """The API's usage object, normalised (N-CACHE-5). ``input_tokens`` excludes the cache counters
    already; the write is split by TTL from ``cache_creation`` when the API gives the split, else
    attributed to ``ttl_hint`` (the TTL of the request's breakpoints)."""
    created = int(u.get("cache_creation_input_tokens") or 0)
    split = u.get("cache_creation") or None
    if split:
        w5, w1 = int(split.get("ephemeral_5m_input_tokens") or 0), int(split.get("ephemeral_1h_input_tokens") or 0)
    else:
        w5, w1 = (0, created) if ttl_hint == "1h" else (created, 0)
    return Usage(input_uncached=int(u.get("input_tokens") or 0), cache_write_5m=w5, cache_write_1h=w1,
                 cache_read=int(u.get("cache_read_input_tokens") or 0), output=int(u.get("output_tokens") or 0))


def _ttl_hint(request: Request) -> str:
    return "1h" if request.breakpoints and all(b.ttl == "1h" for b in request.breakpoints) else "5m"


def _error_message(exc: Any) -> str:
    body = getattr(exc, "body", None)
    if isinstance(body, Mapping):
        err = body.get("error")
        if isinstance(err, Mapping) and err.get("message"):
            return str(err["message"])
    return str(getattr(exc, "message", "") or exc)


def failure_reason(status: int | None, message: str) -> str:
    """The engine's failure reason for an API error still failing after the SDK's retries."""
    m = message.lower()
    if status == 429:
        return "rate_limited"
    if status == 529 or "overloaded" in m:
        return "overloaded"
    if status in (400, 413) and ("prompt is too long" in m or "too many tokens" in m
                                 or "exceed context limit" in m or status == 413):
        return "prompt_too_long"
    if status == 400 and "cache_control" in m and ("maximum" in m or "4 blocks" in m):
        return "too_many_breakpoints"
    if status == 400 and ("tool_use" in m or "tool_result" in m):
        return "pairing"
    if status in (408, 504):
        return "timeout"
    return "api_error"


def _map_exception(exc: BaseException) -> SideCallFailed:
    import anthropic

    if isinstance(exc, anthropic.APITimeoutError):
        return SideCallFailed("timeout", str(exc))
    if isinstance(exc, anthropic.APIConnectionError):
        return SideCallFailed("api_error", f"connection: {exc}")
    if isinstance(exc, anthropic.APIStatusError):
        status, msg = exc.status_code, _error_message(exc)
        if status in (401, 403, 404):
            raise LiveError(f"live API refused the setup ({status}): {msg}. Check {ENV_KEY}, "
                            f"{ENV_BASE_URL} and {ENV_MODEL}.") from exc
        return SideCallFailed(failure_reason(status, msg), f"{status}: {msg}")
    if isinstance(exc, (anthropic.APIError, ValueError, TypeError, AttributeError, KeyError)):
        # a 200 whose body is not a Messages answer (a proxy's HTML page, truncated JSON)
        return SideCallFailed("api_error", f"unreadable answer: {type(exc).__name__}: {str(exc)[:200]}")
    raise exc


# --- backends -----------------------------------------------------------------------------------------------

def _env_int(name: str) -> int | None:
    v = os.environ.get(name)
    if v in (None, ""):
        return None
    try:
        return int(v)
    except ValueError:
        raise LiveError(f"{name}={v!r} is not an integer") from None


def _env_float(name: str) -> float | None:
    v = os.environ.get(name)
    if v in (None, ""):
        return None
    try:
        return float(v)
    except ValueError:
        raise LiveError(f"{name}={v!r} is not a number") from None


class _MessagesBackend:
    """What live and replay share: render the request, send it (or look it up), read the answer."""

    name = "messages"

    def __init__(self, model: str | None = None, temperature: float | None = None,
                 max_output_tokens: int | None = None) -> None:
        self._model = model or os.environ.get(ENV_MODEL) or None
        self.temperature = temperature
        self.max_output_tokens = max_output_tokens  # a cap over CallSpec.max_output_tokens (spend bound)
        self.calls = 0
        self.opaque_calls = 0          # side calls sent without the trace's opaque prompt prefix
        self.opaque_tokens_omitted = 0

    def model_for(self, request: Request) -> str:
        return self._model or request.model or DEFAULT_LIVE_MODEL

    def params(self, request: Request, spec: CallSpec) -> dict[str, Any]:
        max_tokens = JUDGE_MAX_TOKENS if spec.kind == JUDGE and not spec.instructions else spec.max_output_tokens
        if self.max_output_tokens:
            max_tokens = min(max_tokens, self.max_output_tokens)
        # an imported trace's system prompt is partly opaque (text the log does not hold): what the
        # trace has is sent, and the call is billed as simulated (respond), said in the provenance
        params = to_anthropic_params(request, self.model_for(request), max_tokens, final_user_text(request, spec),
                                     omit_opaque=True)
        if self.temperature is not None:
            params["temperature"] = self.temperature
        return params

    def _send(self, endpoint: str, kind: str, params: dict[str, Any]) -> dict[str, Any]:
        raise NotImplementedError

    # --- LLMBackend ---------------------------------------------------------------------------------
    def respond(self, request: Request, spec: CallSpec) -> BackendReply:
        params = self.params(request, spec)
        self.calls += 1
        resp = self._send("messages", spec.kind, params)
        text = resp.get("text", "")
        if not text.strip():
            raise SideCallFailed("api_error", f"empty answer (stop_reason {resp.get('stop_reason')!r})")
        try:
            usage = usage_from_api(resp.get("usage") or {}, _ttl_hint(request))
        except (TypeError, ValueError, AttributeError) as e:   # a 200 with a usage no API sends
            raise SideCallFailed("api_error", f"unreadable usage in the answer: {e}") from None
        if request.system.opaque_tokens:
            # the API counted a request without the opaque prefix: its usage is not the call's;
            # the engine bills the call as simulated (usage None), prefix included
            self.opaque_calls += 1
            self.opaque_tokens_omitted += request.system.opaque_tokens
            return BackendReply(text=text, usage=None)
        return BackendReply(text=text, usage=usage)

    # --- token counting -------------------------------------------------------------------------------
    def count_tokens(self, request: Request, extra_user_text: str | None = None) -> int:
        """The API's own count of the request's input tokens (``messages.count_tokens``)."""
        params = count_tokens_params(to_anthropic_params(request, self.model_for(request), 1, extra_user_text))
        return int(self._send("count_tokens", "count_tokens", params)["input_tokens"])

    def token_scale(self, requests: Iterable[Request], local_count: Callable[[Request], int]) -> float:
        """API tokens per local-tokenizer token over ``requests`` (ratio of sums): the per-model
        scale the provider model multiplies its counts by (fidelity issue)."""
        api = local = 0
        for r in requests:
            api += self.count_tokens(r)
            local += int(local_count(r))
        if local <= 0:
            raise ValueError("token_scale needs requests with a positive local count")
        return api / local

    # --- the retention judge -----------------------------------------------------------------------
    def judge(self, request: Request, fact: str) -> JudgeVerdict:
        """Does this context let the model state ``fact``? Asked as a cloze (see :func:`cloze`)."""
        _, expected = cloze(fact)
        reply = self.respond(request, CallSpec(kind=JUDGE, params={"fact": fact}, blocking=True))
        return JudgeVerdict(judge_answer(reply.text, expected), reply.text.strip(), expected)


class AnthropicBackend(_MessagesBackend):
    """Side calls answered by the real model. With a ``store``, every request and its answer (or
    error) is recorded for replay."""

    name = "live"

    def __init__(self, *, model: str | None = None, api_key: str | None = None, base_url: str | None = None,
                 max_retries: int | None = None, timeout: float | None = None, temperature: float | None = None,
                 max_output_tokens: int | None = None, store: ResponseStore | str | Path | None = None,
                 volatile_paths: Sequence[str] = (), client: Any = None, max_failures: int | None = None) -> None:
        super().__init__(model, temperature, max_output_tokens)
        if isinstance(store, str | Path):
            store = ResponseStore(store, volatile_paths)
        self.store = store
        self.timeout = timeout if timeout is not None else (_env_float(ENV_TIMEOUT) or DEFAULT_TIMEOUT_S)
        self.max_failures = max_failures if max_failures is not None else (
            _env_int(ENV_MAX_FAILURES) or DEFAULT_MAX_FAILURES)
        if not (self.timeout > 0 and self.timeout < float("inf")):
            raise LiveError(f"the live call timeout must be a positive number of seconds, got {self.timeout}")
        if self.max_failures < 1:
            raise LiveError(f"the live breaker needs at least 1 failure to open, got {self.max_failures}")
        self.failures_in_a_row = 0
        self.timed_out = False    # the last call timed out: the next one is sent once, not retried
        if client is None:
            from ctxsim.harness.files.extras import require

            anthropic = require("live", "anthropic")   # the [live] extra

            key = api_key or os.environ.get(ENV_KEY)
            if not key:
                raise LiveError(f"--llm live needs an API key: set {ENV_KEY} (and {ENV_BASE_URL} for a proxy)")
            retries = max_retries if max_retries is not None else _env_int(ENV_MAX_RETRIES)
            if retries is not None and not 0 <= retries <= 10:
                raise LiveError(f"live retries must be in 0..10 (bounded), got {retries}")
            kw: dict[str, Any] = {"api_key": key, "base_url": base_url or os.environ.get(ENV_BASE_URL) or None}
            kw["max_retries"] = DEFAULT_MAX_RETRIES if retries is None else retries
            client = anthropic.Anthropic(**kw)
        self.client = client

    def _send(self, endpoint: str, kind: str, params: dict[str, Any]) -> dict[str, Any]:
        try:
            resp = self._send_once(endpoint, kind, params)
        except SideCallFailed as failure:
            self.timed_out = failure.reason == "timeout"
            if failure.reason in API_DOWN_REASONS:
                self.failures_in_a_row += 1
                if self.failures_in_a_row >= self.max_failures:
                    what = "a side call" if self.failures_in_a_row == 1 else \
                        f"{self.failures_in_a_row} side calls in a row"
                    raise LiveUnavailable(
                        f"the live API failed {what} (last: {failure.reason}: "
                        f"{' '.join(failure.detail.split())[:200]}); stopping the run rather than report numbers "
                        f"computed on failed calls (--llm-max-failures, --llm-timeout, --llm-retries)") from None
            raise
        self.failures_in_a_row = 0
        self.timed_out = False
        return resp

    def _send_once(self, endpoint: str, kind: str, params: dict[str, Any]) -> dict[str, Any]:
        t0 = time.monotonic()
        # after a timeout the endpoint may hang: one attempt per call, not the SDK's retries of a hang
        client = self.client.with_options(max_retries=0) if self.timed_out and hasattr(self.client, "with_options") \
            else self.client
        try:
            if endpoint == "messages":
                msg = client.messages.create(**params, timeout=self.timeout)
                resp = {"text": "".join(b.text for b in msg.content if getattr(b, "type", "") == "text"),
                        "stop_reason": msg.stop_reason,
                        "usage": msg.usage.model_dump(mode="json", exclude_none=True)}
            elif endpoint == "count_tokens":
                n = client.messages.count_tokens(**params, timeout=self.timeout)
                resp = {"input_tokens": int(n.input_tokens)}
            else:
                raise ValueError(f"unknown endpoint {endpoint!r}")
        except Exception as exc:  # noqa: BLE001 - mapped or re-raised by _map_exception
            failure = _map_exception(exc)
            if self.store is not None:
                self.store.append(endpoint, kind, params, None,
                                  {"reason": failure.reason, "status": getattr(exc, "status_code", None),
                                   "message": failure.detail}, time.monotonic() - t0)
            raise failure from exc
        if self.store is not None:
            self.store.append(endpoint, kind, params, resp, None, time.monotonic() - t0)
        return resp


class ReplayBackend(_MessagesBackend):
    """Side calls answered from a response store, with no network. A request the store does not
    hold raises :class:`~ctxsim.harness.llm.response_store.StoreMiss` naming it."""

    name = "replay"

    def __init__(self, store: ResponseStore | str | Path, *, model: str | None = None,
                 temperature: float | None = None, max_output_tokens: int | None = None,
                 volatile_paths: Sequence[str] = ()) -> None:
        super().__init__(model, temperature, max_output_tokens)
        if isinstance(store, str | Path):
            if not Path(store).exists():
                raise LiveError(f"--llm replay: response store {store} does not exist (record one with --llm live "
                                "--llm-store PATH)")
            store = ResponseStore(store, volatile_paths)
        self.store = store

    def _send(self, endpoint: str, kind: str, params: dict[str, Any]) -> dict[str, Any]:
        rec, mapping = self.store.lookup(endpoint, kind, params)
        if rec.error is not None:
            raise SideCallFailed(rec.error.get("reason", "api_error"), str(rec.error.get("message", "")))
        resp = dict(rec.response or {})
        if "text" in resp:
            resp["text"] = restore_text(resp["text"], mapping)
        return resp


def make_backend(mode: Mode | str, store: Path | str | None = None, **kw: Any) -> LLMBackend | None:
    """The backend for ``--llm MODE`` (``--llm-store PATH``).

    * ``simulated``: :class:`ctxsim.harness.llm.simulated.SimulatedLLM` built from ``kw`` (its constructor's
      arguments); with no ``kw``, ``None``, which tells the engine to build its default simulated
      backend (it holds the trace's facts and the tokenizer that one needs).
    * ``live``: :class:`AnthropicBackend` (``kw``: model, api_key, base_url, max_retries, timeout,
      temperature, max_output_tokens, volatile_paths, client); with a store, every call is recorded.
    * ``replay``: :class:`ReplayBackend` on ``store`` (required), no network.
    """
    if mode == "simulated":
        if store is not None:
            raise ValueError("--llm-store is for --llm live (record) or --llm replay, not simulated")
        if not kw:
            return None
        from ctxsim.harness.llm.simulated import SimulatedLLM

        return SimulatedLLM(**kw)
    if mode == "live":
        return AnthropicBackend(store=store, **kw)
    if mode == "replay":
        if store is None:
            raise ValueError("--llm replay needs --llm-store PATH (a store recorded with --llm live)")
        return ReplayBackend(store, **kw)
    raise ValueError(f"unknown --llm mode {mode!r}; valid: {', '.join(MODES)}")
