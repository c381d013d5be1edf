"""The golden file's queries, as data: what ``tests/golden/capture.py`` runs and records.

Mostly ``shardalg`` argument lists (the command line is the stable edge): the README's commands and every
subcommand's --help examples, the seeds' and the book's worked cases, ``plan --all`` for a spread of einsums,
collectives and reshardings under each overlap policy on two chips (tpu-v5p and h100), ``cost`` symbolic and on
both chips, ``backward``, ``verify``, ``compare``, ``memory``, ``step``, ``fit``, ``search``, ``strategy-map``
(small meshes), ``shape``, ``check`` and usage errors, ``parse`` in every format. A few calls of the top-level
public functions ``shardalg.plans``, ``shardalg.cost``, ``shardalg.backward``, ``shardalg.compare`` with plain
arguments (strings and dicts) print every plan with its symbolic total and its seconds under each policy.

Only queries that write no file are here (``--out``, ``--plot``, ``notes`` are left out). Appending queries
changes nothing but the file's length; the golden file must then be written again on the old code.
"""

from __future__ import annotations

from typing import NamedTuple


class Query(NamedTuple):
    """One query. ``argv``: the arguments of ``shardalg`` or, with ``api``, of ``shardalg.<api>``.
    ``stdin``: text for standard input, or the argv of a ``shardalg`` run whose stdout is piped in."""

    argv: tuple[str, ...]
    stdin: str | tuple[str, ...] | None = None
    api: str | None = None
    kwargs: tuple[tuple[str, object], ...] = ()


def cli(*argv: str) -> Query:
    return Query(tuple(argv))


def piped(producer: str | tuple[str, ...], *argv: str) -> Query:
    return Query(tuple(argv), stdin=producer)


def api(name: str, *args: object, **kwargs: object) -> Query:
    return Query(tuple(args), api=name, kwargs=tuple(kwargs.items()))  # type: ignore[arg-type]


CHIPS = ("tpu-v5p", "h100")
POLICIES = ("steady", "schedule", "serial")
MLP = "params W_in, W_out; In[B, D] * W_in[D, F] -> Tmp[B, F]; Tmp[B, F] * W_out[F, D] -> Out[B, D]"
MLP_SIZES = "B=128,D=8192,F=32768"
Q4_A = "X[B, D_X] ·_LOCAL Y[D_X, F] -> Z[B, F]{U_X}; AllReduce_X(Z[B, F]{U_X}) -> Z[B, F]"
Q4_B = "X[B, D] · AllGather_X(Y[D_X, F]) -> Z[B, F]"
FSDP_FWD = "In[B_X, D] · W[D_X, F] -> Out[B_X, F]"
FSDP_BWD = (
    "AllGather_X(W[D_X, F]) -> W[D, F]; dOut[B_X, F] · W[D, F] -> dIn[B_X, D]; "
    "In[B_X, D] ·_LOCAL dOut[B_X, F] -> dW[D, F]{U_X}; AllReduce_X(dW[D, F]{U_X}) -> dW[D, F]; "
    "Slice_{X,D}(dW[D, F]) -> dW[D_X, F]"
)

