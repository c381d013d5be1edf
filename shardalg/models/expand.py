"""A model configuration as a program in the notation, and a program sharded by dim.

    >>> print(expand("dense").statements[4])                              # doctest: +SKIP
    In[B, T, D] * W_q[D, K, G, H] -> Q[B, T, K, G, H]

Dims: ``B`` sequences, ``T`` tokens per sequence, ``S`` the keys' positions (a decode step's context), ``D`` the model
width, ``F`` the MLP width, ``K`` KV heads, ``G`` query heads per KV head (``N = K*G``), ``H`` the head dim,
``V`` the vocabulary, ``L`` layers, ``E`` experts and ``C`` tokens per expert. The training program
(:func:`expand`, functions written) is one layer's forward: the norms, the Q, K, V projections, the causal
attention core over the keys' positions ``S`` (the tokens ``T`` renamed, ``rename_{T,S}``: S's size is T's,
derived, never bound apart), fused (flash, the default) or materialized, the output projection, the residual
adds and the gated MLP; and, outside the repeated layer, the head's norm and the unembedding. With
``functions=False`` what the notation does not show enters as an input: the attention core's output ``A``
(its 4·B·T·S·N·H FLOPs then not counted), the normalised residual ``Hn``, the MLP's gated activation ``M``.
The decode program reads a KV cache (``Kc``, ``Vc`` over ``S`` tokens) for one new token per sequence, and
includes the attention core's two products. The prefill program is the training program's layer with the
attention core's two products over the cache of the prompt (``S`` its length, the same as ``T``), causal as
the training core is (``softmax_{S,causal}``, with its functions written: half the (T, S) pairs counted,
T·S/2, the training core's convention); its unembedding is the last position's only (the logits of the first
generated token).

:func:`shard` applies a dim-to-axes map to the parameters and another to the activations (and KV cache); where
an axis shards a parameter and, on another dim, the batch its product keeps (FSDP: ``In[B_X, D] · W_in[D_X, F]``),
the parameter is gathered first, as the book's FSDP algorithm does: ``AllGather_X(W_in[D_X, F]) -> W_in[D, F]``.
Any other mismatch (Megatron's ``Hn[B, D_Y] · W_in[D, F_Y]``) is left to the planner.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from fractions import Fraction

from shardalg.algebra.context import refuse_unknown_dims, tensors_of
from shardalg.algebra.legality import check_or_raise
from shardalg.errors import UsageError
from shardalg.notation.parse import parse
from shardalg.notation.syntax import (
    FLAGS,
    Apply,
    Arrow,
    Collective,
    Dim,
    DType,
    Op,
    Product,
    Program,
    Role,
    Tensor,
    dtype_named,
    plain_product,
)

from .dimmap import (
    apply_map,
    map_text,
    parse_dim_map,
    refuse_dropped,
    refuse_repeated_axis,
    sequence_axes,
)
from .presets import ModelConfig, get

__all__ = [
    "expand",
    "shard",
    "param_axes",
    "parse_dim_map",
    "attention_form",
    "with_attention",
    "PHASES",
    "CAPACITY_FACTOR",
    "ATTENTION",
]

PHASES = ("train", "prefill", "decode")
# the training core's forms (the first the default: the presets' models train with a fused kernel)
ATTENTION = ("fused", "materialized")
# a MoE's capacity factor when none is given: a choice (GShard and Switch train at 1.25; Mixtral itself drops
# no token), said wherever a program is printed with it
CAPACITY_FACTOR = Fraction(5, 4)


def _t(name: str, dims: str, dtype: DType | None) -> str:
    return f"{name}: {dtype.value}[{dims}]" if dtype is not None else f"{name}[{dims}]"


def _declarations(c: ModelConfig, p: DType | None, core: bool, tok: str) -> list[str]:
    """A program's first lines: its parameters, embeddings, KV cache (``core``: the attention core's products
    over it), token dims ``tok`` and layers, and ``W_emb``."""
    layer_params = ["W_q", "W_k", "W_v", "W_o"] + (["W_r"] if c.moe else []) + ["W_gate", "W_in", "W_out"]
    layer_params += ["g_attn", "g_mlp"] if c.norms else []
    outside = ["W_emb"] + ([] if c.tied else ["W_unemb"]) + (["g_final"] if c.norms else [])
    lines = [f"params {', '.join(layer_params)}", f"embeddings {', '.join(outside)}"]
    if core:
        lines.append("kvcache Kc, Vc")
    return lines + [f"tokens {tok}", "layers L", _t("W_emb", "V, D", p)]


def expand(
    config: ModelConfig | str,
    phase: str = "train",
    dtype: DType | str | None = None,
    kv_dtype: DType | str | None = None,
    functions: bool = True,
    capacity_factor: Fraction = CAPACITY_FACTOR,
    attention: str | None = None,
) -> Program:
    """The program of ``config`` for ``phase`` (``train``: one layer's forward and the unembedding;
    ``prefill``: the prompt's tokens with the attention core over their cache; ``decode``: one new token per
    sequence over a KV cache). ``dtype`` is the parameters' (default bf16),
    ``kv_dtype`` the KV cache's (default ``dtype``). ``functions`` (default) writes the norms, the softmax, the
    gated activation and the residual adds in the notation (:func:`_written`); ``functions=False`` enters their
    results as inputs instead; a MoE's routing takes ``capacity_factor`` (default :data:`CAPACITY_FACTOR`).
    ``attention`` is the training core's form (:data:`ATTENTION`): ``fused`` (flash, the default:
    :func:`attention_form`) or ``materialized``."""
    c = get(config) if isinstance(config, str) else config
    if phase not in PHASES:
        raise UsageError(f"the phase is one of {', '.join(PHASES)}, not {phase!r}")
    form, _ = attention_form(attention, phase, functions)
    if functions:
        return _written(
            c, phase, dtype_named(dtype) if isinstance(dtype, str) else dtype, kv_dtype, capacity_factor, form
        )
    p = dtype_named(dtype) if isinstance(dtype, str) else dtype
    kv = dtype_named(kv_dtype) if isinstance(kv_dtype, str) else kv_dtype if kv_dtype is not None else p
    decode = phase == "decode"
    core = phase != "train"  # the attention core's products over a KV cache
    tok = "B" if decode else "B, T"  # the dims of one token stream
    lines = _declarations(c, p, core, tok)
    if c.norms:
        lines += [_t("g_final", "D", p), _t("g_attn", "D", p), _t("g_mlp", "D", p)]
    q = "B, K, G, H" if decode else "B, T, K, G, H"
    lines += [
        f"In[{tok}, D] * {_t('W_q', 'D, K, G, H', p)} -> Q[{q}]",
        f"In[{tok}, D] * {_t('W_k', 'D, K, H', p)} -> {'Kn' if decode else 'Kp'}[{tok}, K, H]",
        f"In[{tok}, D] * {_t('W_v', 'D, K, H', p)} -> {'Vn' if decode else 'Vp'}[{tok}, K, H]",
    ]
    if core:
        scores = "B, K, G, S" if decode else "B, K, G, T, S"
        lines += [
            f"Q[{q}] * {_t('Kc', 'B, S, K, H', kv)} -> Sc[{scores}]",
            f"P[{scores}] * {_t('Vc', 'B, S, K, H', kv)} -> A[{q}]",
        ]
    lines.append(f"A[{q}] * {_t('W_o', 'K, G, H, D', p)} -> Att[{tok}, D]")
    if c.moe:
        lines += [
            f"Hn[{tok}, D] * {_t('W_r', 'D, E', p)} -> R[{tok}, E]",
            f"X[E, C, D] * {_t('W_gate', 'E, D, F', p)} -> Gt[E, C, F]",
            f"X[E, C, D] * {_t('W_in', 'E, D, F', p)} -> U[E, C, F]",
            f"M[E, C, F] * {_t('W_out', 'E, F, D', p)} -> Out[E, C, D]",
        ]
    else:
        lines += [
            f"Hn[{tok}, D] * {_t('W_gate', 'D, F', p)} -> Gt[{tok}, F]",
            f"Hn[{tok}, D] * {_t('W_in', 'D, F', p)} -> U[{tok}, F]",
            f"M[{tok}, F] * {_t('W_out', 'F, D', p)} -> Out[{tok}, D]",
        ]
    unembed = _t("W_emb", "V, D", p) if c.tied else _t("W_unemb", "D, V", p)
    last = "B" if core else tok  # serving needs the logits of each sequence's last position only
    lines.append(f"Xf[{last}, D] * {unembed} -> Logits[{last}, V]")
    if c.sizes:
        lines.append("where " + ", ".join(f"{k}={v}" for k, v in c.sizes.items()))
    return parse("\n".join(lines))


def attention_form(attention: str | None, phase: str = "train", functions: bool = True) -> tuple[str, bool]:
    """The training core's form and whether it was chosen: ``fused`` (flash: a kernel that never writes the
    scores ``Sc`` and ``P`` to HBM, keeps each row's softmax statistics for the backward and recomputes the
    scores from them, as LLaMA's and Mixtral's training runs do; written ``softmax_{S,causal,flash}``) or
    ``materialized`` (the scores written and kept for the backward); ``None`` is ``fused``, a default said
    wherever the program is shown. Only the training program with its functions writes the core's form."""
    if attention is not None and attention not in ATTENTION:
        raise UsageError(f"the attention is {' or '.join(ATTENTION)}, not {attention!r}")
    if attention is not None and (phase != "train" or not functions):
        where = f"the {phase} program" if phase != "train" else "a program without its functions (no softmax)"
        raise UsageError(
            f"the attention's form ({attention}) is a choice of the training program's core, which {where} "
            "does not write",
            fix="drop --attention" if phase != "train" else "write the functions (drop --no-functions)",
        )
    return (attention or ATTENTION[0]), attention is not None


