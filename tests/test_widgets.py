"""helpers.panels: move a control, assert what the panel sends the browser; impossible settings
explain; every setting a control reaches next is already there."""

import copy

import pytest
import torch

from helpers.examples import embed, seeded_attention, tokens
from helpers.panels import (
    D_KS,
    BlockMatrixExplorer,
    CircuitsExplorer,
    CrossAttentionExplorer,
    HeadsExplorer,
    OneVsManyExplorer,
    ParameterExplorer,
    QueryExplorer,
    ScalingExplorer,
    SharedKVExplorer,
    plural,
)


def test_heads_explorer_follows_h_with_maps_and_shapes():
    panel = HeadsExplorer(h=4, d_model=64)
    assert panel.maps.shape == (4, 7, 7)
    assert "(1, 7, 64)" in panel.table and "(64, 16)" in panel.table
    assert "matrices: 3h + 1 = 13" in panel.table
    assert "parameters: 3·h·d_model·d_k + d_model² = 16,384" in panel.table
    panel.h_slider.value = 8
    assert panel.maps.shape == (8, 7, 7)
    assert "(64, 8)" in panel.table  # each W_i is d_model x d_k = 64 x 8
    assert "(1, 8, 7, 7)" in panel.table  # weights (B, h, T, T)
    assert "matrices: 3h + 1 = 25" in panel.table and "16,384" in panel.table
    assert "✗" not in panel.table
    assert "✓ step by step = PerHeadMultiHeadAttention: equal within atol" in panel.table
    assert panel.message == "8 heads of d_k = 64 / 8 = 8: 8 softmaxes, 8 attention maps"


def test_the_maps_sent_are_the_modules_own_weights_bit_for_bit():
    panel = HeadsExplorer(h=4, d_model=64)
    x = embed(tokens(), 64)
    for h in (1, 2, 4, 8, 16):
        panel.h_slider.value = h
        with torch.no_grad():
            _, weights = seeded_attention(64, h, per_head=True)(x)  # (B, h, T, T)
        assert torch.equal(panel.maps, weights[0]), h
        torch.testing.assert_close(panel.maps.sum(-1), torch.ones(h, 7), atol=1e-5, rtol=0)


def test_every_h_and_the_neighbouring_d_model_are_sent_ahead():
    panel = HeadsExplorer(h=4, d_model=64)
    sent = panel.view.sent
    for d_model in (48, 56, 64, 72, 80):
        for h in range(1, 17):
            assert f"d_model={d_model}|h={h}" in sent
    assert "d_model=88|h=4" not in sent
    panel.d_model_slider.value = 72  # one step: the kernel prefetches two further
    assert {"d_model=88|h=4", "d_model=64|h=4"} <= panel.view.sent
    panel.d_model_slider.value = 512  # a jump: computed at once, then its neighbours
    assert {"d_model=512|h=16", "d_model=496|h=16"} <= panel.view.sent
    assert "d_model=64|h=4" not in panel.view.sent  # far settings are dropped
    assert panel.maps.shape == (4, 7, 7) and "(512, 128)" in panel.table


def test_the_first_frames_are_one_buffer_of_float32_with_offsets_in_the_traits():
    panel = HeadsExplorer(h=4, d_model=64)
    view = panel.view
    frame = view.frames["d_model=64|h=8"]
    block = view.blocks[frame["block"]]
    assert (block["h"], block["rows"], block["titles"][7]) == (8, tokens(), "head 7")
    data = torch.frombuffer(bytearray(view.buffer), dtype=torch.float32)
    start, n = block["offset"], 8 * 7 * 7
    torch.testing.assert_close(data[start : start + n].view(8, 7, 7), view.maps("d_model=64|h=8"))
    assert len(view.buffer) == 4 * sum(b["h"] * len(b["rows"]) ** 2 for b in view.blocks.values())