# ---- the README's commands (pipes as piped queries; `2>&1` dropped: stderr is recorded anyway) ----------
README = [
    cli("compare", Q4_A, Q4_B, "--mesh", "X", "--solve-for", "D"),
    cli("check", "A[I_X, J] ·_LOCAL B[J, K_X] -> C[I, K]", "--mesh", "X=4,Y=2"),
    cli("check", "A[I_X, J] · B[J, K_X] -> C[I, K]", "--mesh", "X=4,Y=2"),
    cli("parse", r"A[I_{XY}, J] \cdot B[J, K] \to C[I_{XY}, K]{U_Z}", "--format", "latex"),
    cli("shape", "A[I_X, J, K]", "--mesh", "X=4,Y=8,Z=2"),
    cli(
        "plan",
        "X[B, D] · Y[D_X, F] -> Z[B, F]",
        "--mesh",
        "X=4",
        "--sizes",
        "B=512,D=8192,F=16384",
        "--hw",
        "tpu-v5p",
        "--all",
    ),
    cli(
        "cost",
        "AllGather_X(W[D_X, F]) -> W[D, F]; AllGather_Y(In[B_Y, D]) -> In[B, D]; In[B, D] · W[D, F] -> "
        "Out[B, F]",
        "--mesh",
        "X=4,Y=2",
        "--sizes",
        "B=2048,D=4096,F=8192",
        "--hw",
        "tpu-v5p",
        "--schedule",
    ),
    cli("simulate", "A[I_X, J] · B[J, K_X] -> C[I_X, K]", "--mesh", "X=4"),
    cli(
        "backward", "X[B, D] · W1[D, F_Y] -> H[B, F_Y]; H[B, F_Y] · W2[F_Y, D] -> Out[B, D]", "--mesh", "Y=4"
    ),
    cli("backward", "A[I_X, J] · B[J, K_X] -> C[I_X, K]", "--mesh", "X=8"),
    cli("backward", "In[B, D_Y] · W_in[D, F_Y] -> H[B, F_Y]", "--mesh", "Y=4", "--keep-gathered"),
    cli(
        "plan",
        "Shift_{X,+1}(A[I_X, J]) -> A[I_X, J]",
        "--mesh",
        "X=4",
        "--sizes",
        "I=1024,J=1024",
        "--hw",
        "tpu-v5p",
    ),
    cli(
        "verify",
        "In[B_X, D] · W[D, F] -> Out[B_X, F]",
        "dOut[B_X, F] · W[D, F] -> dIn[B_X, D]; In[B_X, D] ·_LOCAL dOut[B_X, F] -> dW[D, F]{U_X}",
        "--mesh",
        "X=4",
    ),
    cli("verify", FSDP_FWD, FSDP_BWD, "--mesh", "X=4", "--sizes", "B=512,D=1024,F=4096"),
    cli("proofs", "alltoall_quarter"),
    cli("export", "jax", "A[I, J_X] · B[J_X, K] -> C[I, K_X]", "--mesh", "X=4"),
    cli("shape", "A: int8[I_XY, J]", "--mesh", "X=2,Y=8,Z=2", "--sizes", "I=128,J=2048", "--json"),
    piped(
        ("model", "show", "llama-3-70b", "--params", "D=X", "--activations", "B=X"),
        "memory",
        "-",
        "--mesh",
        "X=64",
        "--sizes",
        "B=64,T=4096",
        "--hw",
        "base=tpu-v5p,hbm=96e9",
        "--remat",
        "block",
    ),
    piped(
        ("model", "show", "llama-3-70b", "--params", "D=X,F=Y,K=Y", "--activations", "B=X,F=Y,K=Y"),
        "memory",
        "-",
        "--mesh",
        "X=16,Y=4",
        "--sizes",
        "B=64,T=4096",
        "--hw",
        "base=tpu-v5p,hbm=96e9",
        "--remat",
        "block",
    ),
    piped(
        ("model", "show", "llama-3-70b", "--params", "D=X,F=Y,K=Y", "--activations", "B=X,F=Y,K=Y"),
        "fit",
        "-",
        "--mesh",
        "X=16,Y=4",
        "--sizes",
        "T=4096",
        "--hw",
        "base=tpu-v5p,hbm=96e9",
        "--remat",
        "block",
        "--solve-for",
        "B",
    ),
    piped(
        ("model", "show", "llama-3-70b", "--phase", "decode", "--dtype", "int8"),
        "fit",
        "-",
        "--mesh",
        "X=1",
        "--sizes",
        "B=1,S=8192",
        "--hw",
        "tpu-v5e",
        "--solve-for",
        "slice",
    ),
    piped(
        ("model", "show", "llama-3-70b", "--activations", "B=X"),
        "step",
        "-",
        "--mesh",
        "X=8960",
        "--sizes",
        "B=8960,T=4096",
        "--hw",
        "tpu-v5p",
        "--mfu",
        "0.4",
        "--tokens",
        "15e12",
    ),
    cli(
        "search",
        MLP,
        "--mesh",
        "X=2,Y=2",
        "--sizes",
        MLP_SIZES,
        "--hw",
        "tpu-v5e",
        "--memory",
        "300MB",
        "--mode",
        "infer",
        "--top",
        "3",
    ),
    cli(
        "strategy-map",
        MLP,
        "--mesh",
        "X=4,Y=4,Z=4",
        "--hw",
        "tpu-v5p",
        "--sizes",
        "B=48000,D=8192,F=32768",
        "--memory",
        "hbm",
    ),
    cli(
        "strategy-map",
        MLP,
        "--mesh",
        "X=4,Y=4,Z=4",
        "--hw",
        "tpu-v5p",
        "--sizes",
        "B=48000,D=8192,F=32768",
        "--memory",
        "hbm",
        "--format",
        "latex",
    ),
    cli("--version"),
]

