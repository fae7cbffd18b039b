"""helpers.figures.plots: fixed 0..1 colour scale and words on the axes; the panels' colour
table."""

import matplotlib
import pytest
import torch

from helpers.figures import plots, render

WORDS = "the cat sat on a warm mat".split()


def test_attention_maps_use_one_fixed_scale_and_the_words():
    fig = plots.attention_map(torch.full((7, 7), 1 / 7), WORDS, "one head")
    ax = fig.axes[0]
    assert ax.get_images()[0].get_clim() == (0.0, 1.0)
    assert [t.get_text() for t in ax.get_xticklabels()] == WORDS
    assert [t.get_text() for t in ax.get_yticklabels()] == WORDS
    assert len(fig.axes) == 2  # the map and its colour bar
    mosaic = plots.heads_mosaic(torch.rand(3, 7, 7), WORDS, "three")
    assert mosaic.axes[0].get_images()[0].get_clim() == (0.0, 1.0)
    titles = [t.get_text() for t in mosaic.axes[0].texts]
    assert titles == ["head 0", "head 1", "head 2"]


def test_block_matrix_draws_one_block_per_head():
    fig = plots.block_matrix(torch.randn(32, 32), h=8)
    ax = fig.axes[0]
    assert len(ax.patches) == 8
    boundaries = sorted({line.get_xdata()[0] for line in ax.lines})
    assert boundaries == [4 * i - 0.5 for i in range(9)]
    assert [t.get_text() for t in ax.texts] == [f"$W_{{{i}}}^{{Q}}$" for i in range(8)]  # W_i^Q
    assert render._alt(fig).startswith("W^Q as x·W (32 × 32)")  # read without the $


def test_qkv_layouts_draws_three_pieces_at_one_scale():
    fig = plots.qkv_layouts(torch.randn(96, 32), h=4, head=1)
    shapes = [ax.get_images()[0].get_array().shape for ax in fig.axes]
    assert shapes == [(96, 32), (32, 32), (8, 32)]  # qkv weight, W^Q rows, head 1's W_1^Q
    assert {ax.get_ylim() for ax in fig.axes} == {(95.5, -0.5)}  # one vertical scale
    assert len(fig.axes[0].patches) == 12  # 3 bands (Q, K, V) x 4 heads


def test_masks_and_maps_pairs_each_mask_with_its_map():
    causal = torch.ones(7, 7, dtype=torch.bool).tril()
    fig = plots.masks_and_maps({"causal": causal}, {"causal": torch.eye(7)}, WORDS)
    images = [ax.get_images()[0] for ax in fig.axes[:2]]
    assert images[1].get_clim() == (0.0, 1.0)
    assert (images[0].get_array() == causal.numpy()).all()


def test_masks_and_maps_labels_each_mask_with_its_own_words():
    causal = torch.ones(7, 7, dtype=torch.bool).tril()
    padding = (torch.arange(7) < 5).expand(7, 7)
    padded = WORDS[:5] + ["<pad>", "<pad>"]
    masks = {"causal": causal, "padding": padding}
    labels = {"causal": WORDS, "padding": padded}
    fig = plots.masks_and_maps(masks, {n: torch.eye(7) for n in masks}, labels)
    top_causal, top_padding = fig.axes[0], fig.axes[1]
    assert [t.get_text() for t in top_causal.get_xticklabels()] == WORDS
    assert [t.get_text() for t in top_padding.get_yticklabels()] == padded


def test_loss_curves_one_line_per_run_on_a_log_scale():
    fig = plots.loss_curves({"1 head": [1.0, 0.5], "2 heads": [1.0, 0.1]}, "t")
    ax = fig.axes[0]
    assert ax.get_yscale() == "log"
    assert [line.get_label() for line in ax.lines] == ["1 head", "2 heads"]


def test_timings_draw_the_spread_as_a_band_around_each_line():
    spread = {"loop": [(2.5, 3.5), (3.5, 4.5), (8.0, 10.0)]}
    fig = plots.timings([1, 2, 4], {"loop": [3.0, 4.0, 9.0]}, "t", spread=spread)
    (band,) = fig.axes[0].collections
    ys = band.get_paths()[0].vertices[:, 1]
    assert ys.min() == 2.5 and ys.max() == 10.0


def test_timings_one_line_per_method_against_h():
    fig = plots.timings([1, 2, 4], {"loop": [3.0, 4.0, 9.0], "fused": [3.0, 3.0, 3.5]}, "t")
    ax = fig.axes[0]
    assert [line.get_label() for line in ax.lines] == ["loop", "fused"]
    assert list(ax.lines[0].get_xdata()) == [1, 2, 4] and ax.get_xscale() == "log"


