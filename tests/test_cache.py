"""The one cache layer (shardalg/cache.py): one decorator and one container, registered by kind, bounded by
one size setting, cleared by one call."""

from __future__ import annotations

import pytest

import shardalg as sa
from shardalg import cache
from shardalg.cache import Kind, memo, memoized, registered, size_setting
from shardalg.errors import ShardalgError


def test_a_memoized_function_is_registered_and_cleared_with_its_kind() -> None:
    calls: list[int] = []

    @memoized(Kind.PIECE)
    def piece(x: int) -> int:
        calls.append(x)
        return x

    @memoized(Kind.ANSWER)
    def answer(x: int) -> int:
        return x

    names = {e.name: e for e in registered()}
    key = f"{__name__}.test_a_memoized_function_is_registered_and_cleared_with_its_kind.<locals>.piece"
    assert names[key].kind is Kind.PIECE and names[key].holds is piece
    piece(1), piece(1), answer(1)
    assert calls == [1] and names[key].size() == 1
    cache.clear_caches(Kind.ANSWER)  # answers only: the piece stays
    assert answer.cache_info().currsize == 0 and piece.cache_info().currsize == 1
    sa.clear_caches()  # the public name: every piece and answer
    assert piece.cache_info().currsize == 0
    piece(1)
    assert calls == [1, 1]


def test_keys_are_values_not_identities() -> None:
    @memoized(Kind.PIECE)
    def length(t: tuple[int, ...]) -> int:
        return len(t)

    length((1, 2))
    length(tuple([1, 2]))  # an equal, other object: a hit
    assert length.cache_info().hits == 1


def test_a_memo_is_bounded_by_the_one_size_setting(monkeypatch) -> None:
    kept = memo(f"{__name__}.kept", Kind.PIECE)
    monkeypatch.setattr(cache, "SIZE", 3)
    for k in range(10):
        assert kept.keep(k, k * k) == k * k
        assert len(kept) <= 3
    cache.clear_caches(Kind.PIECE)
    assert not kept


def test_tables_are_never_cleared() -> None:
    table = memo(f"{__name__}.table", Kind.TABLE, {})
    table["a"] = 1
    sa.clear_caches()
    assert table == {"a": 1}
    with pytest.raises(ShardalgError, match="not cleared"):
        cache.clear_caches(Kind.TABLE)


def test_a_memo_may_bring_its_own_clear() -> None:
    forgotten: list[str] = []
    held = memo(f"{__name__}.held", Kind.PIECE, {"x": 1}, lambda: forgotten.append("x"))
    sa.clear_caches()
    assert forgotten == ["x"] and held == {"x": 1}


def test_bad_settings_and_kinds_are_refused_with_a_clear_message() -> None:
    assert size_setting(None) == size_setting("") == cache.DEFAULT_SIZE
    assert size_setting("128") == 128
    for text in ("0", "-4", "many"):
        with pytest.raises(ShardalgError, match="SHARDALG_CACHE_SIZE"):
            size_setting(text)
    with pytest.raises(ShardalgError, match="a Kind"):
        cache.clear_caches("answer")  # type: ignore[arg-type]
    with pytest.raises(ShardalgError, match="a Kind"):
        memoized("piece")(len)  # type: ignore[arg-type]


def test_every_cache_of_the_package_goes_through_the_layer() -> None:
    """No functools cache in shardalg/ outside the layer: every one is registered (the bench finds them so)."""
    import importlib
    import pkgutil

    found = []
    for info in pkgutil.walk_packages(sa.__path__, prefix="shardalg."):
        if info.name.endswith("__main__"):
            continue  # runs the CLI
        try:
            mod = importlib.import_module(info.name)
        except ImportError:  # an optional dependency missing
            continue
        for name, obj in vars(mod).items():
            if getattr(obj, "__module__", None) == mod.__name__ and callable(
                getattr(obj, "cache_clear", None)
            ):
                found.append((f"{mod.__name__}.{name}", obj))
    held = {id(e.holds) for e in registered()}  # once every module is imported
    assert len(found) > 20
    assert not [name for name, obj in found if id(obj) not in held]
