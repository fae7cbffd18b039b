"""helpers.widgets: move a control, assert what the panel shows; impossible settings explain."""

import io

import numpy as np
import pytest
from PIL import Image

from helpers.widgets import BlockMatrixExplorer, HeadsExplorer, QueryExplorer


def size(png: bytes) -> tuple[int, int]:
    return Image.open(io.BytesIO(bytes(png))).size  # (width, height)


def test_heads_explorer_redraws_maps_and_shapes_when_h_moves():
    panel = HeadsExplorer(h=4, d_model=64)
    before = panel.image.value
    assert "(1, 7, 64)" in panel.table.value and "(64, 16)" in panel.table.value
    assert "matrices: 3h + 1 = 13" in panel.table.value
    assert "parameters: 3·h·d_model·d_k + d_model² = 16,384" in panel.table.value
    panel.h_slider.value = 8
    assert panel.image.value != before
    assert size(panel.image.value)[1] > size(before)[1]  # two rows of tiles instead of one
    assert "(64, 8)" in panel.table.value  # each W_i is d_model x d_k = 64 x 8
    assert "(1, 8, 7, 7)" in panel.table.value  # weights (B, h, T, T)
    assert "matrices: 3h + 1 = 25" in panel.table.value
    assert "16,384" in panel.table.value  # the same parameters for every h
    assert "✗" not in panel.table.value
    assert "✓ step by step = PerHeadMultiHeadAttention: equal within atol" in panel.table.value
    assert "h = 8 heads of d_k = 64 / 8 = 8" in panel.message.value


def test_heads_explorer_d_model_slider_changes_every_shape():
    panel = HeadsExplorer(h=4, d_model=64)
    before = panel.image.value
    panel.d_model_slider.value = 128
    assert "(1, 7, 128)" in panel.table.value and "(128, 32)" in panel.table.value
    assert "65,536" in panel.table.value
    assert panel.image.value != before


def test_heads_explorer_impossible_combination_says_why_and_recovers():
    panel = HeadsExplorer(h=4, d_model=64)
    picture, table = panel.image.value, panel.table.value
    panel.h_slider.value = 3
    message = panel.message.value
    assert "d_model=64 is not divisible by num_heads=3" in message
    assert "64/3 = 21.33" in message
    assert "Head counts that work for d_model=64: 1, 2, 4, 8, 16, 32, 64." in message
    assert "still shows the last setting that worked" in message
    assert (panel.image.value, panel.table.value) == (picture, table)
    panel.d_model_slider.value = 96  # 96 / 3 = 32: works again
    assert "✗" not in panel.message.value and "(1, 3, 7, 7)" in panel.table.value


def test_unexpected_errors_become_a_message_not_a_traceback(monkeypatch):
    panel = HeadsExplorer()

    def broken():
        raise RuntimeError("boom")

    monkeypatch.setattr(panel, "_render", broken)
    panel.h_slider.value = 8
    assert "Unexpected RuntimeError: boom" in panel.message.value


def test_block_matrix_explorer_redraws_blocks_and_checks_live():
    panel = BlockMatrixExplorer(h=4, d_model=32)
    before = panel.image.value
    for line in ("[W_0 … W_h-1] = W^Q", "x·W^Q = [x·W_0 … x·W_h-1]", "out: fused = per-head"):
        assert f"✓ {line}: equal within atol 1e-05" in panel.table.value
    assert "parameters: per-head 4,096, fused 4,096" in panel.table.value
    panel.h_slider.value = 8
    assert panel.image.value != before
    assert "(32, 4)" in panel.table.value and "✓ all 8 maps: fused = per-head" in panel.table.value
    assert "cut into h = 8 blocks of d_k = 4 columns" in panel.message.value
    panel.h_slider.value = 5
    assert "Head counts that work for d_model=32: 1, 2, 4, 8, 16, 32." in panel.message.value