def with_attention(program: Program, form: str) -> Program:
    """``program`` with each attention core's softmax (its operand a product's result, its result a product's
    operand: ``Q·K -> Sc``, ``softmax_S(Sc) -> P``, ``P·V -> O``) ``fused`` (``flash`` added to its flags) or
    ``materialized`` (``flash`` removed); a UsageError when the program writes no core."""
    if form not in ATTENTION:
        raise UsageError(f"the attention is {' or '.join(ATTENTION)}, not {form!r}")
    made = {s.result.name for s in program.statements if isinstance(s, Arrow) and isinstance(s.expr, Product)}
    read = {
        t.name
        for s in program.statements
        for e in ((s.expr,) if isinstance(s, Arrow) else (s,))
        if isinstance(e, Product)
        for t in (e.left, e.right)
        if isinstance(t, Tensor)
    }
    out, found = [], False
    for s in program.statements:
        f = s.expr if isinstance(s, Arrow) else None
        if (
            isinstance(f, Apply)
            and f.op is Op.SOFTMAX
            and isinstance(f.operands[0], Tensor)
            and f.operands[0].name in made
            and s.result.name in read
        ):
            wanted = {*f.flags, "flash"} if form == "fused" else set(f.flags) - {"flash"}
            s = replace(s, expr=replace(f, flags=tuple(x for x in FLAGS if x in wanted)))
            found = True
        out.append(s)
    if not found:
        raise UsageError(
            f"--attention {form}: the program writes no attention core (Q·K -> Sc, softmax_S(Sc) -> P, "
            "P·V -> O) whose form it could set",
            fix="drop --attention, or write the core's three statements",
        )
    return Program(tuple(out), program.mesh, program.sizes, program.roles, source=None)