# ---- every subcommand's --help examples that write no file ----------------------------------------------
HELP_EXAMPLES = [
    piped("A[I_X, J]", "parse", "-", "--format", "json"),
    cli("plan", "A[I, J_X] · B[J, K] -> C[I, K]", "--mesh", "X=4", "--all"),
    cli(
        "plan",
        "X[B, D] · Y[D_X, F] -> Z[B, F]",
        "--mesh",
        "X=4",
        "--sizes",
        "B=512,D=8192,F=16384",
        "--hw",
        "tpu-v5p",
        "--json",
    ),
    cli("plan", "A[I_X, J] -> A[I, J_X]", "--mesh", "X=4"),
    cli("latex", "A[I_X, J] · B[J, K] -> C[I_X, K]"),
    cli("latex", "A[I, J_X] · B[J_X, K] -> C[I, K_X]", "--mesh", "X=4", "--plan", "--markdown"),
    cli(
        "cost",
        "AllGather_Y(bf16[E_Y, F])",
        "--mesh",
        "X=8,Y=4",
        "--sizes",
        "E=2048,F=8192",
        "--hw",
        "tpu-v5e",
    ),
    cli(
        "optimum",
        "AllGather_X(Win[D_X, F_Y]) -> Win[D, F_Y]; AllGather_Y(In[B_X, D_Y]) -> In[B_X, D]",
        "--mesh",
        "X,Y",
        "--over",
        "X",
        "--subject-to",
        "X*Y=N",
        "--symbolic-links",
    ),
    cli(
        "bound",
        "In[B_X, D] ·_LOCAL dOut[B_X, F] -> dW[D, F]{U_X}; AllReduce_X(dW[D, F]{U_X}) -> dW[D, F]",
        "--mesh",
        "X",
        "--solve-for",
        "B",
        "--symbolic-links",
    ),
    cli("hw", "list"),
    *[
        cli("hw", "show", chip)
        for chip in ("tpu-v4p", "tpu-v5e", "tpu-v5p", "tpu-v6e", "h100", "h200", "b200")
    ],
    cli("export", "torch", FSDP_FWD, "--mesh", "X=4"),
    cli("export", "torch", FSDP_FWD, "--mesh", "X=4", "--backward"),
    cli("show", "A[I_X, J]{U_Y}", "--mesh", "X=2,Y=2"),
    cli("show", "AllGather_X(A[I_X, J])", "--mesh", "X=4", "--format", "tikz"),
    piped(
        ("model", "show", "llama-3-8b", "--params", "D=X", "--activations", "B=X"),
        "memory",
        "-",
        "--mesh",
        "X=64",
        "--sizes",
        "B=64,T=4096",
        "--hw",
        "tpu-v5p",
    ),
    piped(
        ("model", "show", "llama-3-70b", "--phase", "decode", "--dtype", "int8"),
        "fit",
        "-",
        "--mesh",
        "X=4,Y=4",
        "--sizes",
        "S=8192",
        "--hw",
        "tpu-v5e",
        "--solve-for",
        "B",
    ),
    cli("model", "show", "llama-3-70b", "--params", "D=X,F=Y", "--activations", "B=X,F=Y"),
    cli("model", "list"),
    cli(
        "search",
        MLP,
        "--mesh",
        "X=2,Y=2",
        "--sizes",
        MLP_SIZES,
        "--hw",
        "tpu-v5e",
        "--memory",
        "300MB",
        "--mode",
        "infer",
    ),
]

