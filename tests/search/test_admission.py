"""A search admits a candidate after checking its program statement by statement, each statement once per
search (:meth:`shardalg.search.price.Pricer.check`): it admits exactly what checking each whole program
admits, and refuses the rest with the same error."""

from __future__ import annotations

import pytest

from shardalg.algebra.context import as_sizes
from shardalg.errors import ShardalgError
from shardalg.models.expand import shard
from shardalg.models.program import model_program
from shardalg.search.price import Pricer
from shardalg.search.space import Pruned, enumerate_space
from tests.search.programs import TRANSFORMER_FN

from .test_pieces import _prepared


def _outcome(program, mesh, sizes, **check):
    """The model of ``program``, or the error (its class and message) that refuses it."""
    try:
        return model_program(program, mesh, sizes, **check)
    except ShardalgError as err:
        return type(err), str(err)


@pytest.mark.parametrize("mesh", ["X=2,Y=2", "X=2,Y=3"])
def test_statement_by_statement_admits_what_the_whole_program_check_admits(mesh):
    """Every candidate of the causal layer checked under the sizes it was made for, and under sizes some of its
    shardings do not divide (the space's own filter drops those before admission: here they reach it)."""
    prog, space, st, _ = _prepared(TRANSFORMER_FN, mesh, "B=12,T=12,S=12,D=24,H=6,E=6,F=48", "train", None)
    odd = as_sizes("B=4,T=6,S=6,D=12,H=3,E=4,F=24")
    pricer = Pricer(prog, space, st, Pruned())
    refused = admitted = 0
    for a in enumerate_space(space, Pruned(), symmetry=False):
        program = shard(pricer.base, a.param_map, a.activation_map, sequence=a.megatron)
        for sizes in (st.sizes, odd):
            whole = _outcome(program, st.mesh, sizes)
            assert _outcome(program, st.mesh, sizes, check=pricer.check) == whole, (a, sizes)
            refused += isinstance(whole, tuple)
            admitted += not isinstance(whole, tuple)
    assert refused and admitted  # both ways are seen
