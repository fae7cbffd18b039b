"""The sizes each exercise's check calls the learner's function with, and their words."""

from __future__ import annotations

from helpers.checker.compare import (
    B2,
    CROSS_T_K,
    CROSS_T_K2,
    D_MODEL,
    D_MODEL2,
    HEADS,
    HEADS2,
    ONE_HEAD_D_K,
    ONE_HEAD_D_K2,
    T2,
    B,
    T,
)


def _sizes(second: bool = False) -> tuple[int, int, int, int, int, int]:
    """(B, T, d_model, num_heads, one head's d_k, 13's T_k): the first set, or the second."""
    if second:
        return B2, T2, D_MODEL2, HEADS2, ONE_HEAD_D_K2, CROSS_T_K2
    return B, T, D_MODEL, HEADS, ONE_HEAD_D_K, CROSS_T_K


INDUCTION_SIZES = {"B": 2, "h": 3, "T": 10, "n": 5}  # 18's exercise: n = T // 2


INDUCTION_SIZES2 = {"B": 1, "h": 2, "T": 14, "n": 7}


SHARED_KV_SIZES = {"B": 2, "h": 4, "g": 2, "T": 5, "d_k": 3}  # 15's exercise: groups of 2


SHARED_KV_SIZES2 = {"B": 1, "h": 6, "g": 1, "T": 7, "d_k": 4}  # one K/V head (MQA)


SHARED_KV_SIZES3 = {"B": 1, "h": 8, "g": 2, "T": 4, "d_k": 2}  # groups of 4: h // g is neither


TILED_SIZES = {"T_q": 6, "T_k": 10, "d_k": 4, "d_v": 3, "block": 3}  # 19's: a last block of 1 key


TILED_SIZES2 = {"T_q": 5, "T_k": 7, "d_k": 2, "d_v": 4, "block": 2}


TILED_SIZES3 = {"T_q": 3, "T_k": 4, "d_k": 3, "d_v": 2, "block": 4}  # one block: all the keys


# further sets of sizes, after the second, for an exercise whose first two let a slip through
FURTHER_CHECK_SIZES: dict[str, tuple[dict[str, int], ...]] = {
    "shared_kv": (SHARED_KV_SIZES3,),
    "tiled_attention": (TILED_SIZES3,),
}


# The sizes each exercise's check calls the learner's function with, keyed by exercise: 01
# one_head, 02 loop (diagnose(per_head=True)), 03 split_heads, 05 fused (diagnose(mask=False)),
# 06 masked (diagnose()), 09 cross_attention, 12 head_scores. Notebooks can state them.
_D_K = D_MODEL // HEADS


CHECK_SIZES: dict[str, dict[str, int]] = {
    "one_head": {"B": B, "T": T, "d_model": D_MODEL, "d_k": ONE_HEAD_D_K},
    "loop": {"B": B, "T": T, "d_model": D_MODEL, "num_heads": HEADS, "d_k": _D_K},
    "split_heads": {"B": B, "T": T, "d_model": D_MODEL, "num_heads": HEADS, "d_k": _D_K},
    "fused": {"B": B, "T": T, "d_model": D_MODEL, "num_heads": HEADS, "d_k": _D_K},
    "masked": {"B": B, "T": T, "d_model": D_MODEL, "num_heads": HEADS, "d_k": _D_K},
    "cross_attention": {
        "B": B,
        "T_q": T,
        "T_k": CROSS_T_K,
        "d_model": D_MODEL,
        "num_heads": HEADS,
        "d_k": _D_K,
    },  # fmt: skip
    "head_scores": {"B": B, "T": T, "d_model": D_MODEL, "d_k": ONE_HEAD_D_K},
    "induction_score": INDUCTION_SIZES,
    "shared_kv": SHARED_KV_SIZES,
    "tiled_attention": TILED_SIZES,
}