def _decimal(x: Fraction) -> str:
    """A capacity factor as the decimal the notation writes (1.25; a whole number without a point)."""
    if x <= 0 or 10**6 % x.denominator:
        raise UsageError(f"the capacity factor is a positive decimal of at most 6 places, not {float(x):g}")
    return f"{float(x):.6f}".rstrip("0").rstrip(".")


def _written(
    c: ModelConfig,
    phase: str,
    p: DType | None,
    kv_dtype: DType | str | None,
    capacity_factor: Fraction = CAPACITY_FACTOR,
    attention: str = ATTENTION[0],
) -> Program:
    """The program of ``c`` with its functions written: per layer ``rmsnorm_D(In) -> Har`` and
    ``Har ⊙ g_attn -> Ha`` (one function a statement, as the backward differentiates them), the Q, K,
    V projections of ``Ha``, the attention core (prefill and decode: ``Q·Kc -> Sc``, ``softmax_S(Sc) -> P``
    (prefill: ``softmax_{S,causal}``, the prompt's keys after each query masked), ``P·Vc -> A``; training: ``rename_{T,S}`` of ``Kp`` and ``Vp`` to ``Ks`` and ``Vs``, ``Q·Ks -> Sc``,
    ``softmax_{S,causal[,flash]}(Sc) -> P`` (``flash`` when ``attention`` is ``fused``), ``P·Vs -> A``),
    ``A·W_o -> Att``, the residual ``In + Att -> Rs``,
    ``rmsnorm_D(Rs) ⊙ g_mlp -> Hn``, the gated MLP ``silu(Gt) -> Sg``, ``Sg ⊙ U -> M`` and the residual
    ``Rs + Out -> Y`` (the layer's output); the head ``rmsnorm_D(Xl) ⊙ g_final -> Xf`` before the
    unembedding, ``Xl`` the last layer's output. Mixtral's router writes the logits ``R``;
    ``dispatch_{C,k,cf}(Hn, R) -> X[E, C, D]`` sends each token to its top-k experts' slots (C = cf·k·B·T/E an
    expert, ``capacity_factor`` cf), the experts write ``Out[E, C, D]`` and ``combine_{C,k,cf}(Out, R) -> Mo``
    brings them back, gated, before the residual. The scores' scale 1/sqrt(H) is folded into ``W_q`` (not
    written)."""
    kv = dtype_named(kv_dtype) if isinstance(kv_dtype, str) else kv_dtype if kv_dtype is not None else p
    decode = phase == "decode"
    core = phase != "train"  # the attention core's products over a KV cache
    tok = "B" if decode else "B, T"  # the dims of one token stream
    lines = _declarations(c, p, core, tok)

    def norm(x: str, gain: str, out: str, rows: str) -> str:
        if not c.norms:
            return x
        # one function a statement (the backward differentiates each): the norm, then its gain
        lines.append(f"rmsnorm_D({x}[{rows}, D]) -> {out}r[{rows}, D]")
        lines.append(f"{out}r[{rows}, D] .* {_t(gain, 'D', p)} -> {out}[{rows}, D]")
        return out

    q = "B, K, G, H" if decode else "B, T, K, G, H"
    h = norm("In", "g_attn", "Ha", tok)
    lines += [
        f"{h}[{tok}, D] * {_t('W_q', 'D, K, G, H', p)} -> Q[{q}]",
        f"{h}[{tok}, D] * {_t('W_k', 'D, K, H', p)} -> {'Kn' if decode else 'Kp'}[{tok}, K, H]",
        f"{h}[{tok}, D] * {_t('W_v', 'D, K, H', p)} -> {'Vn' if decode else 'Vp'}[{tok}, K, H]",
    ]
    if core:
        scores = "B, K, G, S" if decode else "B, K, G, T, S"
        # prefill: causal as the training core, the prompt's keys after each query masked (half the pairs)
        softmax = "softmax_S" if decode else "softmax_{S,causal}"
        lines += [
            f"Q[{q}] * {_t('Kc', 'B, S, K, H', kv)} -> Sc[{scores}]",
            f"{softmax}(Sc[{scores}]) -> P[{scores}]",
            f"P[{scores}] * {_t('Vc', 'B, S, K, H', kv)} -> A[{q}]",
        ]
    else:  # training: the core over the keys' and values' positions S, the tokens T renamed (S's size is T's)
        scores = "B, K, G, T, S"
        flags = "S,causal,flash" if attention == "fused" else "S,causal"
        lines += [
            "rename_{T,S}(Kp[B, T, K, H]) -> Ks[B, S, K, H]",
            "rename_{T,S}(Vp[B, T, K, H]) -> Vs[B, S, K, H]",
            f"Q[{q}] * Ks[B, S, K, H] -> Sc[{scores}]",
            f"softmax_{{{flags}}}(Sc[{scores}]) -> P[{scores}]",
            f"P[{scores}] * Vs[B, S, K, H] -> A[{q}]",
        ]
    lines += [
        f"A[{q}] * {_t('W_o', 'K, G, H, D', p)} -> Att[{tok}, D]",
        f"In[{tok}, D] + Att[{tok}, D] -> Rs[{tok}, D]",
    ]
    hn = norm("Rs", "g_mlp", "Hn", tok)
    if c.moe:
        route = f"{{C,k={c.top_k.value if c.top_k else 1},cf={_decimal(capacity_factor)}}}"
        lines += [
            f"{hn}[{tok}, D] * {_t('W_r', 'D, E', p)} -> R[{tok}, E]",
            f"dispatch_{route}({hn}[{tok}, D], R[{tok}, E]) -> X[E, C, D]",
            f"X[E, C, D] * {_t('W_gate', 'E, D, F', p)} -> Gt[E, C, F]",
            f"X[E, C, D] * {_t('W_in', 'E, D, F', p)} -> U[E, C, F]",
            "silu(Gt[E, C, F]) -> Sg[E, C, F]",
            "Sg[E, C, F] .* U[E, C, F] -> M[E, C, F]",
            f"M[E, C, F] * {_t('W_out', 'E, F, D', p)} -> Out[E, C, D]",
            f"combine_{route}(Out[E, C, D], R[{tok}, E]) -> Mo[{tok}, D]",
            f"Rs[{tok}, D] + Mo[{tok}, D] -> Y[{tok}, D]",
        ]
    else:
        lines += [
            f"{hn}[{tok}, D] * {_t('W_gate', 'D, F', p)} -> Gt[{tok}, F]",
            f"{hn}[{tok}, D] * {_t('W_in', 'D, F', p)} -> U[{tok}, F]",
            f"silu(Gt[{tok}, F]) -> Sg[{tok}, F]",
            f"Sg[{tok}, F] .* U[{tok}, F] -> M[{tok}, F]",
            f"M[{tok}, F] * {_t('W_out', 'F, D', p)} -> Out[{tok}, D]",
            f"Rs[{tok}, D] + Out[{tok}, D] -> Y[{tok}, D]",
        ]
    last = "B" if core else tok
    xf = norm("Xl", "g_final", "Xf", last) if c.norms else "Xf"
    unembed = _t("W_emb", "V, D", p) if c.tied else _t("W_unemb", "D, V", p)
    lines.append(f"{xf}[{last}, D] * {unembed} -> Logits[{last}, V]")
    if c.sizes:
        lines.append("where " + ", ".join(f"{k}={v}" for k, v in c.sizes.items()))
    return parse("\n".join(lines))


