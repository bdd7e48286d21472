"""The kit's clock (issue #29): launches cross midnight (UTC and local) and DST changes, the process
runs in a pinned zone, and a strategy that stamps the machine's local time is named either way:
per request (the prefix changes at an edge: stable_prefix names the edge) or per launch (another
zone, other bytes: the cross-process check names the time zone)."""

from __future__ import annotations

import os
import time
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

from ctxsim.harness.testing import clock, scenarios
from ctxsim.harness.testing.crossprocess import difference
from ctxsim.harness.testing.invariants import promises
from ctxsim.harness.testing.params import CHECK_MODEL, CHECK_WINDOW, params_for

from tests.testing.mutants import kit29 as x


def _offset(zone: str, t: float) -> timedelta:
    return datetime.fromtimestamp(t, UTC).astimezone(ZoneInfo(zone)).utcoffset()


def test_the_edges_are_the_tz_databases():
    by_label = {e.label.split(" (")[0]: e.t for e in clock.EDGES}
    assert by_label["midnight UTC"] == datetime(1970, 1, 2, tzinfo=UTC).timestamp()
    ny = "America/New_York"
    local = datetime.fromtimestamp(by_label[f"midnight in {ny}"], ZoneInfo(ny))
    assert (local.hour, local.minute, local.date().isoformat()) == (0, 0, "2000-10-29")
    for label, zone, before, after in ((f"the end of DST in {ny}", ny, -4, -5),
                                       (f"the start of DST in {ny}", ny, -5, -4),
                                       ("the start of DST in the EU", "Europe/Berlin", 1, 2)):
        t = by_label[label]
        assert (_offset(zone, t - 1), _offset(zone, t)) == (timedelta(hours=before), timedelta(hours=after))
    assert all(e.t <= 1e9 for e in clock.EDGES)  # a trace's time (harness/model/trace.py MAX_T)


def test_the_pinned_zone_is_new_york_at_every_edge_and_is_restored():
    old = os.environ.get("TZ")
    with clock.pinned_zone():
        for e in clock.EDGES:
            for t in (e.t - 1, e.t):
                assert -time.localtime(t).tm_gmtoff == -_offset(clock.ZONE, t).total_seconds()
    assert os.environ.get("TZ") == old


def _scenario(cls, name):
    with clock.pinned_zone():
        return scenarios.check_scenario(name, cls, params_for(cls), CHECK_WINDOW, promises(cls), CHECK_MODEL)


def test_a_local_zone_stamped_per_request_breaks_the_prefix_at_dst_and_the_edge_is_named():
    _, found = _scenario(x.LocalTimeInNovaCodeSystem, "parallel_results")
    assert [v.invariant for v in found] == ["stable_prefix"]
    assert found[0].detail == ("undeclared change since request 0: the system prompt changed (the clock crossed the "
                               "start of DST in America/New_York (2001-04-01 02:00 EST -> 03:00 EDT) between the two "
                               "requests: a date or time stamped per request?)")
    assert _scenario(x.NamedZoneAtLaunch, "parallel_results")[1] == []


def test_every_edge_is_crossed_within_a_launch_of_the_clock_scenario():
    trace = scenarios.clock_edges()
    starts = [e.t for e in trace.events if type(e).__name__ == "SessionStart"]
    ends = [e.t for e in trace.events if type(e).__name__ == "SessionEnd"]
    assert sorted(e.t for e in clock.EDGES) == [next(edge.t for edge in clock.EDGES if s < edge.t <= t)
                                                for s, t in zip(starts, ends)]
    _, found = _scenario(x.DateInNovaCodeSystem, "clock_edges")  # UTC date: midnight UTC
    assert "the clock crossed midnight UTC" in found[0].detail


def test_the_machines_local_date_read_at_launch_differs_in_another_zone():
    trace = scenarios.clock_edges()
    spec = f"{x.__name__}:"
    d = difference(trace, spec + "LocalDateAtLaunch", params_for(x.LocalDateAtLaunch), CHECK_WINDOW)
    assert "local time zones differ" in d and "the same hash seed" in d and "PYTHONHASHSEED=1 and 2" not in d
    assert difference(trace, spec + "NamedZoneAtLaunch", params_for(x.NamedZoneAtLaunch), CHECK_WINDOW) == ""


def test_the_second_zone_is_always_on_another_date_than_the_kit_zone():
    """UTC+14 and UTC-12 are 26 hours apart, so one of them is on another date than New York at any
    instant. 2026-12-05 05:00 UTC is midnight in New York (Dec 5) and 19:00 Dec 5 at UTC+14: the
    check takes UTC-12 (17:00 Dec 4); at 20:00 UTC (15:00 in New York) UTC+14 is on Dec 6."""
    t = 1_796_446_800.0   # 2026-12-05 05:00 UTC
    assert clock.other_zone(t) == ("<-12>12", "UTC-12")
    assert clock.other_zone(t + 15 * 3600) == ("<+14>-14", "UTC+14")
    for h in range(0, 48):   # every hour of two days: the two processes' dates differ
        rule, _ = clock.other_zone(t + h * 3600)
        with clock.pinned_zone(clock.KIT_TZ):
            kit = time.localtime(t + h * 3600)[:3]
        with clock.pinned_zone(rule):
            other = time.localtime(t + h * 3600)[:3]
        assert kit != other


def test_a_date_from_the_machines_clock_differs_between_the_two_processes_at_any_hour():
    """``date.today()`` at launch: the two processes run on other dates, whatever the hour of the check."""
    trace = scenarios.clock_edges()
    d = difference(trace, f"{x.__name__}:MachineDateAtLaunch", params_for(x.MachineDateAtLaunch), CHECK_WINDOW)
    assert "local time zones differ" in d and "another date" in d
