"""The price and limit table (models.toml), as typed records. A user extends it with a TOML file
of the same shape (``--models FILE`` or ``CTXSIM_MODELS``).

A model id resolves to a row by exactly these rules, in order (:func:`base_id`), and never by a
partial match, so a model the table lacks is an error rather than another model's price:

1. the id itself (``gpt-5.5``, ``claude-opus-4-6``);
2. the id without its snapshot date, when the rest is a row: Anthropic's ``-YYYYMMDD``
   (``claude-sonnet-4-5-20250929`` → ``claude-sonnet-4-5``: the docs' "Models overview" names each
   snapshot so, under its alias) and Vertex AI's ``@YYYYMMDD``; OpenAI's ``-YYYY-MM-DD``
   (``gpt-4o-2024-08-06`` → ``gpt-4o``);
3. Amazon Bedrock's form of an Anthropic id, ``[<region>.]anthropic.<id>[-v<N>[:<M>]]`` with any
   region or cross-region prefix (``us.``, ``eu.``, ``apac.``, ``global.``, ``jp.``, ``au.``, ``ca.``,
   ``us-gov.`` ...), by rules 1–2 on ``<id>``;
4. any of these behind a route prefix (``converse/jp.anthropic.claude-haiku-4-5-20251001-v1:0``,
   ``bedrock/…``, ``anthropic/…``: what gateways and LiteLLM-style configs write);
5. a Claude id whose version is written with a dot, by rules 1–4 on it with hyphens
   (``anthropic/claude-opus-4.6`` → ``claude-opus-4-6``: OpenRouter's model ids, openrouter.ai/anthropic,
   read 2026-12-06). Its variants stay unknown (``claude-opus-4.6-fast`` is priced 6× there);
6. any of these in another case, when no row is spelled as given (``MiniMax-M2.7`` → ``minimax-m2.7``):
   MiniMax's API and the logs of Claude Code on it write ``MiniMax-M2.7`` and ``MiniMax-M3``, and
   genai-prices 0.2.5 (pydantic/genai-prices ``genai_prices/types.py``, ``Provider.find_model``) lowercases
   an id before it matches one. So no two rows of a table may differ only in case, and a ``--models``
   row replaces the row it equals but for case.

A Bedrock id outside global cross-region inference (a geographic prefix ``us.``/``eu.``/``jp.``/
``apac.``…, or none: in-region) is priced at its row's ``bedrock_regional_premium`` (1.1 for Claude
Sonnet 4.5, Haiku 4.5, Opus 4.5 and later: AWS, "Global cross-Region inference", docs.aws.amazon.com/
bedrock/latest/userguide/global-cross-region-inference.html, read 2026-12-02: global inference "offers
approximately 10% savings on both input and output token pricing compared to geographic cross-Region
inference"; genai-prices 0.2.3, pydantic/genai-prices, prices every ``regional.anthropic.*`` id of
those models at 1.1× and the older ones at 1×).

``claude-sonnet-4-5-foo``, ``gpt-5-mini`` or ``gpt-5.5-pro`` match nothing: add them with ``--models FILE``.

ccusage (ryoppippi/ccusage ``src/pricing-fetcher.ts`` @ 10b43575) prices any id by exact match, then
``anthropic/<id>``, then a substring match either way against LiteLLM's price list: so it accepts
every Bedrock region prefix and route prefix, but also prices ``gpt-5-mini`` as whatever key it
contains. Rules 3–4 accept the same ids a user's logs write without the substring step.
"""

from __future__ import annotations

import os
import re
import tomllib
from functools import cache
from importlib import resources

from ctxsim.harness.files import regular
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

# Bounds of a row (issue 44: a price of 1.7e308 priced a session at $inf and wrote "cost_usd":
# Infinity). Each is far beyond any real model's, so no real row meets it; all assumed.
MAX_PRICE = 10_000.0        # USD per million tokens: 16x the dearest list price we know (OpenAI o1-pro
                            # output, $600 per million, platform.openai.com/docs/pricing)
MAX_WINDOW = 100_000_000    # tokens: harness/model/trace.py MAX_TOKENS, 100x the largest window here (1M)
MAX_DECODE_TOK_S = 100_000.0  # output tokens per second: tens of times any served model's decode
MIN_DECODE_TOK_S = 1.0        # assumed: no served model decodes slower than a token a second (1e-9 gave a
                              # median latency of 5e10 s: the fresh hostile set of issue 44)