# ---- sharding a program by dim -------------------------------------------------------------------------


def param_axes(program: Program, params: Mapping[str, tuple[str, ...]]) -> dict[str, tuple[str, ...]]:
    """The axes :func:`shard` shards each parameter (and embedding) of ``program`` over with ``params``, by
    name, without writing the program: what a parameter's bytes per device are divided by."""
    roles = program.roles
    kinds = (Role.PARAMS, Role.EMBEDDINGS)
    return {
        t.name: apply_map(t, params).used_axes
        for t in tensors_of(program)
        if roles is not None and t.name is not None and roles.role_of(t.name) in kinds
    }


def _sequence_dim(prog: Program) -> str:
    """The sequence dim Megatron SP shards: the last ``tokens`` dim after the first (``T`` of ``tokens B, T``)."""
    tokens = prog.roles.tokens if prog.roles is not None else ()
    if len(tokens) < 2:
        raise UsageError(
            "Megatron sequence parallelism shards the sequence dim, and the program declares none "
            f"({'tokens ' + ', '.join(tokens) if tokens else 'no tokens declaration'})",
            fix="declare the batch and sequence dims, e.g. 'tokens B, T' (a decode step has no sequence dim)",
        )
    return tokens[-1]


def _map_tensors(expr, f):
    """``expr`` with ``f`` applied to each tensor it reads (products, collectives and functions)."""
    if isinstance(expr, Tensor):
        return f(expr)
    if isinstance(expr, Product):
        return replace(expr, left=_map_tensors(expr.left, f), right=_map_tensors(expr.right, f))
    if isinstance(expr, Collective):
        return replace(expr, arg=_map_tensors(expr.arg, f))
    if isinstance(expr, Apply):
        return replace(expr, operands=tuple(_map_tensors(o, f) for o in expr.operands))
    return expr


