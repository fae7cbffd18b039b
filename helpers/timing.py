"""What a forward pass costs: timed on this machine, and counted the same on every machine.

- `interleaved_medians` times candidates in turn (A, B, C, A, B, C, ...), so every candidate sees
  the same background load and their ratio is fairer than timing one after the other (`make
  bench`). Times depend on the machine.
- `count_calls` counts what one call asks of PyTorch: its operator calls, matrix products,
  multiply-adds, and the numbers read and written. These depend only on the code, the shapes and
  the PyTorch version, so notebooks 08 and 14 check their claims on them, never on times.
- `check_fusing_counts` (08), `check_step_counts` and `check_cache_bytes` (10) are the checks
  on them: each prints ✓ lines naming what it compared, or raises AssertionError saying what
  came instead (`tests/test_claims_counts.py` feeds each one a wrong object).

Torch only.
"""

from __future__ import annotations

import statistics
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves

from helpers.attention import KVCache, kv_cache_bytes

__all__ = [
    "Calls",
    "check_cache_bytes",
    "check_fusing_counts",
    "check_step_counts",
    "count_calls",
    "interleaved_medians",
]


@torch.no_grad()
def interleaved_medians(
    candidates: dict[str, Callable[[], object]], repeats: int = 30, warmup: int = 3
) -> dict[str, float]:
    """Run each candidate `warmup` times, then `repeats` rounds in turn; median seconds of each."""
    for fn in candidates.values():
        for _ in range(warmup):
            fn()
    times: dict[str, list[float]] = {name: [] for name in candidates}
    for _ in range(repeats):
        for name, fn in candidates.items():
            start = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - start)
    return {name: statistics.median(ts) for name, ts in times.items()}


_PRODUCTS = {"mm", "addmm", "bmm", "baddbmm", "mv", "dot"}  # aten's matrix products


@dataclass
class Calls:
    """What one call of a function asked of PyTorch's operators (aten, after PyTorch's own
    decompositions; views such as `transpose` are calls too).

    - `calls`: operator calls in all; `ops`: how many of each, by name (e.g. {"mm": 4, ...}).
    - `products`: calls that multiply matrices (mm, bmm, ...); a fused attention kernel
      (`_scaled_dot_product_*`) counts as one, although it does two products inside.
    - `multiply_adds`: in those products: m·k·n for (m, k) @ (k, n), times the batch; a kernel's
      B·h·T_q·T_k·(d_k + d_v).
    - `read`, `written`: numbers the non-view calls take in and make (a view reads and writes
      nothing; an input broadcast with stride 0 counts once per number in memory). What happens
      inside one call (a kernel's own buffers) is not seen.
    - `largest`: the most numbers one call made (its largest new tensor): what the computation
      must hold at once, at least.
    """

    calls: int = 0
    products: int = 0
    multiply_adds: int = 0
    read: int = 0
    written: int = 0
    largest: int = 0
    ops: Counter = field(default_factory=Counter)


def _numbers(t: torch.Tensor) -> int:
    """The numbers of t held in memory: its size, or less when it is broadcast (stride 0)."""
    in_storage = t.untyped_storage().nbytes() // t.element_size()
    return min(t.numel(), in_storage)


def _multiply_adds(name: str, args: tuple) -> int:
    if name in ("mm", "bmm", "mv", "dot"):
        a, b = args[0], args[1]
    elif name in ("addmm", "baddbmm"):
        a, b = args[1], args[2]
    else:  # _scaled_dot_product_*(q, k, v, ...): q (..., T_q, d_k), k (..., T_k, d_k)
        q, k, v = args[0], args[1], args[2]
        return q.numel() // q.size(-1) * k.size(-2) * (q.size(-1) + v.size(-1))
    return a.numel() * (b.size(-1) if b.dim() > 1 else 1)  # (.., m, k) @ (.., k, n): m·k·n


