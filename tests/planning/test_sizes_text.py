"""``sa.plans`` takes sizes as the CLI writes them (``"I=1024,J=1024"``), as ``search`` and ``memory`` do; bad
text is a UsageError naming the item, not a ValueError from ``dict``."""

from __future__ import annotations

import pytest

import shardalg as sa

STATEMENT = "A[I, J_X] · B[J_X, K] -> C[I, K]"


def test_sizes_as_text_rank_as_the_mapping_does():
    mesh = sa.Mesh("X=4,Y=2")
    as_text = sa.plans(STATEMENT, mesh, sizes="I=1024,J=1024,K=1024", hw="tpu-v5e")
    as_map = sa.plans(STATEMENT, mesh, sizes={"I": 1024, "J": 1024, "K": 1024}, hw="tpu-v5e")
    assert [str(p) for p in as_text] == [str(p) for p in as_map]


def test_bad_sizes_text_is_a_usage_error():
    with pytest.raises(sa.UsageError, match=r"bad size 'I=10x': write NAME=INT"):
        sa.plans(STATEMENT, sa.Mesh("X=4,Y=2"), sizes="I=10x")