# ---- the seeds' and the book's worked cases -------------------------------------------------------------
BD = "B=1024,D=4096"
SEEDS = [
    # seed 000, quick questions: the local shape and bytes of a sharded array
    cli("shape", "A: fp32[I_XY, J]", "--mesh", "X=8,Y=2", "--sizes", "I=1024,J=4096"),
    cli("shape", "A: int8[I_XY, J]", "--mesh", "X=2,Y=8,Z=2", "--sizes", "I=128,J=2048"),
    cli("check", "A[I_X, J_X]", "--mesh", "X=4"),
    # seed 000, question 2 (v5e): AllGather_Y of bf16[E_Y, F], wrapped and not, bandwidth- and latency-bound
    *[
        cli(
            "cost",
            "AllGather_Y(bf16[E_Y, F]) -> bf16[E, F]",
            "--mesh",
            mesh,
            "--sizes",
            sizes,
            "--hw",
            "tpu-v5e",
            "--overlap",
            "steady",
        )
        for mesh in ("X=8,Y=4", "X=8,Y=4:ring")
        for sizes in ("E=2048,F=8192", "E=256,F=256")
    ],
    # seed 000, problems 2 and 3: v4p 4x4x4, B=1024, D=4096 in bf16
    *[
        cli("cost", text, "--mesh", "X=4,Y=4,Z=4", "--sizes", BD, "--hw", "tpu-v4p", "--overlap", "steady")
        for text in (
            "AllGather_X(bf16[B_X, D_Y])",
            "AllGather_XY(bf16[B_X, D_Y])",
            "AllReduce_Z(bf16[B_X, D_Y]{U_Z})",
            "AllGather_Z(bf16[B, D_Z])",
            "AllToAll_{X,D}(bf16[B_X, D])",
            "ReduceScatter_{X,D}(bf16[B, D]{U_X})",
            "AllReduce_XY(bf16[B, D]{U_XY})",
        )
    ],
    # seed 000, question 4 and the FSDP+TP optimum (seed 002)
    cli("compare", Q4_A, Q4_B, "--mesh", "X", "--solve-for", "D", "--json"),
    cli("compare", Q4_A, Q4_B, "--mesh", "X=8", "--solve-for", "D", "--latency"),
    cli("compare", Q4_A, Q4_B, "--mesh", "X", "--solve-for", "D", "--regime", "total"),
    cli("compare", Q4_A, Q4_B, "--mesh", "X", "--solve-for", "D", "--regime", "serial"),
    cli(
        "compare",
        Q4_A,
        Q4_B,
        "--mesh",
        "X=8",
        "--sizes",
        "B=1024,F=8192",
        "--hw",
        "tpu-v5e",
        "--solve-for",
        "D",
    ),
    cli(
        "compare", Q4_A, Q4_B, "--mesh", "X=8", "--sizes", "B=1024,F=8192", "--hw", "h100", "--solve-for", "D"
    ),
    cli(
        "optimum",
        "AllGather_X(Win[D_X, F_Y]) -> Win[D, F_Y]; AllGather_Y(In[B_X, D_Y]) -> In[B_X, D]",
        "--mesh",
        "X,Y",
        "--over",
        "X",
        "--subject-to",
        "X*Y=N",
    ),
    cli(
        "bound",
        "In[B_X, D] ·_LOCAL dOut[B_X, F] -> dW[D, F]{U_X}; AllReduce_X(dW[D, F]{U_X}) -> dW[D, F]",
        "--mesh",
        "X",
        "--solve-for",
        "B",
    ),
    cli(
        "bound",
        "In[B_X, D] ·_LOCAL dOut[B_X, F] -> dW[D, F]{U_X}; AllReduce_X(dW[D, F]{U_X}) -> dW[D, F]",
        "--mesh",
        "X=8",
        "--hw",
        "h100",
        "--solve-for",
        "B",
    ),
    # seed 003, demo 4: the alpha-beta collectives on 8 H100s at 16 KiB and 64 MiB, ring and recursive doubling
    *[
        cli(
            "cost",
            f"{op}(bf16[N_X])" if op == "AllGather_X" else f"{op}(bf16[N]{{U_X}})",
            "--mesh",
            "X=8",
            "--sizes",
            size,
            "--hw",
            "h100",
            "--model",
            model,
            "--overlap",
            "steady",
        )
        for op in ("AllGather_X", "AllReduce_X", "ReduceScatter_{X,N}")
        for size in ("N=8192", "N=33554432")
        for model in ("alpha-beta", "alpha-beta-rd")
    ],
    # seed 004: column and row partition (Megatron-LM)
    cli("plan", "X[B, D] · W[D, F_Y] -> H[B, F_Y]", "--mesh", "Y=4", "--all"),
    cli("plan", "H[B, F_Y] · W[F_Y, D] -> Out[B, D]", "--mesh", "Y=4", "--all"),
    cli("simulate", "H[B, F_Y] · W[F_Y, D] -> Out[B, D]", "--mesh", "Y=4"),
    # the book's whole-model figures (chapters 5-8)
    cli(
        "memory",
        "params W_in, W_out; In[B_X, D] * W_in[D, F] -> Tmp[B_X, F]; Tmp[B_X, F] * W_out[F, D] -> "
        "Out[B_X, D]",
        "--mesh",
        "X=8",
        "--sizes",
        "D=4096,F=16384",
        "--hw",
        "base=tpu-v5p,hbm=96e9",
        "--grads",
        "none",
    ),
    piped(
        ("model", "show", "llama-2-13b"),
        "memory",
        "-",
        "--mesh",
        "X=1",
        "--sizes",
        "B=4000,T=4000",
        "--remat",
        "Gt,U,Out",
    ),
    piped(
        ("model", "show", "llama-3-70b", "--phase", "decode", "--kv-dtype", "int8"),
        "memory",
        "-",
        "--mesh",
        "X=1",
        "--sizes",
        "B=1,S=1",
    ),
    piped(
        ("model", "show", "llama-3-70b", "--activations", "B=X"),
        "step",
        "-",
        "--mesh",
        "X=8960",
        "--sizes",
        "B=8960,T=4096",
        "--hw",
        "tpu-v5p",
        "--mfu",
        "0.4",
        "--tokens",
        "15e12",
        "--json",
    ),
    piped(
        ("model", "show", "mixtral-8x7b"),
        "memory",
        "-",
        "--mesh",
        "X=8",
        "--sizes",
        "B=8,T=4096",
        "--hw",
        "h100",
    ),
    cli("model", "show", "dense"),
    cli("model", "show", "llama-3-8b", "--phase", "decode"),
]

