"""A "did you mean" for an operation written in another case, spelling or library's words, and an explanation of
PyTorch's placements: the parser's error (``sa.parse`` and every command) carries it as the fix, in full."""

from __future__ import annotations

import pytest

import shardalg as sa
from shardalg.errors import ParseError

OPS = "AllGather, ReduceScatter, AllReduce, AllToAll, Slice, Permute, Shift, Send"

CASES = [
    (
        "Allgather_X(A[I_X, J]) -> A[I, J]",
        "error: expected ':', '[' or a prime (') after 'X', found '(' [syntax]\n"
        "  Allgather_X(A[I_X, J]) -> A[I, J]\n"
        "             ^\n"
        f"  fix: did you mean AllGather? write AllGather_X(...); the operations are {OPS}, spelled so",
    ),
    (
        "psum_X(C[I, K]{U_X}) -> C[I, K]",
        "error: expected ':', '[' or a prime (') after 'X', found '(' [syntax]\n"
        "  psum_X(C[I, K]{U_X}) -> C[I, K]\n"
        "        ^\n"
        "  fix: did you mean AllReduce? psum is JAX's lax.psum; write AllReduce_X(...)",
    ),
    (
        "all_gather_X(A[I_X, J]) -> A[I, J]",
        "error: expected ':', '[' or a prime (') after 'gather', found '_' [syntax]\n"
        "  all_gather_X(A[I_X, J]) -> A[I, J]\n"
        "            ^\n"
        "  fix: did you mean AllGather? all_gather is JAX's lax.all_gather and PyTorch's all_gather; "
        "write AllGather_X(...)",
    ),
    (
        "psum_scatter_{X,K}(C[I, K]{U_X}) -> C[I, K_X]",
        "error: expected ':', '[' or a prime (') after 'scatter', found '_' [syntax]\n"
        "  psum_scatter_{X,K}(C[I, K]{U_X}) -> C[I, K_X]\n"
        "              ^\n"
        "  fix: did you mean ReduceScatter? psum_scatter is JAX's lax.psum_scatter; write ReduceScatter_{X,K}(...)",
    ),
    (
        "all_to_all_X(A[I_X, J]) -> A[I, J_X]",
        "error: expected ':', '[' or a prime (') after 'to', found '_' [syntax]\n"
        "  all_to_all_X(A[I_X, J]) -> A[I, J_X]\n"
        "        ^\n"
        "  fix: did you mean AllToAll? all_to_all is JAX's lax.all_to_all and PyTorch's all_to_all; "
        "write AllToAll_X(...)",
    ),
    (
        "ppermute_X(A[I_X, J]) -> A[I_X, J]",
        "error: expected ':', '[' or a prime (') after 'X', found '(' [syntax]\n"
        "  ppermute_X(A[I_X, J]) -> A[I_X, J]\n"
        "            ^\n"
        "  fix: did you mean Shift or Permute? ppermute is JAX's lax.ppermute; Shift_{X,+1}(A[I_X, J]) moves each "
        "block one step along X, Permute moves blocks between the axes of a mesh",
    ),
    (
        "AllGathr_X(A[I_X, J]) -> A[I, J]",
        "error: expected ':', '[' or a prime (') after 'X', found '(' [syntax]\n"
        "  AllGathr_X(A[I_X, J]) -> A[I, J]\n"
        "            ^\n"
        f"  fix: did you mean AllGather? write AllGather_X(...); the operations are {OPS}, spelled so",
    ),
    (
        "A[I, J] -> Shard(0)",
        "error: expected ':', '[', a prime (') or '_' after 'Shard', found '(' [syntax]\n"
        "  A[I, J] -> Shard(0)\n"
        "                  ^\n"
        "  fix: Shard(d) is PyTorch's DTensor placement; the notation writes the mesh axis on the dim it shards: "
        "A[I_X, J] shards I (dim 0) over X",
    ),
    (
        "A[I, J] -> Replicate()",
        "error: expected ':', '[', a prime (') or '_' after 'Replicate', found '(' [syntax]\n"
        "  A[I, J] -> Replicate()\n"
        "                      ^\n"
        "  fix: Replicate() is PyTorch's DTensor placement; the notation leaves a replicated dim bare: A[I, J] is "
        "whole on every device",
    ),
    (
        "C[I, K] -> Partial()",
        "error: expected ':', '[', a prime (') or '_' after 'Partial', found '(' [syntax]\n"
        "  C[I, K] -> Partial()\n"
        "                    ^\n"
        "  fix: Partial() is PyTorch's DTensor placement; the notation writes partial sums as unreduced axes: "
        "C[I, K]{U_X} still needs a sum over X",
    ),
]


@pytest.mark.parametrize(("text", "said"), CASES, ids=[c[0].split("(")[0] for c in CASES])
def test_parse_error_says_what_was_meant(text, said):
    with pytest.raises(ParseError) as err:
        sa.parse(text)
    assert str(err.value) == said


@pytest.mark.parametrize(
    "text", ["Foo_X(A[I_X, J]) -> A[I, J]", "A[I J]", "AllGather_X(A[I_X, J]) -> A[I, J] B"]
)
def test_no_hint_for_other_words_or_other_errors(text):
    with pytest.raises(ParseError) as err:
        sa.parse(text)
    assert err.value.fix is None


def test_cli_check_says_did_you_mean(capsys):
    from shardalg.cli import main

    assert main(["check", "Allgather_X(A[I_X, J]) -> A[I, J]", "--mesh", "X=4"]) == 2
    assert "fix: did you mean AllGather?" in capsys.readouterr().err
    assert main(["check", "psum_X(C[I, K]{U_X}) -> C[I, K]", "--mesh", "X=4"]) == 2
    assert "fix: did you mean AllReduce?" in capsys.readouterr().err