class _Counter(TorchDispatchMode):
    def __init__(self, into: Calls):
        super().__init__()
        self.into = into

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        name = func.overloadpacket.__name__
        c = self.into
        c.calls += 1
        c.ops[name] += 1
        if name in _PRODUCTS or name.startswith("_scaled_dot_product"):
            c.products += 1
            c.multiply_adds += _multiply_adds(name, args)
        ins = [t for t in tree_leaves((args, kwargs)) if isinstance(t, torch.Tensor)]
        outs = [t for t in tree_leaves(out) if isinstance(t, torch.Tensor)]
        memory = {t.untyped_storage().data_ptr() for t in ins}
        fresh = [t for t in outs if t.untyped_storage().data_ptr() not in memory]
        if fresh:  # a view shares its input's memory: it reads and writes nothing
            c.read += sum(_numbers(t) for t in ins)
            c.written += sum(_numbers(t) for t in fresh)
            c.largest = max(c.largest, *(_numbers(t) for t in fresh))
        return out


@torch.no_grad()
def count_calls(fn: Callable[[], object]) -> Calls:
    """Run fn() once (no gradients) and count what it asked of PyTorch's operators: a `Calls`.
    The counts do not depend on the machine's speed or load."""
    calls = Calls()
    with _Counter(calls):
        fn()
    return calls


def _fail(claim: str, why: str) -> AssertionError:
    return AssertionError(f"✗ {claim}: {why}")


def check_fusing_counts(
    head_counts: Sequence[int],
    loop: Sequence[Calls],
    fused: Sequence[Calls],
    kernel: Sequence[Calls],
    B: int,
    T: int,
) -> None:
    """Notebook 08's claims, on counts (one `Calls` per h in head_counts, for the same x of
    B sequences of T tokens), exact for the course's modules: (1) the per-head loop makes
    5h + 1 matrix products (3h projections, 2h inside the heads, W^O), the fused module 6 and the
    fused kernel 5 (3 projections, one attention call, W^O) at every h; (2) the three do the same
    multiply-adds (the kernel's one call is counted by formula, B·h·T·T·(d_k + d_v): a count cannot
    see inside it); (3) the loop and the fused module each write at least B·h·T·T numbers more
    than the kernel's calls (the h maps of T × T, which the kernel's call does not return)."""
    claim = "the loop makes 5h + 1 matrix products, the fused module 6 and the kernel 5, at every h"
    expected = {"loop": [5 * h + 1 for h in head_counts], "fused": [6] * len(head_counts),
                "fused kernel": [5] * len(head_counts)}  # fmt: skip
    per_h = {"loop": [c.products for c in loop], "fused": [c.products for c in fused],
             "fused kernel": [c.products for c in kernel]}  # fmt: skip
    for name, want in expected.items():
        if per_h[name] != want:
            raise _fail(claim, f"the {name}'s products per h {list(head_counts)} are "
                               f"{per_h[name]}, not {want}")  # fmt: skip
    claim = "the three do the same arithmetic"
    for h, a, b, c in zip(head_counts, loop, fused, kernel):
        if not a.multiply_adds == b.multiply_adds == c.multiply_adds:
            raise _fail(
                claim,
                f"at h = {h} their multiply-adds are {a.multiply_adds:,} (loop), "
                f"{b.multiply_adds:,} (fused), {c.multiply_adds:,} (kernel)",
            )
    claim = "the loop and the fused module write the h maps, the kernel's calls do not return them"
    for name, counts in (("loop", loop), ("fused module", fused)):
        for h, c, k in zip(head_counts, counts, kernel):
            if c.written - k.written < B * h * T * T:
                raise _fail(
                    claim,
                    f"at h = {h} the {name} writes {c.written:,} numbers and the kernel "
                    f"{k.written:,}: not the maps' B·h·T·T = {B * h * T * T:,} more",
                )
    print(
        f"✓ h = {head_counts[0]} … {head_counts[-1]}: the loop makes 5h + 1 matrix products "
        f"({per_h['loop'][0]} → {per_h['loop'][-1]}), the fused module 6, the kernel 5;"
    )
    print("  the same multiply-adds in all three (the kernel's single call counted by formula)")
    print("✓ at every h, the loop and the fused module write at least B·h·T·T numbers more than")
    print("  the kernel's calls: the h maps of T × T, which its call does not return (what it")
    print("  does inside that call is not counted)")