# ---- plan --all for a spread of einsums, collectives and reshardings, under each policy on two chips ----
PLAN_MESH = "X=4,Y=2"
PLAN_SIZES = "I=1024,J=2048,K=4096,B=256,D=1024,F=4096"
EXPRS = [
    "A[I, J_X] · B[J, K] -> C[I, K]",  # case 2
    "A[I_X, J] · B[J, K_Y] -> C[I_X, K_Y]",  # case 1
    "A[I, J_X] · B[J_X, K] -> C[I, K]",  # case 3
    "A[I, J_X] · B[J_X, K] -> C[I, K_X]",  # case 3, scattered
    "A[I_X, J] · B[J, K_X] -> C[I_X, K]",  # case 4
    "A[I_X, J_Y] · B[J_Y, K] -> C[I_X, K]",
    "In[B_X, D] · W[D_X, F] -> Out[B_X, F]",  # FSDP
    "In[B_X, D_Y] · W[D_Y, F] -> Out[B_X, F]",
    "X[B, D] · Y[D_X, F] -> Z[B, F]",
    "A[I_X, J] -> A[I, J_X]",  # reshardings
    "A[I_XY, J] -> A[I, J]",
    "A[I, J] -> A[I_X, J_Y]",
    "C[I, K]{U_X} -> C[I, K_X]",
    "AllGather_X(A[I_X, J]) -> A[I, J]",  # collectives as written
    "ReduceScatter_{X,K}(C[I, K]{U_X}) -> C[I, K_X]",
    "AllReduce_Y(C[I_X, K]{U_Y}) -> C[I_X, K]",
]
PLANS = [
    *[cli("plan", e, "--mesh", PLAN_MESH, "--all") for e in EXPRS],
    *[
        cli("plan", e, "--mesh", PLAN_MESH, "--sizes", PLAN_SIZES, "--all", "--hw", chip, "--overlap", policy)
        for e in EXPRS
        for chip in CHIPS
        for policy in POLICIES
    ],
    *[
        cli("plan", e, "--mesh", PLAN_MESH, "--sizes", PLAN_SIZES, "--hw", "tpu-v5p", "--json", "--all")
        for e in EXPRS[:6]
    ],
    *[
        cli("plan", e, "--mesh", PLAN_MESH, "--format", fmt)
        for e in EXPRS[:2]
        for fmt in ("unicode", "latex")
    ],
    cli(
        "plan",
        EXPRS[0],
        "--mesh",
        PLAN_MESH,
        "--sizes",
        PLAN_SIZES,
        "--hw",
        "h100",
        "--model",
        "alpha-beta-rd",
        "--all",
    ),
    cli(
        "plan",
        EXPRS[0],
        "--mesh",
        PLAN_MESH,
        "--sizes",
        PLAN_SIZES,
        "--hw",
        "tpu-v5p",
        "--model",
        "alpha-beta",
        "--all",
    ),
    cli("simulate", EXPRS[2], "--mesh", "X=4"),
    cli("simulate", "A[I_X, J] -> A[I, J_X]", "--mesh", "X=4"),
]

# ---- cost: symbolic, and in seconds under each policy on two chips ---------------------------------------
PROGRAMS = [
    "AllGather_X(W[D_X, F]) -> W[D, F]; AllGather_Y(In[B_Y, D]) -> In[B, D]; In[B, D] · W[D, F] -> Out[B, F]",
    FSDP_BWD,
    "In[B_X, D_Y] · W[D_Y, F] -> Out[B_X, F]{U_Y}; ReduceScatter_{Y,F}(Out[B_X, F]{U_Y}) -> Out[B_X, F_Y]",
    EXPRS[0],
    EXPRS[4],
]
COSTS = [
    *[cli("cost", p, "--mesh", PLAN_MESH) for p in PROGRAMS],
    *[cli("cost", p, "--mesh", "X,Y", "--symbolic-links") for p in PROGRAMS[:3]],
    *[
        cli("cost", p, "--mesh", PLAN_MESH, "--sizes", PLAN_SIZES, "--hw", chip, "--overlap", policy)
        for p in PROGRAMS[:3]
        for chip in CHIPS
        for policy in POLICIES
    ],
    cli("cost", PROGRAMS[0], "--mesh", PLAN_MESH, "--sizes", PLAN_SIZES, "--hw", "tpu-v5p", "--json"),
    cli("cost", PROGRAMS[0], "--mesh", PLAN_MESH, "--sizes", PLAN_SIZES, "--hw", "tpu-v5p", "--exact"),
    cli("cost", PROGRAMS[0], "--mesh", PLAN_MESH, "--sizes", PLAN_SIZES, "--hw", "tpu-v5p", "--ring", "uni"),
    cli("cost", PROGRAMS[0], "--mesh", PLAN_MESH, "--sizes", PLAN_SIZES, "--hw", "tpu-v5p", "--no-latency"),
    cli("cost", PROGRAMS[0], "--mesh", PLAN_MESH, "--sizes", PLAN_SIZES, "--hw", "tpu-v5p", "--dcn", "Y"),
    cli("cost", PROGRAMS[0], "--mesh", PLAN_MESH, "--sizes", PLAN_SIZES, "--hw", "tpu-v5p", "--serial"),
    cli("cost", PROGRAMS[1], "--mesh", "X=4", "--sizes", "B=512,D=1024,F=4096", "--hw", "h100", "--schedule"),
]