MAX_SECONDS = 3_600.0       # a time to first token of an hour is no API's
MAX_S_PER_TOKEN = 1.0       # prefill seconds per input token
MAX_CACHE_TTL_S = 31 * 86_400.0   # a month: the longest cache retention offered is 24 hours (OpenAI extended)
MIN_TOKEN_SCALE, MAX_TOKEN_SCALE = 0.1, 10.0   # as a trace's recorded token scale (harness/model/trace.py)
MAX_PREMIUM = 10.0          # a price factor for a region (the real one is 1.1)


class LongContext(BaseModel):
    # inf / nan are TOML numbers, never prices or rates (an inf rate gave $0.00 or inf, latency NaN)
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)
    threshold: int = Field(gt=0, le=MAX_WINDOW, description="input tokens (uncached + writes + reads) above which the whole request is billed at these rates")
    input: float = Field(ge=0, le=MAX_PRICE)
    output: float = Field(ge=0, le=MAX_PRICE)


class UnknownModelError(KeyError, ValueError):
    """A model id no row of the price table resolves to (exit 2 at the command line)."""

    def __init__(self, name: str, known: list[str], more: tuple[str, ...] = ()) -> None:
        super().__init__(name)
        self.name, self.names = name, (name, *more)
        if more:   # every id a log names at once: a user adds their prices in one go, not one per run
            ids = ", ".join(repr(n) for n in self.names)
            self.message = (f"unknown models {ids}: not in the price table (known: {', '.join(known)}); add them "
                            f"with --models FILE, a TOML file of models.toml's shape ([models.\"{name}\"] with "
                            "provider, window, max_output, input, output, cache_read, ... for each)")
            return
        self.message = (f"unknown model {name!r}: not in the price table (known: {', '.join(known)}); add it "
                        f"with --models FILE, a TOML file of models.toml's shape ([models.\"{name}\"] with provider, "
                        "window, max_output, input, output, cache_read, ...)")

    def __str__(self) -> str:
        return self.message

    @property
    def short(self) -> str:
        """The ids alone, without the price table (a folder's last line names them all once)."""
        return f"unknown model{'s' * (len(self.names) > 1)} {', '.join(repr(n) for n in self.names)}: not in the price table"


_DATED = (re.compile(r"^(?P<base>.+)-\d{8}$"), re.compile(r"^(?P<base>.+)@\d{8}$"),
          re.compile(r"^(?P<base>.+)-\d{4}-\d{2}-\d{2}$"))
# Bedrock: any region / cross-region inference prefix (us., eu., apac., global., jp., au., ca.,
# us-gov. ...: two to six letters, optionally -gov), the version suffix -vN[:M] optional
_BEDROCK = re.compile(r"^(?:(?P<region>[a-z]{2,6}(?:-gov)?)\.)?anthropic\.(?P<id>.+?)(?:-v\d+(?::\d+)?)?$")
# a route prefix in front of the id, as gateways and LiteLLM write it: converse/…, bedrock/…, anthropic/…
_ROUTE = re.compile(r"^(?:[A-Za-z0-9_.-]+/)+(?P<id>[^/]+)$")


def bedrock_regional(name: str) -> bool:
    """Whether ``name`` is a Bedrock id served in a geography or one region (``us.``, ``eu.``, ``jp.``,
    ``apac.`` ..., or no prefix: in-region), not by global cross-region inference (``global.``)."""
    r = _ROUTE.match(name)
    m = _BEDROCK.match(r.group("id") if r else name)
    return m is not None and m.group("region") != "global"


_DOTTED = re.compile(r"(?<=\d)\.(?=\d)")   # rule 5: the dot of a Claude version (4.6)


def base_id(name: str, known) -> str | None:
    """The table row ``name`` resolves to (module docstring), or None."""
    row = _spelled(name, known)
    if row is None:   # rule 6: the id in another case (rows differ in more than case: _parse)
        folded = {k.casefold(): k for k in known}
        row = _spelled(name.casefold(), folded)
        row = folded[row] if row is not None else None
    return row


def _spelled(name: str, known) -> str | None:
    """Rules 1-5 on ``name`` as it is spelled."""
    row = _base_id(name, known)
    if row is None and "claude-" in name and _DOTTED.search(name):
        row = _base_id(_DOTTED.sub("-", name), known)
    return row


