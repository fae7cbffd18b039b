"""Tell a learner whether their attention code is right, and if not, what differs and on which line.

`diagnose(my_attention)` runs a learner's `my_attention(x, w_q, w_k, w_v, w_o, num_heads,
mask=None)` on fixed inputs, without and with a mask, and compares it with the reference.
`check_exercise(fn, name)` does the same for the smaller exercises of the notebooks. Both use one
engine, a pipeline of small modules:

1. The learner's function runs (`run`; again at other values and sizes, `again`) under
   `trace`, which records every tensor it makes and the line of their code that made it.
2. If the output differs, the engine (`explain`, with `compare` and `departures`) looks among
   those tensors for the reference's stages (`stages.attention_stages`: q, k, v, cut into
   heads, scores, masked scores, weights, the heads' outputs, merged, out), in any layout the
   course teaches: all heads at once, one head at a time in a loop, (B, T, h, d_k) before the
   transpose, kᵀ.
3. The first stage that no tensor matches (and no later matched stage vouches for) is where the
   code departs. The engine switches on each known mistake in turn (the catalogue, MISTAKES, and
   further SLIPS) and keeps the one that lets the most stages match; it then goes on from there to
   find a second departure downstream. A departure no known mistake explains is reported as such,
   at the first stage the learner made a tensor for (17's code never makes q), or where a head's
   slice is never made (head 0's matrices in every pass of a loop), or where a right tensor is
   used in another's place (w_k and w_v swapped) (`unexplained`, and `misused`: a step made
   right but used wrong, or whose result nothing keeps); the engine continues from the
   learner's own tensor, except in a call that goes on from a departure another call showed first.
   When it cannot tell the line, the message says so.
4. Each departure is reported with what differs, the learner's line (`locate`, `sources`,
   `scales`), and a hint that points at the line, not at the solution (`words`); an output of
   the wrong shape or type gets its own message (`shapes`).

Conventions (as everywhere in the course): x is (B, T, d_model); weights are plain tensors in
nn.Linear's (out_features, in_features) layout, so a projection is `x @ w_q.T`; mask is boolean,
True = may attend, broadcastable to (B, T, T). Never raises because of the learner's code: every
problem becomes the message. Only the output alone can get a ✓: a learner who returns a tuple or a
list, e.g. (out, weights) or (out, {stage: tensor}), is told so, and its first item is diagnosed
(the stages of a dict are searched too). The sizes each exercise's check uses are CHECK_SIZES, in
words check_sizes(name); a function that reads integers from outside it (a notebook's h = 4) is
told which, with those sizes. A function right at those sizes is run once more at a second set,
SECOND_CHECK_SIZES (B = 1, T = 3, d_model = 16, 2 heads of d_k = 8; 13's T_k = 4): the ✓ says it
was checked at both; code right only at the first (view(2, 5, 3, 4), / 2 for √d_k) is told so,
with the numbers written in it that equal a size of the first.
"""

from helpers.checker.compare import ATOL, Diagnosis, Finding, reference_attention
from helpers.checker.exercises import EXERCISE_OUT, EXERCISES, check_exercise, diagnose
from helpers.checker.mistakes import CIRCUIT_MISTAKES, CONTEXT_MISTAKES, MISTAKES, SLIPS
from helpers.checker.sizes import CHECK_SIZES, SECOND_CHECK_SIZES, check_sizes

__all__ = [
    "ATOL",
    "CHECK_SIZES",
    "CIRCUIT_MISTAKES",
    "CONTEXT_MISTAKES",
    "EXERCISES",
    "EXERCISE_OUT",
    "MISTAKES",
    "SECOND_CHECK_SIZES",
    "SLIPS",
    "Diagnosis",
    "Finding",
    "check_exercise",
    "check_sizes",
    "diagnose",
    "reference_attention",
]