# ---- backward and verify -------------------------------------------------------------------------------
BACKWARDS = [
    "In[B_X, D] · W[D_X, F] -> Out[B_X, F]",
    "In[B_X, D] · W[D, F] -> Out[B_X, F]",
    "In[B, D] · W[D, F_Y] -> H[B, F_Y]; H[B, F_Y] · W2[F_Y, D] -> Out[B, D]",
    "In[B_X, D] · W_in[D_X, F_Y] -> H[B_X, F_Y]; H[B_X, F_Y] · W_out[F_Y, D_X] -> Out[B_X, D]",
    "A[I, J_X] · B[J_X, K] -> C[I, K_X]",
    "AllGather_X(W[D_X, F]) -> W[D, F]; In[B, D] · W[D, F] -> Out[B, F]",
]
BACKWARD = [
    *[cli("backward", b, "--mesh", PLAN_MESH) for b in BACKWARDS],
    *[cli("backward", b, "--mesh", PLAN_MESH, "--keep-gathered") for b in BACKWARDS[2:4]],
    *[cli("backward", b, "--mesh", PLAN_MESH, "--defer-reductions") for b in BACKWARDS[:2]],
    *[cli("backward", b, "--mesh", PLAN_MESH, "--json") for b in BACKWARDS[:3]],
    *[cli("backward", b, "--mesh", PLAN_MESH, "--format", "latex") for b in BACKWARDS[:2]],
    cli("backward", BACKWARDS[0], "--mesh", PLAN_MESH, "--sizes", "B=256,D=1024,F=4096", "--json"),
    cli("verify", FSDP_FWD, FSDP_BWD, "--mesh", "X=4", "--json"),
    cli("verify", "--forward", FSDP_FWD, "--backward", FSDP_BWD, "--mesh", "X=4"),
    cli("verify", FSDP_FWD, "dOut[B_X, F] · W[D, F] -> dIn[B_X, D]", "--mesh", "X=4"),
    cli("verify", FSDP_FWD, FSDP_BWD.replace("AllReduce_X", "AllGather_X"), "--mesh", "X=4"),
]

# ---- memory, step, fit on written programs and presets -------------------------------------------------
TP_MLP = (
    "params W_in, W_out; In[B_X, D] * W_in[D, F_Y] -> Tmp[B_X, F_Y]; Tmp[B_X, F_Y] * W_out[F_Y, D] -> "
    "Out[B_X, D]"
)
MODELS = [
    *[
        cli(cmd, TP_MLP, "--mesh", "X=4,Y=2", "--sizes", "B=256,D=4096,F=16384", "--hw", chip, *extra)
        for cmd in ("memory", "step")
        for chip in CHIPS
        for extra in ((), ("--mode", "infer"), ("--json",))
    ],
    cli(
        "memory",
        TP_MLP,
        "--mesh",
        "X=4,Y=2",
        "--sizes",
        "B=256,D=4096,F=16384",
        "--hw",
        "tpu-v5p",
        "--remat",
        "block",
    ),
    cli("memory", TP_MLP, "--mesh", "X=4,Y=2", "--sizes", "B=256,D=4096,F=16384", "--optimizer", "momentum"),
    cli("memory", TP_MLP, "--mesh", "X=4,Y=2", "--sizes", "B=256,D=4096,F=16384", "--grads", "none"),
    *[
        cli(
            "step",
            TP_MLP,
            "--mesh",
            "X=4,Y=2",
            "--sizes",
            "B=256,D=4096,F=16384",
            "--hw",
            chip,
            "--overlap",
            policy,
        )
        for chip in CHIPS
        for policy in POLICIES
    ],
    cli(
        "step",
        TP_MLP,
        "--mesh",
        "X=4,Y=2",
        "--sizes",
        "B=256,D=4096,F=16384",
        "--hw",
        "tpu-v5p",
        "--mfu",
        "0.5",
        "--tokens",
        "1e9",
    ),
    *[
        cli("fit", TP_MLP, "--mesh", "X=4,Y=2", "--sizes", sizes, "--hw", chip, "--solve-for", what)
        for chip in CHIPS
        for sizes, what in (("D=4096,F=16384", "B"), ("B=256,D=4096,F=16384", "devices"))
    ],
    cli(
        "fit",
        TP_MLP,
        "--mesh",
        "X=4,Y=2",
        "--sizes",
        "D=4096,F=16384",
        "--hw",
        "tpu-v5p",
        "--solve-for",
        "B",
        "--json",
    ),
    cli(
        "fit",
        TP_MLP,
        "--mesh",
        "X=4,Y=2",
        "--sizes",
        "B=256,D=4096,F=16384",
        "--hw",
        "tpu-v5e",
        "--solve-for",
        "devices",
        "--json",
    ),
    piped(
        ("model", "show", "llama-3-8b", "--params", "D=X,F=Y", "--activations", "B=X,F=Y"),
        "step",
        "-",
        "--mesh",
        "X=8,Y=8",
        "--sizes",
        "B=256,T=4096",
        "--hw",
        "tpu-v5p",
    ),
    piped(
        ("model", "show", "llama-3-8b", "--params", "D=X", "--activations", "B=X"),
        "fit",
        "-",
        "--mesh",
        "X=8",
        "--sizes",
        "T=4096",
        "--hw",
        "h100",
        "--solve-for",
        "B",
    ),
    piped(
        ("model", "show", "llama-3-8b", "--phase", "decode", "--dtype", "int8"),
        "fit",
        "-",
        "--mesh",
        "X=1",
        "--sizes",
        "B=1,S=8192",
        "--hw",
        "tpu-v5e",
        "--solve-for",
        "slice",
        "--slices",
        "2x2,4x4",
    ),
]

