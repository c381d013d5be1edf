"""Model configurations as data, each number with its source (the same shape as the chip presets).

    >>> get("llama-3-70b").d_ff.value
    28672

A configuration is a dense transformer layer (attention with ``heads`` query heads and ``kv_heads`` KV heads of
``head_dim``; a gated MLP of width ``d_ff``) repeated ``layers`` times, with input and output embeddings over
``vocab`` (one shared matrix when ``tied``) and RMSNorm gains (``norms``); ``experts`` and ``top_k`` make the
MLP a mixture of experts. :mod:`.expand` turns one into a program in the notation. ``dense`` has no numbers:
its program is symbolic in every size.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

from shardalg.errors import UsageError, closest

__all__ = ["Cited", "ModelConfig", "PRESETS", "get", "names"]


@dataclass(frozen=True)
class Cited:
    """A number and where it comes from."""

    value: int
    source: str

    def __post_init__(self) -> None:
        if isinstance(self.value, bool) or not isinstance(self.value, int) or self.value < 1:
            raise UsageError(f"a model size is a positive integer, not {self.value!r}")


@dataclass(frozen=True)
class ModelConfig:
    """One model: its sizes (None where symbolic) and what it is."""

    name: str
    description: str
    layers: Cited | None = None
    d_model: Cited | None = None
    d_ff: Cited | None = None
    heads: Cited | None = None
    kv_heads: Cited | None = None
    head_dim: Cited | None = None
    vocab: Cited | None = None
    experts: Cited | None = None
    top_k: Cited | None = None
    tied: bool = False
    norms: bool = True
    moe: bool = False
    check: str = ""  # a published figure the expansion reproduces (tests check it)

    @property
    def sizes(self) -> dict[str, int]:
        """The dims of the program (L, D, F, K, G, H, V, E) with their values, where known."""
        out: dict[str, int] = {}
        for dim, field in (
            ("L", "layers"),
            ("D", "d_model"),
            ("F", "d_ff"),
            ("K", "kv_heads"),
            ("H", "head_dim"),
            ("V", "vocab"),
            ("E", "experts"),
        ):
            value = getattr(self, field)
            if value is not None:
                out[dim] = value.value
        if self.heads is not None and self.kv_heads is not None:
            if self.heads.value % self.kv_heads.value:
                raise UsageError(
                    f"{self.name}: {self.heads.value} query heads do not group into "
                    f"{self.kv_heads.value} KV heads"
                )
            out["G"] = self.heads.value // self.kv_heads.value
        return dict(sorted(out.items(), key=lambda kv: "LDFKGHVE".index(kv[0])))

    def numbers(self) -> list[tuple[str, Cited]]:
        return [
            (f.name, getattr(self, f.name)) for f in fields(self) if isinstance(getattr(self, f.name), Cited)
        ]

    def sources(self) -> list[str]:
        """One line per source: ``layers=40, d_model=5120: <source>`` (keys in parentheses dropped)."""
        groups: dict[str, list[str]] = {}
        for key, c in self.numbers():
            where, _, field = c.source.rpartition(" (")
            groups.setdefault(where or c.source, []).append(
                f"{key}={c.value}" + (f" ({field[:-1]})" if where else "")
            )
        return [f"{', '.join(items)}: {where}" for where, items in groups.items()]

    def to_json(self) -> dict[str, object]:
        return {
            "name": self.name,
            "description": self.description,
            "moe": self.moe,
            "tied": self.tied,
            "norms": self.norms,
            "sizes": self.sizes,
            "published": self.check or None,
            "numbers": {k: {"value": c.value, "source": c.source} for k, c in self.numbers()},
        }


def _hf(repo: str, key: str) -> str:
    return f"Hugging Face {repo} config.json, https://huggingface.co/{repo}/blob/main/config.json ({key})"


def _config(
    name: str,
    description: str,
    repo: str,
    check: str,
    *,
    layers: int,
    d_model: int,
    d_ff: int,
    heads: int,
    kv_heads: int,
    head_dim: int,
    vocab: int,
    experts: int | None = None,
    top_k: int | None = None,
    head_dim_source: str | None = None,
) -> ModelConfig:
    keys = {
        "layers": "num_hidden_layers",
        "d_model": "hidden_size",
        "d_ff": "intermediate_size",
        "heads": "num_attention_heads",
        "kv_heads": "num_key_value_heads",
        "vocab": "vocab_size",
        "experts": "num_local_experts",
        "top_k": "num_experts_per_tok",
    }
    given = {
        "layers": layers,
        "d_model": d_model,
        "d_ff": d_ff,
        "heads": heads,
        "kv_heads": kv_heads,
        "vocab": vocab,
        "experts": experts,
        "top_k": top_k,
    }
    cited = {k: Cited(v, _hf(repo, keys[k])) for k, v in given.items() if v is not None}
    cited["head_dim"] = Cited(head_dim, head_dim_source or _hf(repo, "hidden_size / num_attention_heads"))
    return ModelConfig(name, description, moe=experts is not None, check=check, **cited)


PRESETS: dict[str, ModelConfig] = {
    c.name: c
    for c in (
        _config(
            "llama-2-13b",
            "LLaMA-2 13B (Touvron et al. 2023): multi-head attention, gated MLP",
            "meta-llama/Llama-2-13b-hf",
            "13,015,864,320 parameters (the Hugging Face checkpoint; "
            "How To Scale Your Model ch. 5 problem 1: 13.1e9)",
            layers=40,
            d_model=5120,
            d_ff=13824,
            heads=40,
            kv_heads=40,
            head_dim=128,
            vocab=32000,
        ),
        _config(
            "llama-3-8b",
            "LLaMA-3 8B (Meta 2024): grouped-query attention (8 KV heads), gated MLP",
            "meta-llama/Meta-Llama-3-8B",
            "8,030,261,248 parameters (the Hugging Face checkpoint)",
            layers=32,
            d_model=4096,
            d_ff=14336,
            heads=32,
            kv_heads=8,
            head_dim=128,
            vocab=128256,
        ),
        _config(
            "llama-3-70b",
            "LLaMA-3 70B (Meta 2024): grouped-query attention (8 KV heads), gated MLP",
            "meta-llama/Meta-Llama-3-70B",
            "70,553,706,496 parameters (the Hugging Face checkpoint; How To Scale Your Model ch. 6: 70.4e9)",
            layers=80,
            d_model=8192,
            d_ff=28672,
            heads=64,
            kv_heads=8,
            head_dim=128,
            vocab=128256,
        ),
        _config(
            "mixtral-8x7b",
            "Mixtral 8x7B (Jiang et al. 2024): 8 experts, top-2 routing, grouped-query "
            "attention; the experts read X[E, C, D], C tokens per expert (C = cf*top_k*B*T/E, derived by "
            "the routing from B and T at its capacity factor cf)",
            "mistralai/Mixtral-8x7B-v0.1",
            "46.7B parameters (Jiang et al. 2024, 'Mixtral of Experts': 46.7B total, 12.9B active)",
            layers=32,
            d_model=4096,
            d_ff=14336,
            heads=32,
            kv_heads=8,
            head_dim=128,
            vocab=32000,
            experts=8,
            top_k=2,
        ),
        ModelConfig(
            "dense",
            "a dense transformer layer, every size symbolic: N = K*G query heads, K KV heads "
            "of dim H, a gated MLP of width F, L layers, vocabulary V",
        ),
    )
}


def names() -> tuple[str, ...]:
    return tuple(PRESETS)


def get(name: str) -> ModelConfig:
    """The preset called ``name``; a UsageError lists the known ones."""
    try:
        return PRESETS[name.lower()]
    except (KeyError, AttributeError):
        near = closest(name, names()) if isinstance(name, str) else None
        raise UsageError(
            f"unknown model {name!r}; known: {', '.join(names())}",
            fix=f"did you mean {near}?" if near else None,
        ) from None
