"""The known findings live with the kit (harness/testing/known.py), so that ``ctxsim check-strategy``
reports them as known; re-exported here for the tests."""

from ctxsim.harness.testing.known import KNOWN_FINDINGS, known_for, owner_of  # noqa: F401