# ---- search and strategy-map on small meshes ------------------------------------------------------------
CHAIN = (
    "params W1, W2, W3; In[B, D] * W1[D, F] -> H1[B, F]; H1[B, F] * W2[F, E] -> H2[B, E]; "
    "H2[B, E] * W3[E, D] -> Out[B, D]"
)
SEARCH = [
    cli("search", MLP, "--mesh", "X=2,Y=2", "--sizes", MLP_SIZES, "--hw", "tpu-v5e"),
    cli("search", MLP, "--mesh", "X=2,Y=2", "--sizes", MLP_SIZES, "--hw", "h100", "--top", "5"),
    cli("search", MLP, "--mesh", "X=2,Y=2", "--sizes", MLP_SIZES, "--hw", "tpu-v5p", "--overlap", "serial"),
    cli("search", MLP, "--mesh", "X=2,Y=2", "--sizes", MLP_SIZES, "--hw", "tpu-v5e", "--remat", "block"),
    cli(
        "search", MLP, "--mesh", "X=2,Y=2", "--sizes", MLP_SIZES, "--hw", "tpu-v5e", "--optimizer", "momentum"
    ),
    cli(
        "search",
        MLP,
        "--mesh",
        "X=2,Y=2",
        "--sizes",
        MLP_SIZES,
        "--hw",
        "tpu-v5e",
        "--mode",
        "infer",
        "--json",
    ),
    cli(
        "search",
        MLP,
        "--mesh",
        "X=2,Y=2",
        "--sizes",
        MLP_SIZES,
        "--hw",
        "tpu-v5e",
        "--mode",
        "infer",
        "--format",
        "latex",
    ),
    cli("search", MLP, "--mesh", "X=4", "--sizes", MLP_SIZES, "--hw", "tpu-v5e", "--memory", "100MB"),
    cli(
        "search",
        CHAIN,
        "--mesh",
        "X=2,Y=2",
        "--sizes",
        "B=128,D=4096,F=16384,E=1024",
        "--hw",
        "tpu-v5e",
        "--mode",
        "infer",
        "--per-statement",
    ),
    cli("strategy-map", MLP, "--mesh", "X=2,Y=2", "--hw", "h100", "--sizes", "B=4096,D=8192,F=32768"),
    cli(
        "strategy-map",
        MLP,
        "--mesh",
        "X=2,Y=2",
        "--hw",
        "tpu-v5p",
        "--sizes",
        "B=4096,D=8192,F=32768",
        "--overlap",
        "serial",
    ),
    cli(
        "strategy-map",
        MLP,
        "--mesh",
        "X=2,Y=2",
        "--hw",
        "tpu-v5p",
        "--sizes",
        "B=4096,D=8192,F=32768",
        "--passes",
        "forward",
    ),
    cli(
        "strategy-map",
        MLP,
        "--mesh",
        "X=2,Y=2",
        "--hw",
        "tpu-v5p",
        "--sizes",
        "B=4096,D=8192,F=32768",
        "--passes",
        "backward",
        "--format",
        "latex",
    ),
    cli(
        "strategy-map",
        MLP,
        "--mesh",
        "X=2,Y=2",
        "--hw",
        "tpu-v5p",
        "--sizes",
        "B=4096,D=8192,F=32768",
        "--format",
        "json",
    ),
    cli(
        "strategy-map",
        MLP,
        "--mesh",
        "X=2,Y=2",
        "--hw",
        "tpu-v5p",
        "--sizes",
        "B=4096,D=8192,F=32768",
        "--over",
        "B/N,F,D",
    ),
]

