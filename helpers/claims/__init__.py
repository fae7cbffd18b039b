"""Checks behind the notebooks' ✓ lines that state more than an equality or a shape.

Each takes the objects a notebook made and prints ✓ lines naming exactly what it compared, or
raises AssertionError saying what came instead. One module per group of notebooks: `layers` (a
layer's layout and counts, shared K/V), `trained_heads` (11, 12, 13), `scaling` (02, 07),
`matrices` (05, 16, 17), `order` (positions), `induction` (18), `tiles` (20), `windows`
(21); `base` holds the ✗ they raise.
Notebooks import them from `helpers.claims` (18 calls them as `claims.check_…`).
`tests/test_claims*.py`, `tests/test_positions.py` and the ledger's wrong objects
(`tests/ledger/wrong_claims.py`) feed each one a wrong object (a biased layer, heads that share a
matrix, a head that projects twice, a head looking elsewhere, a missing scale, a "rotation" that
turns nothing, heads holding copies of a shared K/V) and show it fails.
Notebooks 08 and 14 check counts of what a call asks of PyTorch; those checks sit beside the
counting, in `helpers.timing`.
May import torch and helpers' math (`helpers.experiment`, `helpers.layouts`, `helpers.tiles`)
and `helpers.timing`'s counts: no plotting, no widgets.
"""

from helpers.claims.base import check_refused
from helpers.claims.induction import (
    check_cannot_copy,
    check_composition,
    check_copying,
    check_induction_heads,
    check_phase_change,
)
from helpers.claims.layers import (
    check_head_projects_once,
    check_kv_shared,
    check_layer_count,
    check_linear_layout,
    check_outputs_differ,
    check_parameter_count,
    check_separate_matrices,
)
from helpers.claims.matrices import (
    check_head_ranks,
    check_less_even,
    check_reach_all,
    check_reach_own,
    check_rows_are_tokens,
)
from helpers.claims.order import check_order_blind, check_order_seen, check_relative_scores
from helpers.claims.scaling import (
    check_default,
    check_dot_product_variance,
    check_dropout_rate,
    check_query_gradient,
    check_scaled_rows_flat,
    check_unscaled_saturates,
)
from helpers.claims.tiles import check_maps_formed, check_never_held, check_tiles_match
from helpers.claims.trained_heads import (
    check_anti_diagonal,
    check_head_patterns,
    check_heads_resting_on,
    check_two_heads_win,
    check_two_place_roles,
)
from helpers.claims.windows import (
    check_every_head_windowed,
    check_reach,
    check_renormalised,
    check_window_cache,
    check_window_rows,
)

__all__ = [
    "check_refused",
    "check_linear_layout",
    "check_separate_matrices",
    "check_head_projects_once",
    "check_parameter_count",
    "check_layer_count",
    "check_outputs_differ",
    "check_kv_shared",
    "check_two_heads_win",
    "check_two_place_roles",
    "check_head_patterns",
    "check_heads_resting_on",
    "check_anti_diagonal",
    "check_dot_product_variance",
    "check_scaled_rows_flat",
    "check_unscaled_saturates",
    "check_query_gradient",
    "check_dropout_rate",
    "check_default",
    "check_rows_are_tokens",
    "check_reach_all",
    "check_reach_own",
    "check_head_ranks",
    "check_less_even",
    "check_order_blind",
    "check_order_seen",
    "check_relative_scores",
    "check_copying",
    "check_cannot_copy",
    "check_induction_heads",
    "check_phase_change",
    "check_composition",
    "check_tiles_match",
    "check_never_held",
    "check_maps_formed",
    "check_window_rows",
    "check_every_head_windowed",
    "check_reach",
    "check_window_cache",
    "check_renormalised",
]
