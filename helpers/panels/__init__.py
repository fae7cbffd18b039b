"""The interactive panels of the notebooks: controls wired to `attention`, `checks` and a view.

Each panel is a `widgets.VBox`: its controls on top, then an `AttentionView` that draws the maps
in the browser with the live table beside them. The kernel computes every setting the controls
can reach next (all h at this d_model and the neighbouring d_model, every query, every layer and
head) with `helpers.attention` and its checks, and sends them ahead; the controls are jslinked to
the view, so a move shows its new maps in the next frame. Every table entry is measured on the
tensors just computed, not written from a formula. A setting that cannot work becomes a frame
that says why (the browser greys the last good one), never a traceback.

Tests drive a panel by setting `.value` on its controls and reading `.table`, `.message` and
`.maps` (what the browser is sent for the current setting).

One module per panel, named by what it shows (the notebook that builds it in brackets):
- `base`: what every panel shares: `_Panel`, the h and d_model sliders, tables, messages;
- `one_head` (01): one head's map: pick a query, see its scores, weights and output;
- `scaling` (02): softmax rows with and without the division by √d_k, against d_k;
- `heads` (03): h heads with their own matrices: every map and shape, for any h and d_model;
- `block_matrix` (04): the per-head blocks inside one d_model × d_model W^Q, for any h;
- `parameters` (04): heads of any width d_k, and the parameter count against h;
- `one_vs_many` (11): one wide head's map beside h heads' maps, from the same matrices;
- `real_heads` (12): MiniLM's heads on the learner's own text;
- `cross_attention` (13): T_q × T_k maps for any h and source length;
- `shared_kv` (15): query heads over fewer K/V heads: maps, parameters, the cache;
- `circuits` (17): each head's maps rebuilt from W_QK, and the ranks of W_QK;
- `induction` (18): a trained two-layer causal model's heads on a repeated sequence;
- `online` (19): one query's row through the online softmax, a block of keys at a time;
- `predict`: "predict, then run", a question the class answers before the cell that shows it.
"""

from helpers.panels.base import H_MAX, plural
from helpers.panels.block_matrix import BlockMatrixExplorer
from helpers.panels.circuits import CircuitsExplorer
from helpers.panels.cross_attention import TARGET, CrossAttentionExplorer
from helpers.panels.heads import HeadsExplorer
from helpers.panels.induction import InductionExplorer, TrainingView
from helpers.panels.one_head import QueryExplorer
from helpers.panels.one_vs_many import OneVsManyExplorer
from helpers.panels.online import OnlineSoftmaxExplorer
from helpers.panels.parameters import ParameterExplorer
from helpers.panels.predict import Predict
from helpers.panels.real_heads import RealHeadsExplorer
from helpers.panels.scaling import D_KS, ScalingExplorer
from helpers.panels.shared_kv import SharedKVExplorer

__all__ = [
    "QueryExplorer",
    "HeadsExplorer",
    "BlockMatrixExplorer",
    "OneVsManyExplorer",
    "ParameterExplorer",
    "RealHeadsExplorer",
    "CrossAttentionExplorer",
    "TARGET",
    "SharedKVExplorer",
    "ScalingExplorer",
    "D_KS",
    "CircuitsExplorer",
    "InductionExplorer",
    "OnlineSoftmaxExplorer",
    "TrainingView",
    "Predict",
    "H_MAX",
    "plural",
]