def test_query_explorer_follows_the_chosen_token():
    panel = QueryExplorer()
    before = panel.image.value
    assert "query 2 ('sat')" in panel.table.value
    panel.query.value = 4
    assert panel.image.value != before
    assert "query 4 ('a')" in panel.table.value
    assert "✓ out[4] = weights[4] @ v: equal within atol 1e-05" in panel.table.value
    assert "✓ weights[4]: all 1 rows of (7,) sum to 1" in panel.table.value


@pytest.mark.parametrize("Panel", [HeadsExplorer, BlockMatrixExplorer, QueryExplorer])
def test_panels_show_a_picture_and_no_error_at_start(Panel):
    panel = Panel()
    assert bytes(panel.image.value).startswith(b"\x89PNG") and panel.image.layout.width
    assert "✗" not in panel.message.value + panel.table.value


def test_every_head_count_up_to_16_draws(tmp_path):
    panel = HeadsExplorer(h=1, d_model=240)  # 240 is divisible by 1..6, 8, 10, 12, 15, 16
    heights = {}
    for h in (1, 2, 3, 4, 5, 6, 8, 10, 12, 15, 16):
        panel.h_slider.value = h
        assert "✗" not in panel.message.value, (h, panel.message.value)
        heights[h] = size(panel.image.value)[1]
    assert heights[16] > heights[12] > heights[8] > heights[4]
    pixels = np.asarray(Image.open(io.BytesIO(bytes(panel.image.value))))
    assert pixels.std() > 10  # a picture, not a blank


def test_the_picture_is_shown_at_its_own_pixel_width():
    panel = HeadsExplorer(h=1, d_model=64)
    for h in (1, 2, 16):
        panel.h_slider.value = h
        assert panel.image.layout.width == f"{size(panel.image.value)[0]}px"


def test_one_vs_many_explorer_shows_one_map_beside_h_and_checks_the_score_identity():
    from helpers.widgets import OneVsManyExplorer

    panel = OneVsManyExplorer(h=4, d_model=48)
    before = panel.image.value
    assert "✓ one score = Σ_i head-i score / √h: equal within atol 1e-05" in panel.table.value
    assert "✓ the same W^Q" in panel.table.value and "parameters: 9,216 both" in panel.table.value
    panel.h_slider.value = 1  # one head either way: the outputs are identical
    assert "max |out_one − out_1| = 0" in panel.table.value
    panel.h_slider.value = 8
    assert panel.image.value != before and "(1, 8, 7, 7)" in panel.table.value
    gap = float(panel.table.value.split("max |out_one − out_8| = ")[1].split("<")[0])
    assert gap > 0.1
    panel.h_slider.value = 5
    assert "Head counts that work for d_model=48: 1, 2, 3, 4, 6, 8, 12, 16, 24, 48." in (
        panel.message.value
    )


def test_parameter_explorer_follows_h_and_d_k():
    from helpers.widgets import ParameterExplorer

    panel = ParameterExplorer(h=4, d_k=16, d_model=64)
    assert "h·d_k = 4·16 = 64 = d_model" in panel.table.value
    assert "parameters: 4·h·d_k·d_model = 16,384" in panel.table.value
    before = panel.image.value
    panel.h_slider.value = 8
    assert "h·d_k = 8·16 = 128 ≠ d_model = 64" in panel.table.value
    assert "32,768" in panel.table.value and "(128, 64)" in panel.table.value  # W^O (x·W)
    assert panel.image.value != before
    panel.d_k_slider.value = 3
    assert "(24, 64)" in panel.table.value and "6,144" in panel.table.value  # 4·8·3·64
    assert "✗" not in panel.message.value + panel.table.value


def test_heads_explorer_shows_the_same_picture_when_moved_back():
    panel = HeadsExplorer(h=4, d_model=64)
    first = bytes(panel.image.value)
    panel.h_slider.value = 8
    panel.h_slider.value = 4  # served from the panel's own modules: identical numbers
    assert bytes(panel.image.value) == first
