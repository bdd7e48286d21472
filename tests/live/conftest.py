"""Fixtures for the live backend: a loopback Messages API server and an SDK client pointed at it
(dummy key, no network, few retries, short timeouts)."""

from __future__ import annotations

import pytest
from loopback import Loopback


@pytest.fixture
def loopback():
    server = Loopback()
    yield server
    server.close()


@pytest.fixture
def live_env(loopback, monkeypatch):
    """The environment a user would set, pointed at the loopback server."""
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test-dummy")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", loopback.url)
    monkeypatch.setenv("CTXSIM_LIVE_MAX_RETRIES", "2")
    monkeypatch.setenv("CTXSIM_LIVE_TIMEOUT", "10")
    monkeypatch.delenv("CTXSIM_LIVE_MODEL", raising=False)
    for var in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.delenv(var, raising=False)
    return loopback