def check_step_counts(
    sizes: Sequence[int],
    cached: Sequence[Calls],
    recompute: Sequence[Calls],
    kv_numbers_per_token: int,
) -> None:
    """Notebook 14's claims, on counts (one `Calls` per number of tokens so far T in `sizes`,
    increasing): (1) a cached step reads every cached key and value: from one T to the next, the
    numbers it reads grow by at least kv_numbers_per_token per token (with the course's KVCache,
    2 · 2·g·d_k·B: `torch.cat` copies the cached k and v on each append, and the attention reads
    them; a step whose attention ignored the cache would read only the first half);
    (2) its multiply-adds grow no faster than T; (3) recomputing all tokens costs multiply-adds
    that grow faster than T (the T × T scores), and more than the cached step's at every T."""
    claim = "a cached step reads all T cached keys and values"
    for (t0, a), (t1, b) in zip(zip(sizes, cached), zip(sizes[1:], cached[1:])):
        if b.read - a.read < kv_numbers_per_token * (t1 - t0):
            raise _fail(
                claim,
                f"from T = {t0} to {t1} the numbers it reads grow by {b.read - a.read:,}, less "
                f"than {kv_numbers_per_token} per token ({kv_numbers_per_token * (t1 - t0):,})",
            )
    growth_T = sizes[-1] / sizes[0]
    growth_cached = cached[-1].multiply_adds / cached[0].multiply_adds
    growth_all = recompute[-1].multiply_adds / recompute[0].multiply_adds
    claim = "the cached step's work grows no faster than T, recomputing's faster"
    if growth_cached > growth_T:
        raise _fail(claim, f"the cached step's multiply-adds grow {growth_cached:.1f}× "
                           f"while T grows {growth_T:.0f}×")  # fmt: skip
    if growth_all <= growth_T:
        raise _fail(claim, f"recomputing's multiply-adds grow {growth_all:.1f}×, "
                           f"not more than T's {growth_T:.0f}×")  # fmt: skip
    if any(r.multiply_adds <= c.multiply_adds for c, r in zip(cached, recompute)):
        raise _fail(claim, "recomputing does no more multiply-adds than the cached step")
    print(
        f"✓ T = {sizes[0]} → {sizes[-1]} ({growth_T:.0f}×): a cached step reads at least "
        f"{kv_numbers_per_token} more numbers per extra token"
    )
    print(
        f"  (the cache's copy of its k and v, and the attention reading them); its multiply-adds "
        f"grow {growth_cached:.1f}× (no faster than T), "
        f"recomputing's {growth_all:.0f}× (faster)"
    )


def check_cache_bytes(cache: KVCache, num_kv_heads: int, d_k: int, name: str) -> int:
    """A filled `KVCache` holds exactly 2 (k and v) · B · g · d_k · T numbers (`kv_cache_bytes`),
    g = num_kv_heads, at its numbers' size in bytes; its k and v are (B, g, T, d_k). Returns the
    bytes."""
    B, T, size = cache.k.size(0), len(cache), cache.k.element_size()
    expected = kv_cache_bytes(T, num_kv_heads, d_k, bytes_per_number=size, B=B)
    formula = f"2 · {num_kv_heads} · {d_k} · {T} · {size}" + (f" · {B}" if B > 1 else "")
    claim = f"{name} holds {formula} = {expected:,} bytes"
    for name_kv, t in (("k", cache.k), ("v", cache.v)):
        if tuple(t.shape) != (B, num_kv_heads, T, d_k):
            raise _fail(claim, f"its {name_kv} is {tuple(t.shape)}, not (B, g, T, d_k) = "
                               f"{(B, num_kv_heads, T, d_k)}")  # fmt: skip
    if cache.nbytes != expected:
        raise _fail(claim, f"it holds {cache.nbytes:,} bytes")
    print(f"✓ {name} holds {cache.nbytes:,} bytes = {formula} (k and v · g · d_k · T · bytes)")
    return cache.nbytes