def _base_id(name: str, known) -> str | None:
    r = _ROUTE.match(name)
    bare = r.group("id") if r else name
    m = _BEDROCK.match(bare)
    candidates = [m.group("id")] if m else [bare] if bare == name else [name, bare]
    for c in candidates:
        if c in known:
            return c
        for rx in _DATED:
            d = rx.match(c)
            if d and d.group("base") in known:
                return d.group("base")
    return None


class ModelSpec(BaseModel):
    """Prices in USD per million tokens."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)
    name: str = ""
    source: str = Field("", description="where the prices and limits were read (page, document)")
    as_of: str = Field("", description="when they were read from that source (YYYY-MM-DD)")
    # anthropic: explicit cache breakpoints with a write premium; any other (openai, gemini, and the providers
    # Claude Code runs on through an Anthropic-compatible proxy: zai for Z.ai's GLM, deepseek, minimax, moonshot
    # ...): automatic caching as OpenAI's (no write premium billed). A lower-case name of the user's choosing in
    # a --models file (a second outside sample priced Kimi as "moonshot", which a closed list refused).
    provider: str = Field(pattern=r"^[a-z][a-z0-9_.-]{0,39}$")
    window: int = Field(gt=0, le=MAX_WINDOW)
    max_output: int = Field(gt=0, le=MAX_WINDOW)
    input: float = Field(ge=0, le=MAX_PRICE)
    output: float = Field(ge=0, le=MAX_PRICE)
    cache_write_5m: float | None = Field(None, ge=0, le=MAX_PRICE, description="Anthropic only")
    cache_write_1h: float | None = Field(None, ge=0, le=MAX_PRICE, description="Anthropic only")
    cache_read: float = Field(ge=0, le=MAX_PRICE)
    min_cacheable: int = Field(1024, ge=0, le=MAX_WINDOW)
    cache_ttl_s: float = Field(300.0, gt=0, le=MAX_CACHE_TTL_S, description="automatic caches (OpenAI, Gemini): idle retention")
    long_context: LongContext | None = None
    decode_tok_s: float = Field(60.0, ge=MIN_DECODE_TOK_S, le=MAX_DECODE_TOK_S)
    ttft_base_s: float = Field(0.5, ge=0, le=MAX_SECONDS)
    prefill_s_per_tok: float = Field(1.1e-4, ge=0, le=MAX_S_PER_TOKEN)
    cached_prefill_s_per_tok: float = Field(1.94e-5, ge=0, le=MAX_S_PER_TOKEN)
    token_scale: float = Field(1.0, ge=MIN_TOKEN_SCALE, le=MAX_TOKEN_SCALE,
                               description="true tokens per cl100k token for this model")
    bedrock_regional_premium: float = Field(1.0, ge=1.0, le=MAX_PREMIUM, description=(
        "price factor of a Bedrock id served in a geography or region (us., eu., jp., apac. ..., or in-region) "
        "rather than by global cross-region inference (global.): every rate, cache and long context included"))

    @model_validator(mode="after")
    def _limits_fit_the_window(self) -> ModelSpec:
        for k in ("max_output", "min_cacheable"):
            if getattr(self, k) > self.window:
                raise ValueError(f"{k} {getattr(self, k):,} is more than the window {self.window:,}")
        return self

    def scaled(self, factor: float) -> ModelSpec:
        """This row with every price multiplied by ``factor`` (limits and latency unchanged)."""
        if factor == 1.0:
            return self
        lc = self.long_context
        return self.model_copy(update={
            "input": self.input * factor, "output": self.output * factor, "cache_read": self.cache_read * factor,
            "cache_write_5m": None if self.cache_write_5m is None else self.cache_write_5m * factor,
            "cache_write_1h": None if self.cache_write_1h is None else self.cache_write_1h * factor,
            "long_context": None if lc is None else lc.model_copy(update={"input": lc.input * factor,
                                                                         "output": lc.output * factor})})

    def rates(self, input_total: int) -> tuple[float, float, float, float, float]:
        """(uncached, write 5m, write 1h, read, output) per token for a request of this size."""
        base_in, base_out = self.input, self.output
        if self.long_context and input_total > self.long_context.threshold:
            base_in, base_out = self.long_context.input, self.long_context.output
        factor = base_in / self.input if self.input else 1.0
        w5 = (self.cache_write_5m if self.cache_write_5m is not None else self.input) * factor
        w1 = (self.cache_write_1h if self.cache_write_1h is not None else self.input) * factor
        rd = self.cache_read * factor
        m = 1e-6
        return base_in * m, w5 * m, w1 * m, rd * m, base_out * m


class ModelTable:
    def __init__(self, models: dict[str, ModelSpec], default: str) -> None:
        self.models, self.default = models, default
        self._specs: dict[str, ModelSpec] = {}   # id -> its prices, memoised (the lookup runs at every call)

    def get(self, name: str | None) -> ModelSpec:
        """The row ``name`` resolves to by the module's rules; :class:`UnknownModelError` if none. A
        Bedrock id outside global inference carries its row's regional premium."""
        name = name or self.default
        spec = self._specs.get(name)
        if spec is None:
            row = base_id(name, self.models)
            if row is None:
                raise UnknownModelError(name, list(self.models))
            spec = self.models[row]
            if bedrock_regional(name):
                spec = spec.scaled(spec.bedrock_regional_premium)
            self._specs[name] = spec
        return spec

    def require(self, names) -> None:
        """Every id of ``names`` resolves to a row, else one :class:`UnknownModelError` naming each
        id that does not (in the order given, once each)."""
        unknown: list[str] = []
        for n in names:
            if n and n not in unknown:
                try:
                    self.get(n)
                except UnknownModelError:
                    unknown.append(n)
        if unknown:
            raise UnknownModelError(unknown[0], list(self.models), tuple(unknown[1:]))


