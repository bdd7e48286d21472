"""The kit's clock: the instants a launch crosses (midnight, a DST change) and the local time zone
the kit runs strategies in.

A trace's time is seconds since its start; a strategy that stamps a date reads it as a Unix time
(or adds an epoch of its own). The state machine starts each run shortly before one of
:data:`EDGES`, so a launch crosses it: UTC midnight; midnight in the kit's local zone; that zone's
DST changes both ways; the EU's DST change (the same instant in every EU zone). A date or a time
stamped per request then changes inside a launch, and ``stable_prefix`` says which edge it crossed.

A strategy that reads the machine's local time (``datetime.fromtimestamp(t)``, ``time.localtime``,
``.astimezone()`` without a zone) would see the zone of whatever machine runs the kit, so the
kit's verdict would depend on where it runs: the kit pins the process's zone to :data:`KIT_TZ`
while it runs (:func:`pinned_zone`). The cross-process check runs its second process in another
zone (:func:`other_zone`), one whose date differs from the kit zone's at the moment it runs, so a
strategy that depends on the local zone is named as such, a local *date* included (``date.today()``
in an environment block), whatever the hour of the day.

The zones are POSIX TZ rules (glibc and macOS read them without a time-zone database), checked
against the tz database's America/New_York in tests/testing/test_clock.py.
"""

from __future__ import annotations

import datetime as dt
import os
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

ZONE = "America/New_York"
# America/New_York's rule for 1987-2006 (tz database, northamerica: "Rule US 1987 2006 - Apr Sun>=1 2:00 1:00 D",
# "Rule US 1967 2006 - Oct lastSun 2:00 0 S"): the instants below are in those years
KIT_TZ = "EST5EDT,M4.1.0,M10.5.0"
DAY_S = 86_400
# the cross-process check's second zone: UTC+14 or UTC-12 (the first and last zones in use, the
# Line Islands and Baker Island), 26 hours apart, so at any instant their dates differ and one of the
# two differs from the kit zone's; a zone a few hours away (UTC+5:30 until now) shares the kit zone's
# date most of the day, and a strategy stamping the machine's local date passed 14 hours in 24
OTHER_TZS = (("<+14>-14", "UTC+14", 14 * 3600), ("<-12>12", "UTC-12", -12 * 3600))


@dataclass(frozen=True)
class Edge:
    label: str
    t: float  # seconds since 1970-01-01 UTC, as a trace's time read as a Unix time


# Unix times (tz database 2026a via zoneinfo; tests/testing/test_clock.py recomputes them). A trace's
# time is at most 1e9 s (harness/model/trace.py MAX_T), so the DST changes are those of 2000-2001.
EDGES: tuple[Edge, ...] = (
    Edge("midnight UTC (1970-01-02 00:00 UTC)", 86_400.0),  # first: sessions shrink towards it
    Edge(f"midnight in {ZONE} (2000-10-29 00:00 EDT)", 972_792_000.0),
    Edge(f"the end of DST in {ZONE} (2000-10-29 02:00 EDT -> 01:00 EST)", 972_799_200.0),
    Edge(f"the start of DST in {ZONE} (2001-04-01 02:00 EST -> 03:00 EDT)", 986_108_400.0),
    Edge("the start of DST in the EU (2001-03-25 01:00 UTC; Europe/Berlin 02:00 CET -> 03:00 CEST)", 985_482_000.0),
)


def own_edges(epochs: tuple[float, ...]) -> tuple[Edge, ...]:
    """The midnights of a strategy's own clock: a strategy that shows a trace's time ``t`` as the Unix
    time ``epoch + t`` (``Strategy.clock_epochs``; NovaCode's environment block, ``environment_epoch_s``)
    changes its date where ``epoch + t`` crosses midnight UTC, not where ``t`` does. Per epoch that is
    not itself a midnight, the first such instant at least 300 s into the trace (a launch starts up to
    150 s before it), in trace time as :data:`EDGES` are."""
    out: list[Edge] = []
    for epoch in epochs:
        offset = (-epoch) % DAY_S  # trace time of the first midnight UTC on that clock
        if offset == 0:
            continue  # the epoch is a midnight: its midnights are the trace's own (EDGES has them)
        t = offset if offset >= 300 else offset + DAY_S
        when = dt.datetime.fromtimestamp(epoch, dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
        day = dt.datetime.fromtimestamp(epoch + t, dt.UTC).strftime("%Y-%m-%d")
        edge = Edge(f"midnight UTC on the strategy's own clock ({day} 00:00; its epoch {when} at t = 0)", float(t))
        if all(e.t != edge.t for e in out):
            out.append(edge)
    return tuple(out)


def crossed(t0: float, t1: float, more: Iterable[Edge] = ()) -> list[Edge]:
    """The edges in (t0, t1]; ``more``: a strategy's own (:func:`own_edges`)."""
    return [e for e in (*EDGES, *more) if t0 < e.t <= t1]


def other_zone(now: float | None = None) -> tuple[str, str]:
    """(TZ rule, name) of the zone the cross-process check's second process runs in: of
    :data:`OTHER_TZS`, the first whose date at ``now`` (default: this instant) is not the kit zone's."""
    now = time.time() if now is None else now
    with pinned_zone(KIT_TZ):
        local = time.localtime(now)[:3]
    for rule, name, offset in OTHER_TZS:
        if time.gmtime(now + offset)[:3] != local:
            return rule, name
    raise AssertionError("two zones 26 hours apart share a date")   # not reached


@contextmanager
def pinned_zone(tz: str = KIT_TZ) -> Iterator[None]:
    """The process's local time zone set to ``tz`` (``TZ`` and :func:`time.tzset`), restored after."""
    old = os.environ.get("TZ")
    os.environ["TZ"] = tz
    time.tzset()
    try:
        yield
    finally:
        if old is None:
            os.environ.pop("TZ", None)
        else:
            os.environ["TZ"] = old
        time.tzset()
