"""traces/trace.schema.json is what ctxsim.harness.model.trace.json_schema() produces (no drift)."""

import json
from pathlib import Path

from ctxsim.harness.model.trace import json_schema

SCHEMA = Path(__file__).resolve().parents[2] / "traces" / "trace.schema.json"


def test_committed_schema_matches_the_models():
    assert json.loads(SCHEMA.read_text(encoding="utf-8")) == json_schema()