def _parse(data: dict, source: str) -> tuple[dict[str, ModelSpec], str | None]:
    stray = sorted(set(data) - {"models", "defaults"})
    if stray:   # e.g. [my-model] instead of [models."my-model"]: its prices would be silently ignored
        raise ValueError(f"{source}: unknown table {stray[0]!r}: rows go under [models.\"NAME\"] (and [defaults])")
    out: dict[str, ModelSpec] = {}
    folded: dict[str, str] = {}
    for name, fields in (data.get("models") or {}).items():
        if not isinstance(fields, dict):
            raise ValueError(f"{source}: model {name!r}: a table of prices and limits ([models.\"{name}\"])")
        if name.casefold() in folded:   # rule 6 would price one id by either row
            raise ValueError(f"{source}: models {folded[name.casefold()]!r} and {name!r} differ only in case: "
                             "an id is matched in any case, so give it one row")
        folded[name.casefold()] = name
        try:
            out[name] = ModelSpec(name=name, **fields)
        except ValidationError as e:
            err = e.errors()[0]
            where = ".".join(map(str, err["loc"]))
            raise ValueError(f"{source}: model {name!r}: {where + ': ' if where else ''}"
                             f"{err['msg'].removeprefix('Value error, ')}") from None
    return out, (data.get("defaults") or {}).get("model")


class ModelsFileError(ValueError):
    """A price table a user gave (``--models FILE`` or ``CTXSIM_MODELS``) that cannot be used: the
    message names where it came from and the row and field (exit 2 at the command line)."""


@cache
def load_table(extra: str | None = None) -> ModelTable:
    """models.toml, extended by ``CTXSIM_MODELS`` and then ``extra`` (``--models FILE``); a bad
    file is a :class:`ModelsFileError` naming which of the two it was."""
    text = resources.files("ctxsim.harness.provider").joinpath("models.toml").read_text(encoding="utf-8")
    models, default = _parse(tomllib.loads(text), "models.toml")
    for label, path in (("CTXSIM_MODELS=", os.environ.get("CTXSIM_MODELS")), ("--models ", extra)):
        if not path:
            continue
        try:
            more, d = _parse(tomllib.loads(regular.read_text(path)), path)   # a file, read to a bound
        except OSError as e:
            raise ModelsFileError(f"{label}{path}: cannot read: {e.strerror or e}") from None
        except (tomllib.TOMLDecodeError, ValueError) as e:
            raise ModelsFileError(f"{label}{path}: {e}".replace(f"{path}: {path}: ", f"{path}: ")) from None
        for name in more:   # rule 6: a row replaces the one it equals but for case
            for old in [k for k in models if k != name and k.casefold() == name.casefold()]:
                del models[old]
        models.update(more)
        default = d or default
    return ModelTable(models, default or "claude-sonnet-4-6")


def provider_of(model: str | None, models_file: str | None = None) -> str | None:
    """The provider of ``model``'s row in the price table (``--models`` ``models_file`` too); None
    when no row prices it."""
    try:
        return load_table(models_file).get(model).provider
    except UnknownModelError:
        return None


DEFAULT_MODEL = "claude-sonnet-4-6"