# ---- notation: parse, check, shape, and errors (their exit codes and messages are output) ---------------
PARSES = [
    "A[I_X, J] · B[J, K_Y] -> C[I_X, K_Y]",
    r"A[I_{XY}, J] \cdot B[J, K] \to C[I_{XY}, K]{U_Z}",
    "AllGather_X(A[I_X, J]) -> A[I, J]",
    "ReduceScatter_{X,K}(C[I, K]{U_X})",
    "X[B, D] ·_D Y[D_X, F] -> Z[B, F]",
    "params W; mesh X=4; In[B_X, D] · W[D_X, F] -> Out[B_X, F]",
    "A: bf16[I_X, J]",
]
NOTATION = [
    *[cli("parse", p, "--format", fmt) for p in PARSES for fmt in ("unicode", "latex", "json")],
    cli("check", "A[I_X, J] · B[J, K_Y] -> C[I_X, K_Y]", "--mesh", "X=4,Y=2"),
    cli("check", "A[I, J_X] · B[J_X, K] -> C[I, K]{U_X}", "--mesh", "X=4"),
    cli("check", "A[I, J_X] · B[J_X, K] -> C[I, K]", "--mesh", "X=4"),
    cli("check", "A[I_X, J] · B[J, K_X] -> C[I_X, K_X]", "--mesh", "X=4"),
    cli("check", "A[I_Z, J]", "--mesh", "X=4"),
    cli("check", "A[I_X, J] · B[K, L] -> C[I, L]", "--mesh", "X=4"),
    cli("check", "AllGather_Y(A[I_X, J]) -> A[I, J]", "--mesh", "X=4,Y=2"),
    cli("check", "A[I_X, J", "--mesh", "X=4"),
    cli("check", "A[I_X, J] ·· B[J, K]", "--mesh", "X=4"),
    cli("check", "", "--mesh", "X=4"),
    cli("check", "A[I_X, J]", "--mesh", "X=0"),
    cli("check", "A[I_X, J]", "--mesh", "X=4,X=2"),
    cli("check", "A[I_X, J]"),
    cli("check", "A[I_X, J, K]", "--mesh", "X=4", "--max-dims", "2"),
    cli("check", "A[I_X, J]", "--mesh", "X=4", "--max-dims", "0"),
    cli("plan", "A[I, J_X] · B[J, K] -> C[I, K]", "--mesh", "X=4", "--hw", "tpu-v5p"),
    cli("plan", "A[I, J_X] · B[J, K] -> C[I, K]", "--mesh", "X=4", "--sizes", "I=1024", "--hw", "tpu-v5p"),
    cli("plan", "A[I, J_X] · B[J, K] -> C[I, K]", "--mesh", "X=4", "--hw", "no-such-chip"),
    cli("plan", "A[I, J_X] · B[J, K] -> C[I, K]", "--mesh", "X=4", "--sizes", "I=abc"),
    cli("plan", "A[I, J_X] · B[J, K] -> C[I, K]", "--mesh", "X=4", "--overlap", "never"),
    cli("plan"),
    cli("nosuchcommand"),
    cli("shape", "A[I_X, J_Y]", "--mesh", "X=4,Y=2"),
    cli("shape", "A: bf16[I_X, J_Y, K]", "--mesh", "X=4,Y=2", "--sizes", "I=1024,J=512,K=64"),
    cli("shape", "A: fp32[I_XY, J]", "--mesh", "X=8,Y=2", "--sizes", "I=1024,J=4096", "--json"),
    cli("shape", "A[I_X, J]", "--mesh", "X=4", "--sizes", "I=6,J=8"),
    cli("memory", "In[B, D] * W[D, F] -> Out[B, F]", "--mesh", "X=4", "--sizes", "B=8", "--hw", "tpu-v5p"),
    cli("search", MLP, "--mesh", "X=2,Y=2", "--sizes", "B=128,D=8192", "--hw", "tpu-v5e"),
    cli("search", MLP, "--mesh", "X=2,Y=2", "--sizes", MLP_SIZES, "--hw", "tpu-v5e", "--memory", "lots"),
    cli(
        "fit", TP_MLP, "--mesh", "X=4,Y=2", "--sizes", "D=4096,F=16384", "--hw", "tpu-v5p", "--solve-for", "Q"
    ),
    cli("compare", Q4_A, Q4_B, "--mesh", "X", "--solve-for", "Q"),
    cli("proofs", "no_such_lemma"),
    cli("model", "show", "no-such-model"),
]

# ---- the public API with plain arguments: every plan's text, symbolic total and seconds under each policy ---
# (capture.py prices each plan of a ``plans`` query with SIZES on every chip of CHIPS under every policy)
API_EXPRS = EXPRS[:9] + ["A[I_X, J] -> A[I, J_X]", "C[I, K]{U_X} -> C[I, K_X]"]
SIZES = {"I": 1024, "J": 2048, "K": 4096, "B": 256, "D": 1024, "F": 4096}
API = [
    *[api("plans", e, PLAN_MESH) for e in API_EXPRS],
    *[api("cost", e, PLAN_MESH) for e in API_EXPRS],
    *[
        api("cost", API_EXPRS[0], PLAN_MESH, sizes=SIZES, hw=chip, overlap=policy)
        for chip in CHIPS
        for policy in POLICIES
    ],
    *[api("backward", b, PLAN_MESH) for b in BACKWARDS[:4]],
    api("compare", Q4_A, Q4_B, "D", mesh="X"),
    api("compare", Q4_A, Q4_B, "D", mesh="X=8", regime="total"),
]

QUERIES: list[Query] = [
    *README,
    *HELP_EXAMPLES,
    *SEEDS,
    *PLANS,
    *COSTS,
    *BACKWARD,
    *MODELS,
    *SEARCH,
    *NOTATION,
    *API,
]