def shard(
    program: Program | str,
    params: Mapping[str, tuple[str, ...]] | str | None = None,
    activations: Mapping[str, tuple[str, ...]] | str | None = None,
    mesh=None,
    sequence: tuple[str, ...] | str | None = None,
) -> Program:
    """``program`` with every parameter sharded by ``params`` ({dim: axes}) and every other tensor by
    ``activations``; a parameter sharded over an axis that shards, in its product's other operand, a dim the
    product keeps is gathered over that axis before the product (FSDP). Checks legality on ``mesh`` if given.

    A tensor with two dims a map gives one axis takes it on the first in the map's order (EP's ``B=X,E=X``:
    the router's ``R[B_X, T, E]``, the experts' ``X[E_X, C, D]``). A map that cannot be applied as written is
    refused (UsageError) rather than dropped: an axis named twice for one dim (``D=XX``), an entry that would
    shard nothing (``D=X,F=X``: every parameter with F has D), or one axis for two of the ``tokens`` dims
    (``B=X,T=X``).

    ``sequence`` (axes, ``"Y"``) is Megatron sequence parallelism on those tensor-parallel axes: an activation
    that does not use such an axis (the residual stream, the norms' and the elementwise ops' operands and
    results) has its sequence dim (the last ``tokens`` dim) sharded over it; before a product whose other
    operand is sharded over the axis the activation is gathered (``AllGather``: the weights are not), and a
    product whose local results are partial sums over the axis ends in a ``ReduceScatter`` onto the sequence
    dim instead of an ``AllReduce``."""
    prog = parse(program) if isinstance(program, str) else program
    pmap = parse_dim_map(params) if isinstance(params, str) or params is None else dict(params)
    amap = (
        parse_dim_map(activations)
        if isinstance(activations, str) or activations is None
        else dict(activations)
    )
    roles = prog.roles
    written = list(dict.fromkeys(tensors_of(prog)))
    placed: dict[Tensor, tuple[Dim, ...]] = {}  # each tensor's dims under its map, found once
    for text, given, role_dims, what, where in (
        (params, pmap, lambda r: r in (Role.PARAMS, Role.EMBEDDINGS), "--params", "the parameters"),
        (
            activations,
            amap,
            lambda r: r not in (Role.PARAMS, Role.EMBEDDINGS),
            "--activations",
            "the activations",
        ),
    ):
        kind = [t for t in written if role_dims(roles.role_of(t.name) if roles and t.name else None)]
        if isinstance(text, str):  # user text: a dim no tensor of the kind has would shard nothing, silently
            refuse_unknown_dims(given, (d for t in kind for d in t.dim_names), what, where)
        for dim, axes in given.items():
            refuse_repeated_axis(dim, tuple(axes), f"{what} {map_text(given)}")
        tokens = roles.tokens if roles is not None and given is amap else ()
        placed.update(refuse_dropped(kind, given, f"{what} {map_text(given)}", where, tokens))
    seq_axes = _sequence_axes(prog, pmap, amap, sequence)
    seq = _sequence_dim(prog) if seq_axes else ""

    def is_param(t: Tensor) -> bool:
        return (
            roles is not None
            and t.name is not None
            and roles.role_of(t.name) in (Role.PARAMS, Role.EMBEDDINGS)
        )

    def sharded(t: Tensor) -> Tensor:
        dims = placed.get(t)
        if dims is None:
            out = apply_map(t, pmap if is_param(t) else amap)
        else:
            out = t if dims == t.dims else replace(t, dims=dims)
        if is_param(t):
            return out
        if seq in out.dim_names and not out.axes_of(seq):
            free = tuple(a for a in seq_axes if a not in out.used_axes)
            if free:
                out = out.with_axes(seq, free)
        return out

    out: list = []
    gathered: dict[str, Tensor] = {}
    seq_gathered: dict[Tensor, Tensor] = {}

    def read(t: Tensor) -> Tensor:
        """An operand of a function or elementwise statement: an activation gathered over the sequence before
        an earlier product is whole from then on (the program moved on), so it reads the whole copy, and its
        plan slices it back for free (a residual add of the layer's input after its first product)."""
        mine = sharded(t)
        return seq_gathered.get(mine, mine)

    for s in prog.statements:
        expr, result = (s.expr, s.result) if isinstance(s, Arrow) else (s, None)
        if not plain_product(expr):
            if isinstance(s, Arrow):
                out.append(replace(s, expr=_map_tensors(expr, read), result=sharded(s.result)))
            else:
                out.append(_map_tensors(s, read))
            continue
        left, right = sharded(expr.left), sharded(expr.right)
        res = sharded(result) if result is not None else None
        operands = [left, right]
        # Megatron SP: an activation sharded over the sequence by an axis the other operand uses is gathered
        for k, t in enumerate(operands):
            if t in seq_gathered:  # gathered once: later products read the whole copy (the program moved on)
                operands[k] = seq_gathered[t]
                continue
            other = operands[1 - k]
            hit = tuple(a for a in (t.axes_of(seq) if seq in t.dim_names else ()) if a in other.used_axes)
            if is_param(t) or not hit:
                continue
            whole = t.with_axes(seq, tuple(a for a in t.axes_of(seq) if a not in hit))
            out.append(Arrow(Collective(Op.ALL_GATHER, hit, t), whole))
            seq_gathered[t] = operands[k] = whole
        for k, t in enumerate(operands):
            if not is_param(t):
                continue
            if t.name in gathered:
                operands[k] = gathered[t.name]
                continue
            # FSDP: an axis of the parameter that shards a dim the product keeps (its batch) in the other operand
            other = operands[1 - k]
            kept = set(res.dim_names) if res is not None else set(other.dim_names) - set(t.dim_names)
            where = {a: d.label for d in t.dims for a in d.axes}
            clash = [
                a
                for a in t.sharded_axes
                if any(a in other.axes_of(lbl) for lbl in other.dim_names if lbl != where[a] and lbl in kept)
            ]
            version = t
            for d in t.dims:  # per dim, one AllGather of the minor-most axes from the first clashing one on
                hit = [k for k, a in enumerate(d.axes) if a in clash]
                if not hit:
                    continue
                gone = d.axes[hit[0] :]
                after = replace(
                    version,
                    dims=tuple(
                        e.with_axes(e.axes[: hit[0]]) if e.label == d.label else e for e in version.dims
                    ),
                )
                out.append(Arrow(Collective(Op.ALL_GATHER, gone, version), after))
                version = after
            if clash:
                gathered[t.name] = operands[k] = version
        product = Product(operands[0], operands[1], expr.contract, expr.local)
        scatter = _partial_over_sequence(operands, res, seq, seq_axes)
        if res is not None and scatter:
            partial = replace(
                res.with_axes(seq, tuple(a for a in res.axes_of(seq) if a not in scatter)),
                unreduced=tuple(sorted((*res.unreduced, *scatter))),
            )
            out.append(Arrow(product, partial))
            out.append(Arrow(Collective(Op.REDUCE_SCATTER, scatter, partial, dim=seq), res))
            continue
        out.append(Arrow(product, res) if res is not None else product)
    made = Program(tuple(out), prog.mesh, prog.sizes, prog.roles, source=None)
    if mesh is not None:
        check_or_raise(made, mesh)
    return made


