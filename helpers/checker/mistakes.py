"""The mistakes learners make in attention code: the catalogue, and the words for each stage.
`helpers.checker.stages` computes the reference stage by stage with any set of them switched on:

`attention_stages(...)` returns every intermediate of multi-head attention, in the order code makes
them: q, k, v (B, T, h·d_k); the same cut into heads (B, h, T, d_k); the scores, the masked scores
and the weights (B, h, T, T); the heads' outputs (B, h, T, d_k); the heads merged (B, T, h·d_k);
the output (B, T, d_model). `mistakes=("no_scaling", "w_o_missing")` computes the same with those
two errors made; `given={"scores": t}` continues from a learner's own tensor at that stage.
`helpers.diagnose` compares a learner's traced tensors with these stages.

MISTAKES is the catalogue the notebooks' checks name; SLIPS are further single slips the trace
names (keys made with w_q, a scale after the softmax, ...). Both map a name to (what it looks like,
a hint that points at the line, not at the solution).

Conventions: weights in nn.Linear's (out_features, in_features) layout, so a projection is
x @ w.T; masks boolean, True = may attend.
"""

from __future__ import annotations

import re

__all__ = [
    "MISTAKES",
    "SLIPS",
    "CONTEXT_MISTAKES",
    "CIRCUIT_MISTAKES",
    "INDUCTION_MISTAKES",
    "SHARED_KV_MISTAKES",
    "STAGE_WORDS",
    "HOME",
    "describe",
    "WRONG_NUM_HEADS",
]


# name: (what it looks like, a hint that points at the line)
MISTAKES: dict[str, tuple[str, str]] = {
    "no_scaling": (
        "the scores are not scaled",
        "look at the line that computes q·kᵀ: the scores should be divided by something.",
    ),
    "scaled_by_d_model": (
        "the scores are divided by √d_model",
        "each head compares vectors of d_k features, not d_model: look at your divisor.",
    ),
    "scaled_by_d_k": (
        "the scores are divided by d_k",
        "look at your divisor: is it the right power of d_k?",
    ),
    "softmax_over_queries": (
        "the softmax runs over the queries: the columns of the weights sum to 1, not the rows",
        "look at the dim of your softmax: each query's row should sum to 1.",
    ),
    "no_softmax": (
        "the weights are the raw scores, with no softmax",
        "look at the line that turns scores into weights.",
    ),
    "w_o_missing": (
        "the output is the concatenation of the heads: W^O is never applied",
        "look at what happens to your heads' outputs once they are side by side: one of the "
        "four matrices is never used.",
    ),
    "weights_transposed": (
        "w_q, w_k and w_v are used the wrong way round (x @ w): the input's features meet "
        "the weights' out_features, not their in_features",
        "look at how you apply w_q, w_k and w_v: they are stored as (out_features, "
        "in_features), like nn.Linear's weight.",
    ),
    "heads_split_without_transpose": (
        "q, k and v are cut into heads with a view to (B, h, T, d_k) directly, which mixes "
        "tokens and heads",
        "look at how you cut q, k, v into heads: the d_k features of one head must come from "
        "one token. Which dims does your view split, and in which order?",
    ),
    "heads_split_interleaved": (
        "each head gets every h-th feature, as when a view cuts d_model into (d_k, h) instead of "
        "(h, d_k)",
        "head i owns the d_k features next to each other, i·d_k .. (i+1)·d_k, not every h-th "
        "one: which of h and d_k comes first in your cut (or, for a slice, what is its step)?",
    ),
    "heads_merged_without_transpose": (
        "the heads' outputs are put back together in the wrong order: (B, h, T, d_k) reshaped "
        "to (B, T, d_model) directly",
        "look at the line that merges the heads: before the reshape, which dims sit next to "
        "each other, and which must?",
    ),
    "keys_as_values": (
        "the weights multiply the keys instead of the values",
        "look at what your weights multiply.",
    ),
    "mask_ignored": (
        "the mask has no effect: right without a mask, wrong with one",
        "look at whether your mask reaches the scores at all.",
    ),
    "mask_inverted": (
        "the mask is applied the wrong way round",
        "here True means may attend (nn.MultiheadAttention uses the opposite): look at the "
        "condition in your masked_fill.",
    ),
    "mask_after_softmax": (
        "masked weights are set to 0 after the softmax, so rows no longer sum to 1",
        "look at where you apply the mask: before or after the softmax?",
    ),
    "mask_filled_with_zero": (
        "masked scores are set to 0 instead of −inf, so the softmax still gives the masked keys "
        "weight",
        "look at the value your masked_fill puts in: after the softmax, a masked key's weight "
        "must be exactly 0, and e⁰ = 1.",
    ),
    "keys_values_from_x": (
        "the keys and values come from x, not from the context (with the queries from x too, "
        "that is self-attention)",
        "look at what you project with w_k and w_v: in cross-attention they read the other "
        "sequence.",
    ),
    "queries_from_context": (
        "the queries come from the context, so there is one output row per context token",
        "look at what you project with w_q: the output has one row per query, and the queries "
        "come from x.",
    ),
    "w_qk_reversed": (
        "the scores come out transposed: W_QK is built as W^K·W^Qᵀ, so row a holds key a's "
        "scores instead of query a's",
        "look at the order in your W_QK: q·kᵀ = (x·W^Q)·(x·W^K)ᵀ, so the queries' matrix comes "
        "first.",
    ),
    "softmax_applied": (
        "the scores went through a softmax: these are the weights, not the scores",
        "this exercise stops before the softmax: return the scores, divided by √d_k.",
    ),
}


