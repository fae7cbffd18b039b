"""Search for HEAD_COLOURS: 16 colours far apart (CIEDE2000) for normal, deutan and protan vision.

Score of a set = min over {normal, deuteranopia, protanopia} of its min pairwise CIEDE2000.
A figure with h heads uses the first h colours, so prefixes matter too. The palette is built in
stages (default 8 then 16 colours): stage 1 picks the best 8-colour set; stage 2 keeps those 8
fixed and adds 8 more to maximise the 16-colour score. Within each stage:

1. Candidates: an sRGB grid (step 15 per channel) restricted to L_MIN <= L* <= L_MAX, plus the
   fixed colours. D = candidate x candidate min-over-visions CIEDE2000 matrix.
2. Iterated local search on D (seeded, one seed per worker process): greedy farthest-point
   start or a random kick of the best set, coordinate descent on the soft-min energy
   sum(D_ij ** -p), then bottleneck swaps (replace one colour of the closest pair with the
   candidate farthest from the rest while the min grows). Keep the best distinct local optima.
3. Refine those at 8-bit resolution (pattern search on soft-min, then hard min); keep the best.
4. Order the new colours greedily (farthest-point insertion after the fixed ones; the first two
   are the farthest pair), so every prefix is well separated.

Usage: python -m tests.palette_search [--stages 8,16] [--l-min 25] [--l-max 72] [--seed 0]
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import time

import numpy as np

from helpers.figures.palette import L_MAX, L_MIN, delta_e, rgb_to_hex, simulate_cvd, to_lab

KINDS: tuple[str | None, ...] = (None, "deuteranopia", "protanopia")

_LABS: np.ndarray | None = None  # (3, n, 3) candidate Labs, shared with forked workers
_DM: np.ndarray | None = None  # candidate distance matrix, shared with forked workers


def labs_all(rgb: np.ndarray) -> np.ndarray:
    """Lab under the three visions, shape (3, n, 3)."""
    return np.stack([to_lab(rgb if k is None else simulate_cvd(rgb, k)) for k in KINDS])


def _dm_rows(s: int, e: int) -> np.ndarray:
    """Rows s:e of the min-over-visions CIEDE2000 matrix of _LABS."""
    labs = _LABS
    assert labs is not None
    d = np.full((e - s, labs.shape[1]), np.inf)
    for v in range(labs.shape[0]):
        d = np.minimum(d, delta_e(labs[v, s:e, None, :], labs[v, None, :, :]))
    return d.astype(np.float32)


def pair_matrix(pool: mp.pool.Pool, labs: np.ndarray, chunk: int = 200) -> np.ndarray:
    """Min-over-visions CIEDE2000 matrix (n, n), float32, diagonal = inf (uses the pool)."""
    n = labs.shape[1]
    out = np.vstack(pool.starmap(_dm_rows, [(s, min(s + chunk, n)) for s in range(0, n, chunk)]))
    np.fill_diagonal(out, np.inf)
    return out


def greedy_fill(dm: np.ndarray, s: list[int], n: int) -> list[int]:
    """Append farthest-point candidates to s until len(s) == n."""
    s = list(s)
    mind = dm[:, s].min(axis=1)
    mind[s] = -np.inf
    while len(s) < n:
        c = int(np.argmax(mind))
        s.append(c)
        mind = np.minimum(mind, dm[:, c])
        mind[s] = -np.inf
    return s


def energy_descent(
    dm: np.ndarray, s: np.ndarray, nfix: int, p: float, rng: np.random.Generator
) -> np.ndarray:
    """Coordinate descent on sum_{i<j} D_ij^-p (a smooth stand-in for the min); s[:nfix] fixed."""
    s = s.copy()
    for _ in range(30):
        changed = False
        for pos in nfix + rng.permutation(len(s) - nfix):
            others = np.delete(s, pos)
            e = ((dm[:, others].astype(np.float64) / 10.0) ** -p).sum(axis=1)
            e[others] = np.inf
            c = int(np.argmin(e))
            if c != s[pos] and e[c] < e[s[pos]] * (1 - 1e-12):
                s[pos] = c
                changed = True
        if not changed:
            break
    return s


def bottleneck_ascent(dm: np.ndarray, s: np.ndarray, nfix: int) -> np.ndarray:
    """Swap a free member of the closest pair for the best candidate while the min grows."""
    s = s.copy()
    while True:
        sub = dm[np.ix_(s, s)]
        cur = float(sub.min())
        i, j = np.unravel_index(np.argmin(sub), sub.shape)
        best_val, best = cur, None
        for pos in (int(i), int(j)):
            if pos < nfix:
                continue
            others = np.delete(s, pos)
            rest = float(dm[np.ix_(others, others)].min())
            g = dm[:, others].min(axis=1)
            g[others] = -np.inf
            c = int(np.argmax(g))
            val = min(float(g[c]), rest)
            if val > best_val + 1e-9:
                best_val, best = val, (pos, c)
        if best is None:
            return s
        s[best[0]] = best[1]


def ils_worker(
    seed: int, iters: int, keep: int, nfix: int, n: int
) -> list[tuple[float, np.ndarray]]:
    """Iterated local search on _DM (candidates 0..nfix-1 are the fixed colours).

    Returns the `keep` best distinct local optima as (score, index array).
    """
    dm = _DM
    assert dm is not None
    rng = np.random.default_rng(seed)
    fixed = list(range(nfix))
    found: dict[tuple[int, ...], float] = {}
    best_s, best_v = None, -1.0
    for it in range(iters):
        if best_s is None or it % 3 == 0:
            start = fixed if nfix else [int(rng.integers(len(dm)))]
            s = np.array(greedy_fill(dm, start, n))
            if nfix:  # randomise the first free colour too
                s[nfix] = int(rng.integers(nfix, len(dm)))
                while s[nfix] in s[nfix + 1 :] or s[nfix] < nfix:
                    s[nfix] = int(rng.integers(nfix, len(dm)))
        else:  # kick: drop 2-5 free colours of the best set, refill greedily
            free = np.arange(nfix, n)
            drop = rng.choice(free, min(len(free), int(rng.integers(2, 6))), replace=False)
            kept = [int(best_s[k]) for k in range(n) if k not in drop]
            s = np.array(greedy_fill(dm, kept, n))
        s = energy_descent(dm, s, nfix, p=float(rng.choice([8.0, 12.0, 20.0])), rng=rng)
        s = bottleneck_ascent(dm, s, nfix)
        v = float(dm[np.ix_(s, s)].min())
        found[tuple(s[:nfix]) + tuple(sorted(int(i) for i in s[nfix:]))] = v
        if v > best_v + 1e-9:
            best_s, best_v = s.copy(), v
    top = sorted(found.items(), key=lambda kv: -kv[1])[:keep]
    print(f"    worker seed {seed}: {iters} searches, best grid score {best_v:.3f}", flush=True)
    return [(v, np.array(s)) for s, v in top]


def pair_d(x: np.ndarray) -> np.ndarray:
    """Min-over-visions CIEDE2000 matrix of 8-bit colours x (n, 3), diagonal = inf."""
    lab = labs_all(x / 255.0)
    d = np.min(delta_e(lab[:, :, None, :], lab[:, None, :, :]), axis=0)
    np.fill_diagonal(d, np.inf)
    return d


def _softmin(d: np.ndarray, tau: float) -> float:
    """Smooth lower bound of min(d) over the upper triangle; tau -> 0 gives the hard min."""
    v = d[np.triu_indices(len(d), k=1)]
    m = float(v.min())
    return m - tau * float(np.log(np.exp(-(v - m) / tau).sum()))


def refine_8bit(rgb: np.ndarray, nfix: int, l_min: float, l_max: float) -> tuple[float, np.ndarray]:
    """Pattern search at 8-bit resolution on colours nfix.. ; returns (score, rgb 0..1).

    Each free colour may move by +-step on each channel (26 directions, steps 8, 4, 2, 1); a
    move is kept if it raises the soft-min of all pair distances (tau = 1, then 0.3), then the
    hard min is polished by moving the free colours of the closest pair.
    """
    x = np.round(rgb * 255).astype(int)
    offs = np.array([(a, b, c) for a in (-1, 0, 1) for b in (-1, 0, 1) for c in (-1, 0, 1)])
    offs = offs[np.any(offs != 0, axis=1)]
    n = len(x)

    def moves(pos: int, st: int) -> tuple[np.ndarray, np.ndarray]:
        """Admissible neighbours of colour pos and their distance rows to the others."""
        cand = np.clip(x[pos] + st * offs, 0, 255)
        lstar = to_lab(cand / 255.0)[:, 0]
        cand = cand[(lstar >= l_min) & (lstar <= l_max)]
        others = np.delete(x, pos, axis=0)
        lc, lo = labs_all(cand / 255.0), labs_all(others / 255.0)
        return cand, np.min(delta_e(lc[:, :, None, :], lo[:, None, :, :]), axis=0)

    def obj(d: np.ndarray, tau: float | None) -> float:
        return _softmin(d, tau) if tau else float(d.min())

    for tau in (1.0, 0.3, None):
        for st in (8, 4, 2, 1):
            d = pair_d(x)
            cur = obj(d, tau)
            improved = True
            while improved:
                improved = False
                if tau:
                    order: tuple[int, ...] = tuple(range(nfix, n))
                else:
                    i, j = np.unravel_index(np.argmin(d), d.shape)
                    order = tuple(p for p in (int(i), int(j)) if p >= nfix)
                for pos in order:
                    cand, g = moves(pos, st)
                    keep = np.delete(np.arange(n), pos)
                    best_val, best_k = cur, -1
                    for k in range(len(cand)):
                        d2 = d.copy()
                        d2[pos, keep] = g[k]
                        d2[keep, pos] = g[k]
                        val = obj(d2, tau)
                        if val > best_val + 1e-9:
                            best_val, best_k = val, k
                    if best_k >= 0:
                        x[pos] = cand[best_k]
                        d = pair_d(x)
                        cur = obj(d, tau)
                        improved = True
    return float(pair_d(x).min()), x / 255.0


def greedy_order(rgb: np.ndarray, nfix: int) -> np.ndarray:
    """Keep rgb[:nfix]; order the rest by farthest-point insertion (farthest pair first if 0)."""
    d = pair_d(np.round(rgb * 255))
    if nfix == 0:
        dd = np.where(np.isinf(d), -np.inf, d)
        i, j = np.unravel_index(np.argmax(dd), dd.shape)
        order = [int(i), int(j)]
    else:
        order = list(range(nfix))
    while len(order) < len(rgb):
        rest = [k for k in range(len(rgb)) if k not in order]
        order.append(max(rest, key=lambda r: float(d[r, order].min())))
    return rgb[order]


def report(rgb: np.ndarray) -> None:
    """Print L*, per-prefix per-vision min CIEDE2000, and the hex tuple."""
    hexes = [rgb_to_hex(c) for c in rgb]
    print("L*:", " ".join(f"{v:.1f}" for v in to_lab(rgb)[:, 0]))
    print(f"{'h':>3} {'normal':>8} {'deutan':>8} {'protan':>8}")
    for h in range(2, len(rgb) + 1):
        vals = []
        for k in KINDS:
            lab = to_lab(rgb[:h] if k is None else simulate_cvd(rgb[:h], k))
            ii, jj = np.triu_indices(h, k=1)
            vals.append(float(delta_e(lab[ii], lab[jj]).min()))
        print(f"{h:>3} " + " ".join(f"{v:8.2f}" for v in vals))
    print("HEAD_COLOURS: tuple[str, ...] = (")
    for i in range(0, len(hexes), 4):
        print("    " + " ".join(f'"{h}",' for h in hexes[i : i + 4]))
    print(")")


def main() -> None:
    global _LABS, _DM
    ap = argparse.ArgumentParser()
    ap.add_argument("--stages", default="8,16", help="comma-separated prefix sizes")
    ap.add_argument("--l-min", type=float, default=L_MIN)
    ap.add_argument("--l-max", type=float, default=L_MAX)
    ap.add_argument("--step", type=int, default=15, help="sRGB grid step for candidates")
    ap.add_argument("--iters", type=int, default=300, help="local searches per worker and stage")
    ap.add_argument("--keep", type=int, default=6, help="local optima refined per worker/stage")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    stages = [int(s) for s in args.stages.split(",")]
    t0 = time.time()

    lv = np.arange(0, 256, args.step)
    grid = np.stack(np.meshgrid(lv, lv, lv, indexing="ij"), axis=-1).reshape(-1, 3) / 255.0
    lstar = to_lab(grid)[:, 0]
    grid = grid[(lstar >= args.l_min) & (lstar <= args.l_max)]
    ctx = mp.get_context("fork")

    _LABS = labs_all(grid)
    with ctx.Pool(args.workers) as pool:  # fork after _LABS exists
        grid_dm = pair_matrix(pool, _LABS)
    print(f"{len(grid)} grid candidates; matrix built (t={time.time() - t0:.1f}s)", flush=True)

    rgb = np.zeros((0, 3))
    for stage, n in enumerate(stages):
        nfix = len(rgb)
        cand = np.vstack([rgb, grid])
        labs = labs_all(cand)
        top = np.min(delta_e(labs[:, :nfix, None, :], labs[:, None, :, :]), axis=0)
        top[np.arange(nfix), np.arange(nfix)] = np.inf
        _DM = np.block([[top.astype(np.float32)], [top[:, nfix:].T.astype(np.float32), grid_dm]])
        print(f"stage {stage + 1}: {nfix} fixed -> {n} colours", flush=True)
        seeds = [args.seed * 1000 + stage * 100 + w for w in range(args.workers)]
        with ctx.Pool(args.workers) as pool:  # fork after _DM exists, so workers share it
            res = pool.starmap(ils_worker, [(s, args.iters, args.keep, nfix, n) for s in seeds])
            sets = [cand[s] for r in res for _, s in r]
            refined = pool.starmap(refine_8bit, [(r, nfix, args.l_min, args.l_max) for r in sets])
        scores = [v for v, _ in refined]
        print("    refined scores:", " ".join(f"{v:.2f}" for v in sorted(scores, reverse=True)))
        print(f"    (t={time.time() - t0:.1f}s)", flush=True)
        rgb = greedy_order(refined[int(np.argmax(scores))][1], nfix)
    print(f"total {time.time() - t0:.1f}s")
    report(rgb)


if __name__ == "__main__":
    main()
