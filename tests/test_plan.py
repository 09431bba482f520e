"""The block plan and its permutations."""

from __future__ import annotations

import math
from itertools import combinations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from simdb.errors import InvalidInputError
from simdb.plan import BITS, TARGET_LEADING_BITS, TablePlan, block_widths, default_blocks

fingerprints = st.integers(min_value=0, max_value=2**64 - 1)
plans = st.integers(min_value=0, max_value=6).flatmap(
    lambda k: st.integers(min_value=k + 1, max_value=min(k + 4, 12)).map(lambda m: TablePlan.create(k, m))
)


def test_default_plan_for_k3_is_ten_tables_of_25_to_26_leading_bits() -> None:
    plan = TablePlan.create(3)
    assert plan.blocks == 5
    assert len(plan.tables) == math.comb(5, 3) == 10
    assert {t.leading_bits for t in plan.tables} == {25, 26}


@pytest.mark.parametrize("k", range(8))
def test_default_blocks_is_the_smallest_reaching_the_target(k: int) -> None:
    m = default_blocks(k)
    shortest = lambda blocks: sum(sorted(block_widths(BITS, blocks))[: blocks - k])  # noqa: E731
    assert shortest(m) >= TARGET_LEADING_BITS
    assert m == k + 1 or shortest(m - 1) < TARGET_LEADING_BITS


@given(st.integers(min_value=1, max_value=64))
def test_block_widths_cover_the_word(blocks: int) -> None:
    widths = block_widths(BITS, blocks)
    assert sum(widths) == BITS and len(widths) == blocks
    assert max(widths) - min(widths) <= 1


@given(plans, fingerprints)
def test_permute_then_unpermute_is_identity(plan: TablePlan, fp: int) -> None:
    for table in plan.tables:
        permuted = table.permute(fp)
        assert 0 <= permuted < 2**64
        assert table.unpermute(permuted) == fp


@given(plans, fingerprints, fingerprints)
def test_permutation_preserves_hamming_distance(plan: TablePlan, a: int, b: int) -> None:
    for table in plan.tables:
        assert (table.permute(a) ^ table.permute(b)).bit_count() == (a ^ b).bit_count()


@given(plans, st.lists(fingerprints, min_size=1, max_size=50))
def test_array_permutation_matches_scalar(plan: TablePlan, values: list[int]) -> None:
    array = np.array(values, dtype=np.uint64)
    for table in plan.tables:
        permuted = table.permute_array(array)
        assert permuted.tolist() == [table.permute(v) for v in values]
        assert table.unpermute_array(permuted).tolist() == values


@given(plans, fingerprints, st.data())
def test_every_fingerprint_within_k_shares_a_table_prefix(plan: TablePlan, fp: int, data: st.DataObject) -> None:
    flips = data.draw(st.lists(st.integers(0, 63), max_size=plan.k, unique=True))
    other = fp
    for bit in flips:
        other ^= 1 << bit
    assert any(
        table.permute(fp) & table.prefix_mask == table.permute(other) & table.prefix_mask for table in plan.tables
    )


def test_tables_are_every_choice_of_leading_blocks() -> None:
    plan = TablePlan.create(2, 5)
    assert [t.leading_blocks for t in plan.tables] == list(combinations(range(5), 3))


@pytest.mark.parametrize(
    ("k", "blocks"), [(-1, None), (64, None), (3, 3), (3, 2), (3, 65), ("3", None), (True, None), (20, 60)]
)
def test_invalid_plans_are_refused(k: object, blocks: object) -> None:
    with pytest.raises(InvalidInputError):
        TablePlan.create(k, blocks)  # type: ignore[arg-type]


def test_the_default_k_given_makes_the_default_plan(tmp_path) -> None:
    """Found by a new-user probe: -k 5, the documented default, made 8 blocks and 56 tables
    (1,093 bytes per document) where leaving k out made 6 and 6 (382)."""
    import simdb
    from simdb.config import DEFAULT_BLOCKS, DEFAULT_K

    with simdb.open(tmp_path / "unsaid") as unsaid, simdb.open(tmp_path / "said", k=DEFAULT_K) as said:
        assert said.plan == unsaid.plan and said.plan.blocks == DEFAULT_BLOCKS
    with simdb.open(tmp_path / "eight", k=DEFAULT_K, blocks=8) as eight:
        assert eight.plan.blocks == 8 and len(eight.plan.tables) == 56
    with simdb.open(tmp_path / "four", k=4) as four:
        assert four.plan.blocks == default_blocks(4)