CONTEXT_MISTAKES = ("keys_values_from_x", "queries_from_context")  # need a context to differ


CIRCUIT_MISTAKES = ("w_qk_reversed", "softmax_applied")  # 17's exercise: scores from W_QK


# 18's exercise: a head's induction score from its maps
INDUCTION_MISTAKES = (
    "induction_on_the_twin",
    "induction_on_the_previous_token",
    "induction_with_a_first_half_query",
    "induction_summed",
)


# 15's exercise: attention with g K/V heads shared by h query heads
SHARED_KV_MISTAKES = ("kv_tiled", "causal_mask_added")


SLIPS: dict[str, tuple[str, str]] = {
    "mask_filled_with_a_finite_number": (
        "masked scores get a finite value instead of −inf, so the softmax still gives the "
        "masked keys some weight",
        "look at the value a masked score gets on this line: after the softmax a masked key's "
        "weight must be exactly 0.",
    ),
    "causal_mask_added": (
        "a causal mask is applied (each query sees only itself and the keys before it), where "
        "this exercise's attention has no mask",
        "look at what masks the scores on this line: the function is given no mask.",
    ),
    "kv_tiled": (
        "query head i reads K/V head i mod g, as when the K/V heads are repeated as one block: "
        "neighbouring query heads get different K/V heads, where each group of h / g neighbours "
        "should share one",
        "look at the line that makes one key block per query head: which K/V head does query "
        "head 1 get, and which should it get?",
    ),
    "induction_on_the_twin": (
        "the score reads each query's weight on the earlier occurrence of its own token "
        "(key t − n), not on the token that came after it (key t − n + 1): one key too early",
        "look at the key this line reads for query t: an induction head looks one past the "
        "earlier occurrence, at the token that followed it.",
    ),
    "induction_on_the_previous_token": (
        "the score reads every query's weight on the token just before it (key t − 1): that is "
        "the previous-token score, not the induction score",
        "look at the key this line reads for query t: how far back is the earlier occurrence "
        "of its token in a sequence of n tokens repeated?",
    ),
    "induction_with_a_first_half_query": (
        "the score also averages query n − 1, the last of the first half, where nothing has "
        "repeated yet (its key t − n + 1 is key 0)",
        "look at which queries this line keeps: only the second half's, t = n … 2n − 1, have "
        "an earlier occurrence.",
    ),
    "induction_summed": (
        "the weights are summed over the queries and sequences, not averaged: a score should "
        "be a share between 0 and 1",
        "look at how this line reduces the weights to one number per head.",
    ),
    "keys_from_w_q": (
        "the keys are made with w_q, not w_k",
        "look at the line that makes k: which of the weights does it multiply?",
    ),
    "values_from_w_k": (
        "the values are made with w_k, not w_v",
        "look at the line that makes v: which of the weights does it multiply?",
    ),
    "keys_values_swapped": (
        "the keys are made with w_v and the values with w_k: the two weights are swapped",
        "look at where k and v are made: which of the weights does each one multiply?",
    ),
    "scaled_after_softmax": (
        "the weights are divided by √d_k after the softmax, instead of the scores before it, so "
        "the rows sum to 1/√d_k",
        "look at where your division happens: before or after the softmax?",
    ),
    "multiplied_by_sqrt_d_k": (
        "the scores are multiplied by √d_k instead of divided by it",
        "look at your scaling: should it make the scores smaller or larger?",
    ),
    "softmax_over_heads": (
        "the softmax runs over the heads (dim 1 of (B, h, T, T)): the h heads' weights for a "
        "query and key sum to 1, not each query's row",
        "look at the dim of your softmax: which dim of the scores holds the keys?",
    ),
    "softmax_over_batch": (
        "the softmax runs over the batch (dim 0): the two sentences' weights for a query and key "
        "sum to 1, not each query's row",
        "look at the dim of your softmax: which dim of the scores holds the keys?",
    ),
    "queries_keys_swapped": (
        "the scores are k·qᵀ instead of q·kᵀ: row a holds how key a matches each query, so the "
        "softmax normalises the wrong thing",
        "look at the order of the product on this line: the rows of the scores are the queries.",
    ),
    "w_o_transposed": (
        "W^O is used the wrong way round (merged @ w_o): the merged features meet w_o's "
        "out_features, not its in_features",
        "w_o is stored as (out_features, in_features) like the other three: look at how you "
        "apply it.",
    ),
    "residual_added": (
        "x is added to the output: that is the residual connection of the block around "
        "attention, not part of attention",
        "look at where x is added: attention returns W^O's output alone; the block around it "
        "adds x.",
    ),
}


