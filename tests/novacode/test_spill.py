"""Layer 1: spill of large tool results (N-SPILL-1…6), on real temporary directories."""

from __future__ import annotations

from itertools import combinations
from pathlib import Path

import pytest
from ctxsim.harness.model.conversation import Block, Message
from ctxsim.strategies.novacode.spill import (
    AGGREGATE_BUDGET_CHARS,
    PREVIEW_CHARS,
    SPILL_THRESHOLD_CHARS,
    names_spill_file,
    placeholder,
    plan_spills,
    spill_file_name,
    spill_message,
)
from hypothesis import given, settings
from hypothesis import strategies as st


def results(*contents: str, prefix: str = "toolu_") -> Message:
    return Message("user", tuple(Block.tool_result(f"{prefix}{i}", c) for i, c in enumerate(contents)))


def test_constants_are_the_seed_values():
    assert (SPILL_THRESHOLD_CHARS, PREVIEW_CHARS, AGGREGATE_BUDGET_CHARS) == (50_000, 2_000, 200_000)


# --- N-SPILL-1 ---------------------------------------------------------------------------------

def test_n_spill_1_result_over_50k_spills_to_file_with_placeholder(tmp_path: Path):
    content = "".join(chr(ord("a") + i % 26) for i in range(60_000))
    out = spill_message(results(content), tmp_path)
    path = tmp_path / "tool-results" / "toolu_0.txt"
    assert out.spilled == ["toolu_0"]
    assert path.read_text(encoding="utf-8") == content
    b = out.message.blocks[0]
    assert b.text.startswith("<persisted-output>") and b.text.endswith("</persisted-output>")
    assert content[:2_000] in b.text and content[:2_001] not in b.text  # exactly the first 2,000
    assert str(path) in b.text and "60,000 characters" in b.text
    assert b.meta["spilled"] == str(path) and b.meta["spilled_chars"] == 60_000
    assert b.id == "toolu_0" and b.type == "tool_result"


def test_n_spill_1_exactly_50k_stays_inline(tmp_path: Path):
    """'longer than 50,000': 50,000 itself is not spilled."""
    msg = results("x" * 50_000)
    out = spill_message(msg, tmp_path)
    assert out.spilled == [] and out.message is msg
    assert not (tmp_path / "tool-results").exists()


def test_n_spill_1_file_name_from_unsafe_id():
    assert spill_file_name("toolu_01ABC") == "toolu_01ABC.txt"
    # a changed id gains a digest of the whole id (sha256[:16]): names stay injective (issue 31)
    assert spill_file_name("../etc/passwd") == ".._etc_passwd~7fef78f53440346c.txt"
    assert spill_file_name("..") == "..~5ec1f7e700f37c3d.txt"
    assert spill_file_name(".") == ".~cdb4ee2aea69cc6a.txt" != spill_file_name(" ") == "_~36a9e7f1c95b82ff.txt"


# --- N-SPILL-2 ---------------------------------------------------------------------------------

def test_n_spill_2_five_45k_results_spill_exactly_one(tmp_path: Path):
    """5 × 45,000 = 225,000 > 200,000. Spilling one frees 45,000 − ~2,200 (its placeholder):
    ≈ 182,200 ≤ 200,000, so exactly one spill; all equal, so the first (lowest index) goes."""
    out = spill_message(results(*(["y" * 45_000] * 5)), tmp_path)
    assert out.spilled == ["toolu_0"]
    total = sum(len(b.text) for b in out.message.blocks)
    assert 180_000 < total <= 200_000


def test_n_spill_2_largest_first(tmp_path: Path):
    """41k + 49k + 45k + 44k + 43k = 222,000 > 200,000: the 49k one (index 1) is spilled and the
    total drops to 173,000 + its placeholder."""
    sizes = [41_000, 49_000, 45_000, 44_000, 43_000]
    out = spill_message(results(*("z" * n for n in sizes)), tmp_path)
    assert out.spilled == ["toolu_1"]


def test_n_spill_2_fewest_spills_two_needed(tmp_path: Path):
    """6 × 48,000 = 288,000. Each spill frees 48,000 − ~2,200 ≈ 45,800: one leaves ≈ 242,200 (over),
    two leave ≈ 196,400 (within): two spills."""
    out = spill_message(results(*(["w" * 48_000] * 6)), tmp_path)
    assert len(out.spilled) == 2
    assert sum(len(b.text) for b in out.message.blocks) <= AGGREGATE_BUDGET_CHARS


