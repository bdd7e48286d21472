"""The price and limit table (models.toml), as typed records. A user extends it with a TOML file
of the same shape (``--models FILE`` or ``CTXSIM_MODELS``)."""

from __future__ import annotations

import os
import tomllib
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError


class LongContext(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    threshold: int = Field(gt=0, description="input tokens (uncached + writes + reads) above which the whole request is billed at these rates")
    input: float = Field(ge=0)
    output: float = Field(ge=0)


class ModelSpec(BaseModel):
    """Prices in USD per million tokens."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    name: str = ""
    provider: Literal["anthropic", "openai", "gemini"]
    window: int = Field(gt=0)
    max_output: int = Field(gt=0)
    input: float = Field(ge=0)
    output: float = Field(ge=0)
    cache_write_5m: float | None = Field(None, ge=0, description="Anthropic only")
    cache_write_1h: float | None = Field(None, ge=0, description="Anthropic only")
    cache_read: float = Field(ge=0)
    min_cacheable: int = Field(1024, ge=0)
    cache_ttl_s: float = Field(300.0, gt=0, description="automatic caches (OpenAI, Gemini): idle retention")
    long_context: LongContext | None = None
    decode_tok_s: float = Field(60.0, gt=0)
    ttft_base_s: float = Field(0.5, ge=0)
    prefill_s_per_tok: float = Field(1.1e-4, ge=0)
    cached_prefill_s_per_tok: float = Field(1.94e-5, ge=0)
    token_scale: float = Field(1.0, gt=0, description="true tokens per cl100k token for this model")

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

    def get(self, name: str | None) -> ModelSpec:
        """Exact name, else the longest table key the name starts with (dated ids such as
        ``claude-sonnet-4-5-20250929`` resolve to ``claude-sonnet-4-5``)."""
        name = name or self.default
        if name in self.models:
            return self.models[name]
        prefixes = [k for k in self.models if name.startswith(k)]
        if prefixes:
            return self.models[max(prefixes, key=len)]
        raise KeyError(f"unknown model {name!r}; known: {', '.join(self.models)} (add it with --models FILE)")


def _parse(data: dict, source: str) -> tuple[dict[str, ModelSpec], str | None]:
    out = {}
    for name, fields in (data.get("models") or {}).items():
        try:
            out[name] = ModelSpec(name=name, **fields)
        except ValidationError as e:
            raise ValueError(f"{source}: model {name!r}: {e.errors()[0]['loc']}: {e.errors()[0]['msg']}") from None
    return out, (data.get("defaults") or {}).get("model")


@cache
def load_table(extra: str | None = None) -> ModelTable:
    text = resources.files("harness.provider").joinpath("models.toml").read_text(encoding="utf-8")
    models, default = _parse(tomllib.loads(text), "models.toml")
    for path in filter(None, [os.environ.get("CTXSIM_MODELS"), extra]):
        try:
            data = tomllib.loads(Path(path).read_text(encoding="utf-8"))
        except (OSError, tomllib.TOMLDecodeError) as e:
            raise ValueError(f"{path}: {e}") from None
        more, d = _parse(data, path)
        models.update(more)
        default = d or default
    return ModelTable(models, default or "claude-sonnet-4-6")


DEFAULT_MODEL = "claude-sonnet-4-6"