# where each mistake is made: the stage whose line the diagnosis shows (when the learner's code
# makes that stage; otherwise the first stage the mistake changes)
HOME: dict[str, str] = {
    **dict.fromkeys(
        (
            "no_scaling",
            "scaled_by_d_model",
            "scaled_by_d_k",
            "multiplied_by_sqrt_d_k",
            "queries_keys_swapped",
        ),
        "scores",
    ),  # fmt: skip
    **dict.fromkeys(
        (
            "softmax_over_queries",
            "softmax_over_heads",
            "softmax_over_batch",
            "scaled_after_softmax",
            "mask_ignored",
            "mask_after_softmax",
        ),
        "weights",
    ),  # fmt: skip
    **dict.fromkeys(("no_softmax", "keys_as_values"), "heads"),
    **dict.fromkeys(("mask_inverted", "mask_filled_with_zero"), "masked"),
    **dict.fromkeys(("weights_transposed", "queries_from_context"), "q"),
    **dict.fromkeys(("keys_from_w_q", "keys_values_from_x", "keys_values_swapped"), "k"),
    "values_from_w_k": "v",
    **dict.fromkeys(("heads_split_without_transpose", "heads_split_interleaved"), "q_heads"),
    "heads_merged_without_transpose": "merged",
    **dict.fromkeys(("w_o_missing", "w_o_transposed", "residual_added", "softmax_applied"), "out"),
    "w_qk_reversed": "w_qk",
    # 18's: the line that makes the positions read, when the code makes them as a tensor
    **dict.fromkeys(("induction_on_the_twin", "induction_on_the_previous_token"), "key_index"),
    "induction_with_a_first_half_query": "query_index",
    "induction_summed": "out",
    "kv_tiled": "kv_index",  # idx = torch.arange(h) % g; else the first block it makes
    "causal_mask_added": "masked",
}


# a slip with a number: "num_heads_4" = q, k, v cut into 4 heads, not into the num_heads given
WRONG_NUM_HEADS = "num_heads_"