def _sizes_of(b: int, t: int, d_model: int, heads: int, d_k: int, t_k: int) -> dict:
    return {
        "one_head": {"B": b, "T": t, "d_model": d_model, "d_k": d_k},
        **{
            name: {"B": b, "T": t, "d_model": d_model, "num_heads": heads, "d_k": d_model // heads}
            for name in ("loop", "split_heads", "fused", "masked")
        },  # fmt: skip
        "cross_attention": {
            "B": b,
            "T_q": t,
            "T_k": t_k,
            "d_model": d_model,
            "num_heads": heads,
            "d_k": d_model // heads,
        },  # fmt: skip
        "head_scores": {"B": b, "T": t, "d_model": d_model, "d_k": d_k},
        "induction_score": INDUCTION_SIZES2,
        "shared_kv": SHARED_KV_SIZES2,
        "tiled_attention": TILED_SIZES2,
    }


# the second set of sizes, checked once the first gives the right output
SECOND_CHECK_SIZES: dict[str, dict[str, int]] = _sizes_of(*_sizes(second=True))


def _short_sizes(name: str, second: bool | int = False) -> str:
    """'B = 2, T = 5, d_model = 12, num_heads = 3, d_k = 4' (the loop: 3 heads); `second`: the
    second set (True or 1), or a further one (2, ...)."""
    sets = (CHECK_SIZES[name], SECOND_CHECK_SIZES[name], *FURTHER_CHECK_SIZES.get(name, ()))
    sizes = sets[int(second)]
    parts = [f"{key} = {value}" for key, value in sizes.items()]
    if name == "loop":
        parts = [p if not p.startswith("num_heads") else f"{sizes['num_heads']} heads"
                 for p in parts]  # fmt: skip
    return ", ".join(parts)


def _two_sizes(name: str) -> str:
    """'at two sizes (B = 2, ...; then B = 1, ...)', for a ✓."""
    count = 2 + len(FURTHER_CHECK_SIZES.get(name, ()))
    sets = "; then ".join(_short_sizes(name, which) for which in range(count))
    return f"at {_COUNTS[count]} sizes ({sets})"


_COUNTS = {2: "two", 3: "three", 4: "four"}


_ORDINALS = {1: "second", 2: "third", 3: "fourth"}


def check_sizes(name: str) -> str:
    """The sentence that says which sizes an exercise's check uses, e.g. 'The check calls your
    function with B = 2, T = 5, d_model = 12 and num_heads = 3 (so d_k = 4).'"""
    return f"The check calls your function with {_sizes_text(name)}."


def _sizes_text(name: str) -> str:
    sizes = dict(CHECK_SIZES[name])
    if name == "induction_score":
        b, h, t = sizes["B"], sizes["h"], sizes["T"]
        return f"maps of B = {b}, h = {h} and T = {t} (so n = {t // 2})"
    if name == "shared_kv":
        b, h, g, t, d_k = (sizes[n] for n in ("B", "h", "g", "T", "d_k"))
        return (
            f"q of B = {b}, h = {h} query heads, T = {t} and d_k = {d_k}, and k and v with "
            f"g = {g} K/V heads"
        )
    if name == "tiled_attention":
        t_q, t_k, d_k, d_v, block = (sizes[n] for n in ("T_q", "T_k", "d_k", "d_v", "block"))
        return (
            f"q of T_q = {t_q} queries and d_k = {d_k}, k and v of T_k = {t_k} keys (v with "
            f"d_v = {d_v}), and block = {block}"
        )
    d_k = sizes.pop("d_k")
    heads = sizes.pop("num_heads", None)
    parts = [f"{key} = {value}" for key, value in sizes.items()]
    if heads is None:
        parts.append(f"d_k = {d_k}")
        tail = ""
    elif name == "loop":
        parts.append(f"lists of {heads} heads' matrices")
        tail = f" (so d_k = {d_k})"
    else:
        parts.append(f"num_heads = {heads}")
        tail = f" (so d_k = {d_k})"
    text = f"{', '.join(parts[:-1])} and {parts[-1]}{tail}"
    if name == "masked":
        text += ", without and with a padding mask (B, T, T)"
    return text