def test_a_step_sends_only_the_frames_it_adds_and_drops(monkeypatch):
    panel = HeadsExplorer(h=4, d_model=64)
    messages = []
    monkeypatch.setattr(panel.view, "send", lambda content, buffers=None: messages.append(
        (content, buffers)))  # fmt: skip
    before = panel.view.sent
    panel.d_model_slider.value = 72
    (delta, buffers), *rest = messages
    assert not rest and delta["type"] == "delta" and not delta["reset"]
    assert (
        set(delta["frames"])
        == panel.view.sent - before
        == {f"d_model=88|h={h}" for h in range(1, 17)}
    )
    assert delta["drop_frames"] == []  # within four steps: kept
    data = torch.frombuffer(bytearray(buffers[0]), dtype=torch.float32)
    assert "88 is not divisible by h = 3" in delta["frames"]["d_model=88|h=3"]["error"]
    for key in ("d_model=88|h=8", "d_model=88|h=11"):  # 88 = 8 · 11
        meta = delta["blocks"][delta["frames"][key]["block"]]
        sent = data[meta["offset"] : meta["offset"] + meta["size"]].view(meta["h"], 7, 7)
        assert torch.equal(sent, panel.view.maps(key))
    panel.d_model_slider.value = 128  # eight steps on: the far frames are dropped
    assert "d_model=64|h=4" in messages[-1][0]["drop_frames"]
    panel.view._on_message(panel.view, {"type": "snapshot"}, [])  # a view rendered late
    assert messages[-1][0]["reset"] and set(messages[-1][0]["frames"]) == panel.view.sent


def test_heads_explorer_impossible_combination_says_why_and_recovers():
    panel = HeadsExplorer(h=4, d_model=64)
    panel.every_h.value = True  # every h stops, with the ✗ for the impossible ones
    panel.h_slider.value = 3
    message = panel.message
    assert message == (
        "d_model = 64 is not divisible by h = 3: each head would get d_k = 64/3 = 21.33 "
        "features. h that work here: 1, 2, 4, 8, 16."
    )  # only the h the slider reaches
    assert panel.current.block is None  # the browser greys the last good frame
    panel.d_model_slider.value = 96  # 96 / 3 = 32: works again
    assert panel.current.error is None and "(1, 3, 7, 7)" in panel.table


def test_singular_and_plural():
    assert (plural(1, "head"), plural(2, "head"), plural(1, "softmax"), plural(3, "softmax")) == (
        "1 head", "2 heads", "1 softmax", "3 softmaxes",
    )  # fmt: skip
    panel = HeadsExplorer(h=1, d_model=64)
    assert panel.message == "1 head of d_k = 64 / 1 = 64: 1 softmax, 1 attention map"
    assert "heads" not in panel.table.split("</table>")[1].split("matrices")[0]


def test_unexpected_errors_become_a_message_not_a_traceback(monkeypatch):
    panel = HeadsExplorer()

    def broken(**setting):
        raise RuntimeError("boom")

    monkeypatch.setattr(panel, "_frame", broken)
    panel.d_model_slider.value = 200  # a setting not sent ahead
    assert panel.message == "Unexpected RuntimeError: boom"
    monkeypatch.undo()

    def failing_publish(keep=None, full=False):
        raise MemoryError("transient")

    publish = panel.view.publish
    panel.view.publish = failing_publish
    panel.d_model_slider.value = 400
    assert panel.message == "Unexpected MemoryError: transient"
    panel.view.publish = publish
    panel.d_model_slider.value = 408  # it works again: the notice goes
    assert panel.message.startswith("4 heads of d_k = 408 / 4 = 102")


@pytest.mark.parametrize(
    ("Panel", "what"),
    [
        (QueryExplorer, "the query panel"),
        (HeadsExplorer, "the h and d_model panel"),
        (OneVsManyExplorer, "the one-head-vs-h-heads panel"),
        (ParameterExplorer, "the h and d_k panel"),
        (BlockMatrixExplorer, "the block-matrix panel"),
        (CrossAttentionExplorer, "the cross-attention panel"),
        (SharedKVExplorer, "the shared K/V panel"),
        (ScalingExplorer, "the √d_k panel"),
        (CircuitsExplorer, "the W_QK and W_OV panel"),
    ],
)
def test_before_the_notebook_runs_a_panel_is_one_friendly_line(Panel, what):
    panel = Panel()
    text = panel._repr_mimebundle_()["text/plain"]
    assert text == f"▶ {what}: drawn here once this cell runs, in the notebook or its slideshow"
    assert len(text) <= 110  # ipywidgets cuts a longer repr with "…"