def describe(
    name: str, cut: str = "q, k and v", only: tuple[str, ...] = (), right: tuple[str, ...] = ()
) -> tuple[str, str]:
    """(what it looks like, hint) for a catalogued mistake or a slip; `cut` says what is cut into
    heads ("q, k and v", or "t is" in 05's exercise); `only`: the ones of q, k and v a mistake
    made in all of them alike is made in, and `right` the ones the learner made right (("k",),
    ("q", "v"): only k is cut wrong)."""
    if only:
        cut = _listed(only) + (" is" if len(only) == 1 else " are")
    subject = cut.removesuffix(" is").removesuffix(" are")
    verb = cut if cut.endswith((" is", " are")) else f"{cut} are"
    if name.startswith(WRONG_NUM_HEADS):
        count = name.removeprefix(WRONG_NUM_HEADS)
        heads = "head" if count == "1" else "heads"
        what, hint = (
            f"{verb} cut into {count} {heads}, not into the num_heads the function is given",
            "look at the number of heads on this line: use the num_heads argument, not a number "
            "or an h left over from another cell.",
        )
    else:
        what, hint = MISTAKES[name] if name in MISTAKES else SLIPS[name]
    what = what.replace("q, k and v are", verb)
    hint = hint.replace("cut q, k, v", f"cut {subject}")
    if only:
        weights = [f"w_{n}" for n in only]
        what = what.replace(
            "w_q, w_k and w_v are", _listed(weights) + (" is" if len(weights) == 1 else " are")
        )
        one = len(weights) == 1
        hint = hint.replace("w_q, w_k and w_v: they are", f"{_listed(weights)}: it is" if one
                            else f"{_listed(weights)}: they are")  # fmt: skip
        hint = hint.replace("w_q, w_k and w_v", _listed(weights))
        what = what.replace("the weights' out_features", "the weight's out_features" if one
                            else "the weights' out_features")  # fmt: skip
        if one:
            what = what.replace("not their in_features", "not its in_features")
        if only == ("v",):
            hint = hint.replace("one key block", "one value block")
        if not re.search(rf"\b({subject}|{_listed(weights)})\b", what):
            what = f"in {subject}: {what}"
        if right:
            what += f" ({_listed(right)} {'is' if len(right) == 1 else 'are'} made right)"
    return what, hint


def _listed(names) -> str:
    """'q', 'k and v', 'q, k and v'."""
    names = list(names)
    return " and ".join([", ".join(names[:-1]), names[-1]]) if len(names) > 1 else names[0]


# what each stage is, for a learner: "your {words} differ from the reference's"
STAGE_WORDS: dict[str, str] = {
    "q": "queries q = x·W^Q",
    "k": "keys k = x·W^K",
    "v": "values v = x·W^V",
    "q_heads": "queries cut into heads",
    "k_heads": "keys cut into heads",
    "v_heads": "values cut into heads",
    "scores": "scores q·kᵀ/√d_k",
    "masked": "masked scores",
    "weights": "weights (the softmax of the scores)",
    "heads": "heads' outputs (weights·v)",
    "merged": "heads put back side by side",
    "out": "output",
    "w_qk": "W_QK",
    "xw": "x·W_QK",
    "query_index": "queries read (their positions)",
    "key_index": "keys read (one position per query)",
    "stripe": "weights read from the maps (one per head and query)",
    "kv_index": "K/V heads read (one per query head)",
}


# which earlier stages each stage is computed from: a matched stage vouches for these
DEPENDS: dict[str, tuple[str, ...]] = {
    "q_heads": ("q",),
    "k_heads": ("k", "kv_index"),
    "v_heads": ("v", "kv_index"),
    "scores": ("q_heads", "k_heads", "q", "k", "xw"),
    "masked": ("scores",),
    "weights": ("masked", "scores"),
    "heads": ("weights", "v_heads"),
    "merged": ("heads",),
    "out": ("merged", "weights", "scores", "heads", "q_heads", "stripe"),
    "xw": ("w_qk",),
    "stripe": ("query_index", "key_index"),
}


# how the stages are laid out: which other layouts of the same numbers a learner may make
KINDS: dict[str, str] = {
    **dict.fromkeys(("q", "k", "v", "merged", "xw"), "tokens"),  # (B, T, n)
    **dict.fromkeys(("q_heads", "k_heads", "v_heads", "heads"), "heads"),  # (B, h, T, d_k)
    **dict.fromkeys(("scores", "masked", "weights"), "maps"),  # (B, h, T, T)
    "out": "out",  # the returned value, exactly
    "w_qk": "matrix",
    **dict.fromkeys(("query_index", "key_index", "kv_index"), "index"),  # integer positions
    "stripe": "stripe",  # (B, h, queries)
}