def test_n_spill_2_plan_by_hand():
    """sizes 100, 300, 200, 50; placeholder 10; threshold 250; budget 200.
    Step 1: 300 > 250 is spilled → 100 + 10 + 200 + 50 = 360 > 200.
    Step 2: largest left is 200 → 360 − 190 = 170 ≤ 200: stop. Plan [1, 2]."""
    assert plan_spills([100, 300, 200, 50], [10] * 4, [False] * 4, threshold=250, budget=200) == [1, 2]


def test_n_spill_2_budget_unreachable_spills_all_eligible():
    """Exempt results stay whatever the budget; results shorter than their placeholder are never
    spilled (it would grow the message). sizes 500 (exempt), 150, 80; placeholder 100; budget 300:
    500 + 150 + 80 = 730; spill 150 → 680; 80 < 100 is not eligible: plan [1], still over."""
    assert plan_spills([500, 150, 80], [100] * 3, [True, False, False], threshold=1_000, budget=300) == [1]


def test_plan_rejects_mismatched_lengths():
    with pytest.raises(ValueError):
        plan_spills([1, 2], [1], [False, False])


def _total(sizes, spilled, chosen):
    return sum(spilled[i] if i in chosen else sizes[i] for i in range(len(sizes)))


@settings(max_examples=300, deadline=None)
@given(
    sizes=st.lists(st.integers(0, 1_000), min_size=0, max_size=8),
    exempt_bits=st.lists(st.booleans(), min_size=8, max_size=8),
    threshold=st.integers(100, 1_200),
    budget=st.integers(0, 3_000),
    ph=st.integers(1, 120),
)
def test_n_spill_2_property_budget_holds_with_fewest_spills(sizes, exempt_bits, threshold, budget, ph):
    """For any message: every eligible result over the threshold is spilled; if some choice of
    spills meets the budget, the plan meets it, and no valid choice meets it with fewer spills
    (brute force over all subsets); otherwise everything eligible is spilled."""
    n = len(sizes)
    exempt = exempt_bits[:n]
    spilled = [ph] * n
    plan = plan_spills(sizes, spilled, exempt, threshold=threshold, budget=budget)
    chosen = set(plan)
    assert len(chosen) == len(plan)  # no result spilled twice
    assert all(not exempt[i] for i in plan)  # N-SPILL-3/4: exempt never spilled
    mandatory = {i for i in range(n) if not exempt[i] and sizes[i] > threshold}
    assert mandatory <= chosen
    optional = [i for i in range(n) if not exempt[i] and i not in mandatory and sizes[i] > ph]
    assert chosen <= mandatory | set(optional)
    best = None
    for k in range(len(optional) + 1):
        for extra in combinations(optional, k):
            if _total(sizes, spilled, mandatory | set(extra)) <= budget:
                best = len(mandatory) + k
                break
        if best is not None:
            break
    if best is None:
        assert chosen == mandatory | set(optional)
    else:
        assert _total(sizes, spilled, chosen) <= budget
        assert len(plan) == best


# --- N-SPILL-3 ---------------------------------------------------------------------------------

@pytest.mark.parametrize("inp, expected", [
    ({"file_path": "/run/x/tool-results/toolu_1.txt"}, True),
    ({"path": "tool-results/toolu_1.txt"}, True),
    ({"command": "cat '/tmp/s/tool-results/toolu_9.txt' | head"}, True),
    ({"args": [{"file": "C:\\s\\tool-results\\t.txt"}]}, True),
    ({"file_path": "src/tool-results-view.py"}, False),
    ({"file_path": "README.md"}, False),
    ({}, False),
    (None, False),
])
def test_n_spill_3_names_spill_file(inp, expected):
    assert names_spill_file(inp) is expected


def test_n_spill_3_names_file_under_this_runs_spill_dir(tmp_path: Path):
    d = tmp_path / "tool-results"
    assert names_spill_file({"file_path": f"{d}/toolu_1.txt"}, d)


def test_n_spill_3_readback_is_exempt_and_never_spilled_again(tmp_path: Path):
    content = "r" * 60_000
    out = spill_message(results(content), tmp_path, readback_ids={"toolu_0"})
    assert out.spilled == [] and out.readbacks == ["toolu_0"]
    b = out.message.blocks[0]
    assert b.text == content and b.meta["spill_exempt"] == "readback"
    assert not (tmp_path / "tool-results").exists()


