"""One type per results column, whatever the strategies in a file declare.

Parquet holds one type per column. Two strategies may give a parameter of the same name different
types (``compaction``: a bool in ``codex``, ``"auto"`` in ``observation_masking``), and a
results file holds every strategy's rows, so such a column cannot be written as it is (pyarrow:
"Could not convert 'auto' with type str: tried to convert to boolean"). Rather than drop the type,
the column is written as text and a companion column ``type.<column>`` names each row's type
(``bool``, ``int``, ``float``, ``str``, ``json``); :func:`decode` turns it back into the values the
strategies declared, so a reader sees ``True`` and ``"auto"``, never ``"true"``.

A column whose values all share one type is written as it is (no companion column).
"""

from __future__ import annotations

import json
from typing import Any

import pandas as pd

TYPE_PREFIX = "type."


def _kind(v: Any) -> str | None:
    if v is None or (isinstance(v, float) and v != v):
        return None
    if isinstance(v, bool):
        return "bool"
    if isinstance(v, int):
        return "int"
    if isinstance(v, float):
        return "float"
    if isinstance(v, str):
        return "str"
    return "json"


def _text(v: Any, kind: str | None) -> str | None:
    if kind is None:
        return None
    return v if kind == "str" else json.dumps(v, sort_keys=True, default=str)


def encode(df: pd.DataFrame) -> pd.DataFrame:
    """``df`` with every column of mixed value types written as text plus its ``type.`` column."""
    out = df.copy()
    for c in df.columns:
        if df[c].dtype != object or c.startswith(TYPE_PREFIX):
            continue
        kinds = [_kind(v) for v in df[c]]
        present = {k for k in kinds if k is not None}
        if len(present - {"int", "float"}) == 0 or len(present) < 2:
            continue  # one type (ints and floats share a numeric column)
        out[c] = pd.Series([_text(v, k) for v, k in zip(df[c], kinds, strict=True)], index=df.index, dtype=object)
        out[TYPE_PREFIX + c] = pd.Series(kinds, index=df.index, dtype=object)
    return out


def _value(text: Any, kind: Any) -> Any:
    if not isinstance(kind, str) or text is None or (isinstance(text, float) and text != text):
        return None
    if kind == "str":
        return text
    return json.loads(text)


def decode(df: pd.DataFrame) -> pd.DataFrame:
    """The inverse of :func:`encode`: each text column with a ``type.`` companion back to its typed
    values (an object column), the companion dropped."""
    typed = [c for c in df.columns if c.startswith(TYPE_PREFIX) and c.removeprefix(TYPE_PREFIX) in df.columns]
    if not typed:
        return df
    out = df.copy()
    for t in typed:
        c = t.removeprefix(TYPE_PREFIX)
        out[c] = pd.Series([_value(v, k) for v, k in zip(df[c], df[t], strict=True)], index=df.index, dtype=object)
    return out.drop(columns=typed)