def test_the_panels_colour_table_is_the_figures_colour_map():
    table = plots.colormap_table()
    viridis = matplotlib.colormaps[plots.ATTENTION_CMAP]
    assert len(table) == 256 and all(len(c) == 7 and c[0] == "#" for c in table)
    for w in (0.0, 0.25, 1.0):  # weight w is entry round(255 w), as the browser reads it
        r, g, b, _ = viridis(w, bytes=True)
        assert table[round(255 * w)] == f"#{r:02x}{g:02x}{b:02x}"


def test_heads_mosaic_draws_rectangular_maps_with_query_and_key_words():
    keys = ["a", "b", "c", "d", "e"]
    fig = plots.heads_mosaic(torch.rand(2, 3, 5), ["x", "y", "z"], "cross", keys=keys)
    ax = fig.axes[0]
    assert ax.get_images()[0].get_array().shape == (3, 11)  # two 3 x 5 tiles, a gap of 1
    assert [t.get_text() for t in ax.get_xticklabels()] == keys * 2
    assert [t.get_text() for t in ax.get_yticklabels()] == ["x", "y", "z"]


def test_heads_mosaic_marks_the_cells_it_is_given():
    maps = torch.rand(3, 4, 4)
    maps[1, 0, 2] = maps[2, 3, 1] = maps[2, 1, 1] = 0  # three dropped weights
    fig = plots.heads_mosaic(maps, ["a", "b", "c", "d"], "dropout", cols=3, marks=maps == 0)
    crosses = [t.get_position() for t in fig.axes[0].texts if t.get_text() == "×"]
    assert sorted(crosses) == [(5 + 2, 0), (10 + 1, 1), (10 + 1, 3)]  # tile i at x = i · (4 + 1)
    with pytest.raises(ValueError, match=r"marks of the maps' shape \(3, 4, 4\); got \(4, 4\)"):
        plots.heads_mosaic(maps, ["a", "b", "c", "d"], "dropout", marks=maps[0] == 0)


def test_timings_name_any_x_axis():
    fig = plots.timings([32, 64], {"cache": [1.0, 1.0]}, "t", xlabel="tokens so far T")
    assert fig.axes[0].get_xlabel() == "tokens so far T"


def test_block_matrix_cuts_w_o_by_rows():
    fig = plots.block_matrix(torch.randn(32, 32), h=4, name="W^O", cut="rows")
    ax = fig.axes[0]
    assert len(ax.patches) == 4
    boundaries = sorted({line.get_ydata()[0] for line in ax.lines})
    assert boundaries == [8 * i - 0.5 for i in range(5)]  # horizontal: 4 blocks of d_k rows
    assert [t.get_text() for t in ax.texts] == [f"head {i}" for i in range(4)]
    with pytest.raises(ValueError, match='block_matrix cuts "columns" or "rows"; got'):
        plots.block_matrix(torch.randn(8, 8), h=2, cut="diagonal")


def test_saturation_draws_each_measure_against_d_k_scaled_and_not():
    d_ks = [4, 16, 64]
    values = {"max_weight": [0.2, 0.3, 0.4], "entropy": [2.0, 1.0, 0.5], "grad_norm": [0.3] * 3}
    fig = plots.saturation(d_ks, {"scaled": values, "unscaled": values}, T=16)
    assert [ax.get_title() for ax in fig.axes] == [
        "largest weight in a row", "row entropy (nats)", "gradient norm into the scores"
    ]  # fmt: skip
    for ax in fig.axes:
        assert len([line for line in ax.lines if line.get_marker() == "o"]) == 2
        assert [t.get_text() for t in ax.get_xticklabels()] == ["4", "16", "64"]