def test_n_spill_3_readback_exempt_does_not_block_budget_for_others(tmp_path: Path):
    """A 150k read-back (exempt) + two 40k results = 230,000 > 200,000: the read-back stays, one
    40k result is spilled: 150,000 + 40,000 + ~2,200 ≤ 200,000."""
    msg = results("a" * 150_000, "b" * 40_000, "c" * 40_000)
    out = spill_message(msg, tmp_path, readback_ids={"toolu_0"})
    assert out.spilled == ["toolu_1"]
    assert out.message.blocks[0].text == "a" * 150_000


# --- N-SPILL-4 ---------------------------------------------------------------------------------

def test_n_spill_4_unwritable_directory_marks_exempt_and_stays_inline(tmp_path: Path):
    (tmp_path / "tool-results").write_text("a file where the directory should be")
    content = "q" * 60_000
    out = spill_message(results(content), tmp_path)
    assert out.spilled == [] and out.failed == ["toolu_0"]
    b = out.message.blocks[0]
    assert b.text == content and b.meta["spill_exempt"] == "write_failed"


def test_n_spill_4_after_a_failed_write_the_rest_of_the_message_is_not_tried(tmp_path: Path):
    """Five results 41k..49k (222,000 > 200,000): the first choice (49k, the largest) fails. It stays
    inline, exempt, written once; nothing else of this message is tried against the same disk (the
    budget is left unmet: nothing else may be done to a result, N-SPILL-5)."""
    sizes = [41_000, 49_000, 45_000, 44_000, 43_000]
    attempts: list[str] = []

    def fail(tid: str) -> bool:
        attempts.append(tid)
        return tid == "toolu_1"

    out = spill_message(results(*("z" * n for n in sizes)), tmp_path, fail=fail)
    assert out.failed == ["toolu_1"] and out.spilled == [] and out.not_tried == []
    assert attempts == ["toolu_1"]
    assert [len(b.text) for b in out.message.blocks] == sizes
    assert not (tmp_path / "tool-results").exists()


def test_n_spill_4_three_over_threshold_second_fails_third_not_tried(tmp_path: Path):
    """Three results over 50,000 (60k, 70k, 80k) are all due (N-SPILL-1), in message order. The first
    is written; the second fails; the third is not tried (it stays inline, marked disk_failed). The
    next message tries the disk again."""
    attempts: list[str] = []

    def fail(tid: str) -> bool:
        attempts.append(tid)
        return tid == "toolu_1"

    out = spill_message(results("a" * 60_000, "b" * 70_000, "c" * 80_000), tmp_path, fail=fail)
    assert attempts == ["toolu_0", "toolu_1"]
    assert (out.spilled, out.failed, out.not_tried) == (["toolu_0"], ["toolu_1"], ["toolu_2"])
    b0, b1, b2 = out.message.blocks
    assert b0.text.startswith("<persisted-output>") and (tmp_path / "tool-results" / "toolu_0.txt").exists()
    assert b1.meta["spill_exempt"] == "write_failed" and b2.meta["spill_exempt"] == "disk_failed"
    assert b2.text == "c" * 80_000
    nxt = spill_message(results("d" * 60_000, prefix="next_"), tmp_path, fail=fail)
    assert nxt.spilled == ["next_0"]


# --- N-SPILL-5 / N-SPILL-6 -----------------------------------------------------------------------

def test_n_spill_5_spill_loses_nothing(tmp_path: Path):
    """Spilling is not truncation: the file holds every character, non-ASCII and newlines included."""
    content = ("第一行：错误 \r\n" + "🙂 emoji\ttab\n") * 5_000
    assert len(content) > SPILL_THRESHOLD_CHARS
    out = spill_message(results(content), tmp_path)
    path = Path(out.message.blocks[0].meta["spilled"])
    assert path.read_bytes().decode("utf-8") == content


def test_n_spill_6_input_message_is_not_modified(tmp_path: Path):
    msg = results("m" * 60_000, "small")
    before = [b.text for b in msg.blocks]
    out = spill_message(msg, tmp_path)
    assert [b.text for b in msg.blocks] == before
    assert out.message is not msg
    assert out.message.blocks[1] is msg.blocks[1]  # untouched blocks are shared, not copied


def test_placeholder_of_short_content_has_no_ellipsis():
    p = placeholder("abc", "/x/t.txt")
    assert "abc\n</persisted-output>" in p and "..." not in p


def test_text_blocks_in_a_results_message_are_left_alone(tmp_path: Path):
    msg = Message("user", (Block.tool_result("t1", "x" * 60_000), Block.text_block("y" * 60_000)))
    out = spill_message(msg, tmp_path)
    assert out.spilled == ["t1"] and out.message.blocks[1] is msg.blocks[1]
