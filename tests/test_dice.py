"""What the cache's dice leave reachable over a folder (harness/fidelity/dice.py), worked by hand."""

from __future__ import annotations

import pytest
from ctxsim.harness.fidelity import population as pop
from ctxsim.harness.fidelity.dice import Dice, first_part_group, reachable, summary

# Five sessions, each billed $10, so a 5% band is $0.50. A, B and C lost nothing in their held-out
# calls (stake $100 each) and showed no fall-back in their first part. D (stake $100) lost $5.03 and
# E (stake $200) $10.13; both showed fall-backs in their first part (rates 0.05 and 0.03: the over-2% group).
A, B, C = (Dice(10.0, 0.0, 100.0, 0.0) for _ in range(3))
D = Dice(10.0, 0.05, 100.0, 5.03)
E = Dice(10.0, 0.03, 200.0, 10.13)
# A rate r puts A, B, C within the band for r ≤ 0.005; D for |100r − 5.03| ≤ 0.5, r in [0.0453, 0.0553];
# E for |200r − 10.13| ≤ 0.5, r in [0.04815, 0.05315]. The grid steps by 0.0005; ties go to the lowest rate.


def test_one_rate_chosen_on_the_other_sessions_leaves_the_losers_out():
    # A's peers B, C, D, E: r = 0 puts B and C in, any r in D's and E's overlap D and E: a tie, r = 0;
    # A is in (so B and C). D's peers A, B, C, E: r = 0 (three); D, 5.03 off, is out; so is E
    assert reachable([A, B, C, D, E], 5.0) == (0.6, 0.6)


def test_a_rate_by_what_the_first_part_showed_reaches_further():
    # D's peers in its group: E alone, whose lowest rate is 0.0485: D is off by |4.85 − 5.03| = 0.18, in.
    # E's: D alone, lowest 0.0455: E is off by |9.10 − 10.13| = 1.03, out. In hindsight the group takes
    # a rate in both ranges: all five
    assert [first_part_group(d) for d in (A, D, E)] == [0, 3, 3]
    assert reachable([A, B, C, D, E], 5.0, "by_first_part") == (0.8, 1.0)


def test_a_session_alone_in_its_group_takes_the_rate_chosen_on_all_the_others():
    # D alone in the over-2% group: the others (A, B, C) choose r = 0, and D is out
    assert reachable([A, B, C, D], 5.0, "by_first_part") == (0.75, 1.0)
    assert reachable([], 5.0) == (0.0, 0.0)


def test_a_rate_scaled_on_the_first_part_cannot_serve_d_and_e_with_the_sessions_that_lost_nothing():
    # a + λ × first rate (a major, λ minor on the grid). A's peers: B, C and one of D, E at most (D and E
    # both need λ ≤ 0.36, and then E's rate stays under 0.016): first (a = 0, λ = 0.95), A in. D's peers
    # A, B, C and E first at (0.0035, 1.5): D's rate 0.0785, out. E's peers A, B, C, D at (0, 0.95): E's
    # 0.0285, out. In hindsight four at most
    assert reachable([A, B, C, D, E], 5.0, "scaled") == (0.6, 0.8)


def test_a_rate_scaled_on_the_first_part_follows_losses_the_first_part_foretold():
    # first-part rates 2 / 4 / 6%, held-out losses $2.00 / $4.00 / $5.80 on stakes of $100, bills $10:
    # in the band for λ (a = 0) in [0.75, 1.25], [0.875, 1.125], [0.883, 1.05]; each session's peers
    # choose λ = 0.9 first, which puts it within 0.4. One rate cannot: the three ranges of rates
    # (1.5-2.5%, 3.5-4.5%, 5.3-6.3%) are apart, so each session's peers tie and pick the lowest, 3.5%
    fs = [Dice(10.0, 0.02, 100.0, 2.0), Dice(10.0, 0.04, 100.0, 4.0), Dice(10.0, 0.06, 100.0, 5.8)]
    assert reachable(fs, 5.0, "scaled") == (1.0, 1.0)
    assert reachable(fs, 5.0, "one_rate") == (0.0, 1 / 3)
    assert reachable(fs, 5.0, "by_first_part") == (0.0, 1 / 3)   # all three over 2%: one group


def test_the_summary_counts_the_held_out_losses_over_each_band():
    s = summary([A, B, C, D, E], (5.0,))
    assert s["sessions"] == 5
    assert s["within_5pct"] == {"one_rate": 0.6, "by_first_part": 0.8, "scaled": 0.6, "best": 0.8, "in_hindsight": 1.0,
                                "held_out_losses_over": 2}
    assert D.lost_pct == pytest.approx(50.3)


def test_a_sessions_stakes_come_from_its_fidelity_report():
    d = Dice.of(2.0, {"first_part": {"eligible": 3, "fell_back": 1, "stake_usd": 0.5, "lost_usd": 0.01},
                      "held_out": {"eligible": 9, "fell_back": 2, "stake_usd": 1.5, "lost_usd": 0.12}})
    assert d == Dice(2.0, 0.02, 1.5, 0.12) and d.lost_pct == pytest.approx(6.0)


def test_the_folder_summary_says_what_the_dice_leave_reachable():
    rs = [pop.SessionResult(f"s{i}", "measured", model="claude-opus-4-6", provider="anthropic", route="anthropic",
                            recorded_usd=10.0, signed_pct=1.0, random_miss_pct=0.0, stakes=d)
          for i, d in enumerate([A, B, C, D, E])]
    rep = pop.folder_report(rs)
    assert rep["distribution"]["dice"]["within_5pct"]["by_first_part"] == 0.8
    assert rep["distribution"]["dice_held_out"]["sessions"] == 5   # none of them in sample
    assert rep["sessions"][3]["held_out_random_miss_pct"] == pytest.approx(50.3)
    assert rep["sessions"][3]["first_part_miss_rate"] == 0.05
    assert (rep["sessions"][4]["held_out_stake_usd"], rep["sessions"][4]["held_out_lost_usd"]) == (200.0, 10.13)
    text = "\n".join(pop.summary_lines(rep))
    assert "cost over 5% of the bill in 2 of 5 sessions" in text and "within 5% on 80% at best (100% with the rates chosen in hindsight; 80% of the held out)" in text