def test_head_cut_draws_every_number_once_per_picture_coloured_by_its_token():
    T, d_model, h = 7, 16, 4
    source = torch.arange(T).float()[:, None].expand(T, d_model)
    cut = source.reshape(h, T, d_model // h)
    fig = plots.head_cut(source, {"a": cut, "b": cut}, WORDS)
    ax = fig.axes[0]
    assert len(ax.patches) == 3 * T * d_model  # q, then each cut: every number once
    fills = {p.get_facecolor() for p in ax.patches}
    assert len(fills) == T  # one colour per token
    texts = [t.get_text() for t in ax.texts]
    assert texts.count("head 0") == 3 and "6: mat" in texts  # over q's columns and each cut
    assert len(ax.lines) == h  # q's columns: one coloured bar per head's d_k features


def test_head_reach_one_panel_per_way_heads_by_features():
    fig = plots.head_reach({"with": torch.rand(4, 32), "without": torch.rand(4, 32)}, d_k=8)
    images = [ax.get_images()[0] for ax in fig.axes if ax.get_images() and ax.get_title()]
    assert [im.get_array().shape for im in images] == [(4, 32), (4, 32)]


def _inks(fig) -> list[tuple[str, str]]:
    """Every head-coloured text and line of a figure: ("text" | "line", '#rrggbb')."""
    from matplotlib.colors import to_hex

    found = []
    for ax in fig.axes:
        texts = [*ax.texts, *ax.get_xticklabels(), *ax.get_yticklabels()]
        found += [("text", to_hex(t.get_color())) for t in texts if t.get_text()]
        found += [("line", to_hex(line.get_color())) for line in ax.lines]
    return found


def _figures_with_head_colours():
    T, d_model, h = 7, 16, 8
    source = torch.arange(T).float()[:, None].expand(T, d_model)
    cut = source.reshape(h, T, d_model // h)
    values = {"max_weight": [0.2, 0.3], "entropy": [2.0, 1.0], "grad_norm": [0.3, 0.2]}
    eight = {f"run {i}": [1.0, 0.5] for i in range(8)}
    return {
        "block_matrix": plots.block_matrix(torch.randn(32, 32), h=8),
        "block_matrix rows": plots.block_matrix(torch.randn(32, 32), h=8, name="W^O", cut="rows"),
        "parameter_counts": plots.parameter_counts({"a": ([1, 2], [3, 4]), "b": ([2], [5])}, "t"),
        "loss_curves": plots.loss_curves(eight, "t"),
        "copy_curves": plots.copy_curves([3.5] * 60, [3.0] * 60, 3.47, 60),
        "timings": plots.timings([1, 2], eight, "t"),
        "saturation": plots.saturation([4, 16], {n: values for n in ("a", "b")}, T=16),
        "head_cut": plots.head_cut(source, {"a": cut}, WORDS),
        "head_reach": plots.head_reach({"with": torch.rand(8, 32)}, d_k=4),
    }


def test_head_colours_in_figures_stand_out_on_white_text_4_5_and_lines_3():
    from helpers.figures.palette import contrast

    for name, fig in _figures_with_head_colours().items():
        inks = _inks(fig)
        assert any(ink not in ("#000000", "#ffffff") for _, ink in inks), name  # a head's colour
        for kind, ink in inks:
            least = 4.5 if kind == "text" else 3.0
            assert contrast(ink, "#ffffff") >= least, (name, kind, ink)


def test_the_contrast_rule_sees_the_palette_s_light_colours():
    from helpers.figures.palette import HEAD_COLOURS, HEAD_LINES, HEAD_TEXT, contrast

    amber = HEAD_COLOURS[1]
    assert contrast(amber, "#ffffff") == pytest.approx(2.16, abs=0.01)  # what the figures drew
    assert HEAD_TEXT[1] != amber
    assert contrast(HEAD_TEXT[1], "#ffffff") == pytest.approx(4.5, abs=0.05)
    assert contrast(HEAD_LINES[1], "#ffffff") == pytest.approx(3.1, abs=0.05)
    assert HEAD_TEXT[0] == HEAD_COLOURS[0]  # dark enough already: unchanged


def test_an_annotated_map_writes_each_weight_in_the_ink_that_stands_out():
    from matplotlib.colors import to_hex

    from helpers.figures.palette import contrast

    weights = torch.linspace(0, 1, 36).reshape(6, 6)
    fig = plots.attention_map(weights, list("abcdef"), "one head", annotate=True)
    table = plots.colormap_table()
    for text in fig.axes[0].texts:
        cell = table[round(float(text.get_text()) * 255)]
        assert contrast(to_hex(text.get_color()), cell) >= 4.5, text.get_text()


def test_the_side_panels_lines_and_boxes_stand_3_to_1_on_white():
    import re

    from helpers.figures.palette import HEAD_COLOURS, contrast
    from helpers.figures.panel_svg import kv_groups_svg, parameter_counts_svg

    counts = parameter_counts_svg({"a": ([1, 2], [3, 4]), "b": ([1, 2], [5, 6])},
                                  list(HEAD_COLOURS[:2]), highlight=2)  # fmt: skip
    groups = kv_groups_svg(8, 4, list(HEAD_COLOURS))
    lines = re.findall(r'<polyline[^>]*stroke="(#\w{6})"', counts)
    lines += re.findall(r'<line[^>]*stroke="(#\w{6})"', groups)
    boxes = re.findall(r'<rect[^>]*fill="(#\w{6})"', groups)
    assert len(lines) == 2 + 8 and len(boxes) == 4 + 8
    assert all(contrast(c, "#ffffff") >= 3.0 for c in lines + boxes), lines + boxes


def test_a_figure_without_titles_is_described_by_its_headings_legend_and_axes():
    curves = render._alt(plots.copy_curves([3.5] * 60, [3.0] * 60, 3.47, 60))
    assert "lines: first copy: cannot be predicted, the repeat: can be copied" in curves
    assert "loss (mean of 50 steps) against training step" in curves
    maps = plots.heads_mosaic(torch.rand(2, 7, 7), WORDS, "", titles=["head 0, the sentence", "b"])
    assert render._alt(maps).startswith("head 0, the sentence;")
    assert render._alt(plots.attention_map(torch.eye(7), WORDS, "one head")) == "one head"