def _partial_over_sequence(
    operands: list[Tensor], res: Tensor | None, seq: str, seq_axes: tuple[str, ...]
) -> tuple[str, ...]:
    """The sequence-parallel axes a product's result is sharded over on the sequence dim while its local
    products are partial sums over them (a dim both operands shard over the axis is contracted): the
    ReduceScatter that ends the tensor-parallel region."""
    if res is None or seq not in res.dim_names:
        return ()
    left, right = operands
    contracted = (set(left.dim_names) & set(right.dim_names)) - set(res.dim_names)
    partial = {a for d in contracted for a in left.axes_of(d) if a in right.axes_of(d)}
    return tuple(a for a in res.axes_of(seq) if a in seq_axes and a in partial)


def _sequence_axes(prog: Program, pmap, amap, sequence) -> tuple[str, ...]:
    """The axes of Megatron sequence parallelism, checked: each shards a parameter (a tensor-parallel axis)
    and not the activations' sequence dim already."""
    if sequence is None or (not isinstance(sequence, str) and not sequence):  # "" is refused, () is none
        return ()
    axes = sequence_axes(sequence)
    seq = _sequence_dim(prog)
    tp = {a for dims in pmap.values() for a in dims}
    for a in axes:
        if a not in tp:
            raise UsageError(
                f"Megatron sequence parallelism over {a}: {a} shards no parameter, so there is no "
                "tensor-parallel region to leave",
                fix=f"shard the weights over {a} (e.g. --params F={a},K={a}) or drop {a} from the sequence axes",
            )
        if a in amap.get(seq, ()):
            raise UsageError(
                f"Megatron sequence parallelism over {a}: the activations already shard {seq} over {a}",
                fix=f"drop {seq}={a} from --activations",
            )
    return axes