def test_block_matrix_explorer_cuts_one_matrix_and_checks_live():
    panel = BlockMatrixExplorer(h=4, d_model=32)
    for line in ("[W_0 … W_h-1] = W^Q", "x·W^Q = [x·W_0 … x·W_h-1]", "out: fused = per-head"):
        assert f"✓ {line}: equal within atol 1e-05" in panel.table
    assert "parameters: per-head 4,096, fused 4,096" in panel.table
    w_q = seeded_attention(32, 4).w_q.weight.T.detach()  # (d_model, d_model), x·W layout
    assert torch.equal(panel.maps, w_q) and panel.current.bands == 4
    panel.h_slider.value = 8
    assert torch.equal(panel.maps, w_q) and panel.current.bands == 8  # same numbers, new cut
    assert panel.current.block == panel.view.frame("d_model=32|h=4").block  # sent once
    assert "(32, 4)" in panel.table and "✓ all 8 maps: fused = per-head" in panel.table
    assert panel.message == "W^Q cut into h = 8 blocks of d_k = 4 columns"
    panel.every_h.value = True  # every h stops, with the ✗ for the impossible ones
    panel.h_slider.value = 5
    assert panel.message.endswith("h that work here: 1, 2, 4, 8, 16.")
    assert panel.current.block is None  # the browser greys the last good frame
    panel.h_slider.value = 1
    assert panel.message == "W^Q cut into h = 1 block of d_k = 32 columns"
    assert "✓ the map: fused = per-head" in panel.table


def test_query_explorer_follows_the_chosen_token():
    panel = QueryExplorer()
    assert "query 2 ('sat')" in panel.table
    assert {f"query={t}" for t in range(7)} <= panel.view.sent  # every query sent ahead
    panel.query.value = 4
    assert panel.view.key(**panel.setting) == "query=4"
    assert "query 4 ('a')" in panel.table
    assert "✓ out[4] = Σ_j weights[4, j] · v_j: equal within atol 1e-05" in panel.table
    weights = panel.maps[0, 4]  # the one head's row for 'a'
    for w in weights.tolist():  # the breakdown prints the same weights the map shows
        assert f">{w:.2f}</text>" in panel.table
    assert panel.maps.shape == (1, 7, 7)


def test_one_vs_many_explorer_shows_one_map_beside_h_and_checks_the_score_identity():
    panel = OneVsManyExplorer(h=4, d_model=48)
    assert panel.maps.shape == (5, 7, 7)
    assert "✓ one score = Σ_i head-i score / √h: equal within atol 1e-05" in panel.table
    assert "✓ the same W^Q" in panel.table and "parameters: 9,216 both" in panel.table
    panel.h_slider.value = 1  # one head either way: the outputs are identical
    assert "max |out_one − out_1| = 0" in panel.table
    assert "scores, ONE head<" in panel.table and "scores, h = 1<" in panel.table
    assert "1 heads" not in panel.table + panel.message
    assert torch.equal(panel.maps[0], panel.maps[1])
    panel.h_slider.value = 8
    assert panel.maps.shape == (9, 7, 7) and "(1, 8, 7, 7)" in panel.table
    gap = float(panel.table.split("max |out_one − out_8| = ")[1].split("<")[0])
    assert gap > 0.1
    panel.every_h.value = True  # every h stops, with the ✗ for the impossible ones
    panel.h_slider.value = 5
    assert panel.message.endswith("h that work here: 1, 2, 3, 4, 6, 8, 12, 16.")


def test_parameter_explorer_follows_h_and_d_k():
    panel = ParameterExplorer(h=4, d_k=16, d_model=64)
    assert "h·d_k = 4·16 = 64 = d_model" in panel.table
    assert "parameters: 4·h·d_k·d_model = 16,384" in panel.table
    assert panel.table.count("<polyline") == 2 and panel.maps.shape == (4, 7, 7)
    panel.h_slider.value = 8
    assert "h·d_k = 8·16 = 128 ≠ d_model = 64" in panel.table
    assert "32,768" in panel.table and "(128, 64)" in panel.table  # W^O (x·W)
    panel.d_k_slider.value = 3
    assert "(24, 64)" in panel.table and "6,144" in panel.table  # 4·8·3·64
    assert "✗" not in panel.message + panel.table
    assert panel.maps.shape == (8, 7, 7)


def test_cross_attention_explorer_draws_t_q_by_t_k_maps_of_the_module():
    from helpers.panels import TARGET

    panel = CrossAttentionExplorer(h=4, d_model=32)
    source, target = tokens(), tokens(TARGET)
    x, context = embed(target, 32, seed=1), embed(source, 32, seed=0)
    for t_k, h in ((7, 4), (3, 4), (3, 8), (1, 16)):
        panel.t_k_slider.value, panel.h_slider.value = t_k, h
        with torch.no_grad():
            _, weights = seeded_attention(32, h)(x, context=context[:, :t_k])
        assert torch.equal(panel.maps, weights[0]), (t_k, h)  # (h, T_q = 4, T_k)
        assert panel.maps.shape == (h, 4, t_k)
        assert f"<td>weights</td><td>(1, {h}, 4, {t_k})</td>" in panel.table
        assert "<td>out</td><td>(1, 4, 32)</td>" in panel.table  # one row per query, always
        assert (
            "✗" not in panel.table and f"✓ each row, over the {plural(t_k, 'key')}" in panel.table
        )
    assert panel.message == "16 maps of 4 queries × 1 key"
    assert {"t_k=1|h=5", "t_k=2|h=16", "t_k=3|h=1"} <= panel.view.sent  # sent ahead


