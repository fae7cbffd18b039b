"""helpers.pretrained: MiniLM in the course's modules equals transformers' BertModel, offline."""

import os
import socket

import pytest
import torch

from helpers.layouts import split
from helpers.pretrained import TextError, load_minilm, model_dir

os.environ["HF_HUB_OFFLINE"] = "1"

SENTENCES = [
    "The cat sat on the warm mat.",
    "Café crème, s'il vous plaît — 3.14 euros!",
    "In 1969, 3 astronauts flew 384,400 km (to the Moon); 2 walked on it.",
    "naïve résumé façade",
    "ok",
]


@pytest.fixture(autouse=True)
def no_network(monkeypatch):
    """Any attempt to open a connection fails the test: the model must load from disk."""

    def refuse(*args, **kwargs):
        raise AssertionError(f"network access attempted: {args}")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)


@pytest.fixture(scope="module")
def models():
    from transformers import BertModel

    reference = BertModel.from_pretrained(str(model_dir()), attn_implementation="eager").eval()
    return load_minilm(), reference


def run_reference(reference, ids, valid):
    with torch.no_grad():
        return reference(
            input_ids=ids,
            attention_mask=valid.long(),
            output_attentions=True,
            output_hidden_states=True,
        )


@pytest.mark.parametrize("batch", [SENTENCES[:1], SENTENCES[1:2], SENTENCES[2:3], SENTENCES])
def test_attentions_and_hidden_states_equal_transformers(models, batch):
    ours, reference = models
    encoded = ours(batch)
    ids, valid, _ = ours.tokenize(batch)
    expected = run_reference(reference, ids, valid)
    assert encoded.attentions.shape == (6, len(batch), 12, ids.shape[1], ids.shape[1])
    assert encoded.hidden_states.shape == (7, len(batch), ids.shape[1], 384)
    ref_attentions = torch.stack(expected.attentions)  # (6, B, 12, T, T)
    # rows of real queries (padded queries' rows feed only padding, in either implementation)
    rows = valid[None, :, None, :, None].expand_as(ref_attentions)
    torch.testing.assert_close(encoded.attentions[rows], ref_attentions[rows], atol=1e-5, rtol=0)
    padded_keys = ~valid[None, :, None, None, :].expand_as(ref_attentions)
    assert (ref_attentions[padded_keys].abs() < 1e-6).all()
    last, ref_last = encoded.hidden_states[-1][valid], expected.last_hidden_state[valid]
    torch.testing.assert_close(last, ref_last, atol=1e-4, rtol=0)


def test_padded_keys_get_zero_weight_and_rows_sum_to_one(models):
    encoded = models[0](SENTENCES)
    keys = encoded.valid[None, :, None, None, :].expand_as(encoded.attentions)
    assert (encoded.attentions.masked_select(~keys) == 0).all()
    torch.testing.assert_close(
        encoded.attentions.sum(-1), torch.ones(encoded.attentions.shape[:-1]), atol=1e-5, rtol=0
    )
    assert [len(t) for t in encoded.tokens] == encoded.valid.sum(1).tolist()


def test_tokens_are_strings_with_accents_folded_and_specials(models):
    tokens = models[0]("Café crème!").tokens[0]
    assert tokens == ["[CLS]", "cafe", "cr", "##eme", "!", "[SEP]"]


def test_split_gives_the_real_per_head_query_matrix(models):
    attention = models[0].layers[2].attention
    head = split(attention).heads[5]
    assert head.w_q.weight.shape == (32, 384)
    assert torch.equal(head.w_q.weight, attention.w_q.weight[5 * 32 : 6 * 32])
    assert torch.equal(head.w_q.bias, attention.w_q.bias[5 * 32 : 6 * 32])


@pytest.mark.parametrize(
    "text, message",
    [
        ("", "has no words to attend to"),
        ("   ", "has no words to attend to"),
        ("word " * 600, "602 tokens long; the model has only 512 positions"),
        ([], "No text given"),
    ],
)
def test_bad_text_raises_a_clear_error(models, text, message):
    with pytest.raises(TextError, match=message):
        models[0](text)


def test_unknown_characters_become_unk_not_an_error(models):
    assert "[UNK]" in models[0]("hello 🙂").tokens[0]


def test_head_patterns_measure_known_heads(models):
    from helpers.pretrained import head_patterns

    scores = head_patterns(models[0](["the cat sat on the mat and the dog sat on the rug ."]))
    assert set(scores) == {
        "[CLS]",
        "[SEP]",
        "previous token",
        "next token",
        "itself",
        "same word elsewhere",
    }
    assert all(s.shape == (6, 12) for s in scores.values())
    assert scores["previous token"][0, 2] > 0.95  # layer 0, head 2 looks at the previous token
    assert scores["previous token"].mean() < 0.2


def test_head_patterns_on_a_hand_made_map():
    from helpers.pretrained import Encoded, head_patterns

    words = ["[CLS]", "a", "b", "a", "[SEP]"]
    previous = torch.zeros(1, 1, 1, 5, 5)
    for t in range(1, 5):
        previous[0, 0, 0, t, t - 1] = 1.0
    previous[0, 0, 0, 0, 0] = 1.0
    encoded = Encoded(
        [words], torch.zeros(2, 1, 5, 4), previous, torch.ones(1, 5, dtype=torch.bool)
    )
    scores = head_patterns(encoded)
    assert scores["previous token"].item() == 1.0 and scores["next token"].item() == 0.0
    assert scores["[CLS]"].item() == pytest.approx(1 / 3)  # only query 1 ("a") looks at [CLS]
    assert scores["same word elsewhere"].item() == 0.0  # "a" at 1 and 3 never look at each other


def test_real_heads_explorer_follows_text_layer_and_head(models):
    from helpers.panels import RealHeadsExplorer

    model = models[0]
    panel = RealHeadsExplorer(model, "the cat sat on the mat", layer=0, head=2)
    assert panel.message == "8 tokens; layer 0, head 2"
    assert "head 2 → previous token: 1.00" in panel.table
    # every layer and head is sent at once: 72 frames over 6 blocks of 12 maps
    assert len(panel.view.sent) == 72 and len(panel.view.blocks) == 6
    assert panel.view.focus_by == "head" and panel.view.enlarge
    encoded = model("the cat sat on the mat")
    assert torch.equal(panel.maps, encoded.attentions[0, 0])  # (h, T, T), the model's own
    panel.layer_slider.value = 4
    assert torch.equal(panel.maps, encoded.attentions[4, 0]) and "(384, 32)" in panel.table
    panel.text.value = "a much longer sentence than the first one was"
    assert panel.message == "11 tokens; layer 4, head 2" and "(6, 1, 12, 11, 11)" in panel.table
    new = model("a much longer sentence than the first one was")
    assert torch.equal(panel.maps, new.attentions[4, 0])  # the new text's maps, not the old


def test_real_heads_explorer_keeps_the_last_sentence_when_a_text_is_refused(models):
    from helpers.panels import RealHeadsExplorer

    panel = RealHeadsExplorer(models[0], "the cat sat on the mat", layer=0, head=2)
    frames = panel.view.sent
    panel.text.value = ""
    assert "has no words to attend to" in panel.message
    assert panel.message.endswith(". The maps still show: 'the cat sat on the mat'")
    assert panel.view.sent == frames  # nothing dropped: layer and head go on working
    panel.layer_slider.value = 3
    assert "layer 3, head 2" in panel.table and "8 tokens" in panel.table
    panel.text.value = "hello 🙂"
    assert panel.view.notice == "" and "1 [UNK]" in panel.message
    assert panel.view.query == -1  # the followed query belonged to the old text