def test_cross_attention_explorer_explains_an_impossible_h():
    panel = CrossAttentionExplorer(h=4, d_model=32)
    panel.every_h.value = True  # every h stops, with the ✗ for the impossible ones
    panel.h_slider.value = 5
    assert panel.message.startswith("d_model = 32 is not divisible by h = 5")
    assert panel.message.endswith("h that work here: 1, 2, 4, 8, 16.")
    panel.h_slider.value = 8
    assert panel.message == "8 maps of 4 queries × 7 keys"


def test_shared_kv_explorer_goes_from_mha_to_mqa_with_measured_cache_and_checks():
    from helpers.figures.palette import HEAD_COLOURS
    from helpers.layouts import share_kv

    panel = SharedKVExplorer(h=8, d_model=64)
    x, causal = embed(tokens(), 64), torch.ones(7, 7, dtype=torch.bool).tril()
    options = [label for label, _ in panel.kv_buttons.options]
    assert options == ["8 · MHA", "4 · GQA", "2 · GQA", "1 · MQA"]
    for index, (g, params) in enumerate([(8, 16_384), (4, 12_288), (2, 10_240), (1, 9_216)]):
        panel.kv_buttons.value = index
        with torch.no_grad():
            _, weights = share_kv(seeded_attention(64, 8), g)(x, causal)
        assert torch.equal(panel.maps, weights[0]), g
        assert panel.maps[0].triu(1).abs().max() == 0  # causal
        cache_bytes = 2 * g * 8 * 7 * 4
        assert f"parameters: {params:,} (MHA: 16,384)" in panel.table
        assert f"KV cache after 7 tokens: {cache_bytes:,} bytes = 2·{g}·8·7·4" in panel.table
        assert f"<td>cached k, v</td><td>(1, {g}, 7, 8)</td>" in panel.table
        assert "✗" not in panel.table
        assert "✓ token by token with the cache = all at once" in panel.table
        assert "✓ all maps = expand_kv's" in panel.table
        meta, _ = panel.view._blocks[panel.current.block]
        group = 8 // g
        assert meta["colours"] == [HEAD_COLOURS[i // group] for i in range(8)]  # one per group
        assert meta["titles"][-1] == f"Q7 · K/V {g - 1}"
        assert panel.table.count("<rect") == 8 + g  # the grouping: 8 query boxes, g K/V boxes
    assert "(1/8 of MHA's 3,584)" in panel.table
    assert panel.message == "8 query heads share 1 K/V head: one colour per K/V head"


def test_scaling_explorer_shows_the_same_rows_scaled_and_unscaled_for_every_d_k():
    panel = ScalingExplorer(d_k=64)
    assert [label for label, _ in panel.d_k_slider.options] == [str(d) for d in D_KS]
    assert {f"choice={i}" for i in range(len(D_KS))} <= panel.view.sent  # all sent ahead
    peaks = []
    for index, d_k in enumerate(D_KS):
        panel.d_k_slider.value = index
        scores = panel.q[:, :d_k] @ panel.k[:, :d_k].T  # (6, 16): the first d_k features
        expected = torch.stack([(scores / d_k**0.5).softmax(-1), scores.softmax(-1)]).float()
        assert panel.maps.shape == (2, 6, 16)
        torch.testing.assert_close(panel.maps, expected, atol=1e-6, rtol=0)
        assert "✗" not in panel.table and "within 1e-10" in panel.table
        assert f"d_k = {d_k} within" in panel.table  # var(q·k) = d_k, measured
        peaks.append(panel.maps.amax(-1).mean(-1))  # (2,): scaled, unscaled
        assert panel.message == (
            f"d_k = {d_k}, the 6 rows shown: largest weight {peaks[-1][0]:.2f} scaled, "
            f"{peaks[-1][1]:.2f} unscaled (the table's: over 2,000 rows)"
        )
    assert peaks[-1][1] > 0.85 > 0.4 > peaks[-1][0]  # unscaled rows near one-hot at 256
    assert abs(peaks[0][0] - peaks[-1][0]) < 0.1  # scaled rows alike at 4 and at 256
    assert "<td>entropy (nats)</td>" in panel.table


def test_scaling_explorer_takes_only_the_widths_it_offers():
    with pytest.raises(ValueError, match=r"d_k must be one of \(4, 8, 16, 32, 64, 128, 256\)"):
        ScalingExplorer(d_k=48)


def test_a_selection_control_needs_index_values():
    import ipywidgets as widgets

    from helpers.panels.base import _Panel
    from helpers.panels.view import AttentionView

    slider = widgets.SelectionSlider(options=[("4", 4), ("8", 8)], value=4)
    with pytest.raises(ValueError, match=r"the choice options need the values 0 .. n-1"):
        _Panel({"choice": slider}, AttentionView(key_by=["choice"]))


def test_circuits_explorer_rebuilds_the_maps_from_w_qk_and_counts_ranks():
    from helpers.layouts import head_circuits

    panel = CircuitsExplorer(h=4, d_model=32)
    x = embed(tokens(), 32)
    for h, d_model in [(4, 32), (8, 32), (16, 32), (1, 32), (4, 64), (4, 128), (1, 128)]:
        panel.h_slider.value, panel.d_model_slider.value = h, d_model
        d_k = d_model // h
        mha = seeded_attention(d_model, h)
        with torch.no_grad():
            _, weights = mha(embed(tokens(), d_model))
        torch.testing.assert_close(panel.maps, weights[0], atol=1e-5, rtol=0)
        w_qk, _ = head_circuits(copy.deepcopy(mha).double())  # float32 drops one at (1, 128)
        assert torch.linalg.matrix_rank(w_qk).tolist() == [d_k] * h
        assert f"rank of each W_QK,i: {d_k}; of each W_OV,i: {d_k} (d_k = {d_k})" in panel.table
        assert (
            f"total over the {plural(h, 'head')}: {d_model} (h · d_k = {d_model}); "
            f"one head of width {d_model}: {d_model}" in panel.table
        )
        assert "✓ maps from softmax(x·W_QK·xᵀ/√d_k) = module's" in panel.table
        assert "✓ out = Σ_i weights_i · x · W_OV,i" in panel.table and "✗" not in panel.table
        assert panel.table.count("<rect") == h + 1  # one bar per head, one for the wide head
        assert panel.message == f"{plural(h, 'head')}, each W_QK,i of rank {d_k}"
    assert x.shape == (1, 7, 32)
    panel.every_h.value = True  # every h stops, with the ✗ for the impossible ones
    panel.h_slider.value = 5
    assert panel.message.startswith("d_model = 128 is not divisible by h = 5")
    assert panel.current.block is None


def test_by_default_h_steps_over_the_values_that_cannot_work():
    """The default: every press of the h slider changes the maps. A move to an h that does not
    divide d_model goes on the way it moved (4 → 5 goes to 8 at d_model = 64, 8 → 7 to 4); a new
    d_model that h does not divide takes h to the nearest that does. The every-h switch lets h
    stop anywhere, with the ✗ (the wrong object: a panel that stops at 5 with the switch off)."""
    panel = HeadsExplorer(h=4, d_model=64)
    assert not panel.every_h.value and panel.view.h_stops["64"] == [1, 2, 4, 8, 16]
    assert panel.view.h_stops["96"] == [1, 2, 3, 4, 6, 8, 12, 16]
    panel.h_slider.value = 5
    assert panel.h_slider.value == 8 and panel.message.startswith("8 heads of d_k = 64 / 8 = 8")
    panel.h_slider.value = 7
    assert panel.h_slider.value == 4
    panel.d_model_slider.value = 72  # 4 divides 72: h stays
    assert panel.h_slider.value == 4
    panel.h_slider.value = 12
    panel.d_model_slider.value = 80  # 12 does not divide 80: the nearest that does, 10
    assert panel.h_slider.value == 10
    panel.every_h.value = True
    panel.h_slider.value = 3
    assert panel.h_slider.value == 3 and "is not divisible by h = 3" in panel.message
    panel.every_h.value = False  # switched off on an impossible h: to the nearest that works
    assert panel.h_slider.value == 2 or panel.h_slider.value == 4


def test_the_browser_and_the_kernel_step_h_by_the_same_rule():
    from helpers.panels.base import _working_h
    from helpers.panels.view import view_script

    stops = [1, 2, 4, 8, 16]
    assert [_working_h(stops, 5, 4), _working_h(stops, 7, 8), _working_h(stops, 6)] == [8, 4, 8]
    assert [_working_h(stops, 3), _working_h(stops, 16, 15), _working_h([], 5, 4)] == [4, 16, 5]
    js = view_script()
    assert "function workingH(stops, h, previous)" in js
