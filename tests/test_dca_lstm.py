"""dca_lstm: the split into agents, the messages, both attentions, the multi-agent pointer, incremental decoding,
beam search, the hub's teacher forcing, and end to end through fairseq-train / fairseq-generate and the scripts."""
import argparse
import re
from pathlib import Path

import pytest
import torch

from conftest import assert_incremental_equals_full, run, slice_corpus, stub_task, tiny_dictionary
from fairseq_plugins.modules.agent_encoder import agent_messages, last_states, run_bilstm
from fairseq_plugins.modules.agent_split import split_agents
from fairseq_plugins.modules.factories import LSTM
from fairseq_plugins.text.markers import marker

ROOT = Path(__file__).resolve().parent.parent
USER_DIR = str(ROOT / "fairseq_plugins")
DICT = tiny_dictionary("a b c d e f g h . 。 ！")  # <s> <pad> </s> <unk>, a..h = 4..11, . 。 ！ = 12..14, markers
PAD, EOS = DICT.pad(), DICT.eos()
A, B, C, D, E, F, G, H = (DICT.index(w) for w in "abcdefgh")
DOT, ZH_STOP, ZH_BANG = DICT.index("."), DICT.index("。"), DICT.index("！")
M0, M1 = DICT.index(marker(0)), DICT.index(marker(1))
BOUNDARIES = torch.tensor([DOT, ZH_STOP, ZH_BANG])


def build(**overrides):
    import fairseq_plugins  # noqa: F401  (registers the plugins)
    from fairseq_plugins.models.dca_lstm import DCALSTMModel

    options = dict(encoder_embed_dim=8, encoder_hidden_size=6, decoder_hidden_size=7, attention_dim=5,
                   decoder_out_embed_dim=9, dropout=0.0)
    options.update(overrides)
    return DCALSTMModel.build_model(argparse.Namespace(**options), stub_task(DICT)())


def batch():
    """Three sources, left-padded as fairseq collates them: 4 sentences (one ends in a run '. ！'), two
    sentences (fewer than 3: token chunks), one token; and teacher-forcing inputs."""
    src = torch.tensor([
        [A, B, DOT, C, M0, DOT, ZH_BANG, E, D, ZH_STOP, F, M0, EOS],
        [PAD, PAD, PAD, PAD, PAD, G, H, DOT, A, B, C, DOT, EOS],
        [PAD] * 11 + [H, EOS],
    ])
    lengths = torch.tensor([13, 8, 2])
    prev = torch.tensor([[EOS, A, M0, DOT, B], [EOS, G, DOT, H, A], [EOS, H, H, DOT, C]])
    return src, lengths, prev


def right_padded(src):
    from fairseq import utils

    return utils.convert_padding_direction(src, PAD, left_to_right=True)


# ---------------------------------------------------------------------------------------------- the split
def agents_of(layout, document):
    """The agents' token lists of one document."""
    return [layout.tokens[document, a, :n].tolist() for a, n in enumerate(layout.lengths[document].tolist())]


def test_sentence_split_groups_sentences_and_gives_eos_to_the_last_agent():
    src = right_padded(batch()[0])
    layout = split_agents(src, PAD, EOS, 3, "sentences", BOUNDARIES)
    # 4 sentences of 3, 4, 3, 2 tokens (". ！" is one boundary) in groups of near-equal length; </s> last.
    assert agents_of(layout, 0) == [[A, B, DOT], [C, M0, DOT, ZH_BANG], [E, D, ZH_STOP, F, M0, EOS]]
    # 2 sentences < 3 agents: 7 content tokens in near-equal chunks 3, 2, 2.
    assert agents_of(layout, 1) == [[G, H, DOT], [A, B], [C, DOT, EOS]]
    # 1 token: the first agent has it, the second is empty, the last has </s>.
    assert agents_of(layout, 2) == [[H], [], [EOS]]
    # Every source position maps back to its agent slot.
    flat = layout.tokens.view(3, -1).gather(1, layout.flat_index)
    assert torch.equal(flat.masked_fill(layout.source_padding, PAD), src)


def sentence_doc(lengths):
    """One source of sentences of the given lengths (>= 2: words then a period), ending in </s>."""
    tokens = []
    for n in lengths:
        tokens += [A] * (n - 1) + [DOT]
    return torch.tensor([tokens + [EOS]])


@pytest.mark.parametrize("lengths, expected", [
    ((8, 2, 2, 2, 2, 2), [8, 4, 6 + 1]),  # near-equal tokens (equal sentence counts would give 10, 4, 4)
    ((10, 2, 2), [10, 2, 2 + 1]),  # a long first sentence still leaves every agent a sentence
    ((2, 10, 2), [2, 10, 2 + 1]),
    ((2, 2, 2, 12), [4, 2, 12 + 1]),
])
def test_sentence_groups_balance_tokens_and_leave_no_agent_empty(lengths, expected):
    layout = split_agents(sentence_doc(lengths), PAD, EOS, 3, "sentences", BOUNDARIES)
    assert layout.lengths[0].tolist() == expected


def test_token_split_is_near_equal_chunks():
    src = right_padded(batch()[0])
    layout = split_agents(src, PAD, EOS, 3, "tokens", BOUNDARIES)
    assert agents_of(layout, 0) == [[A, B, DOT, C], [M0, DOT, ZH_BANG, E], [D, ZH_STOP, F, M0, EOS]]
    assert agents_of(layout, 2) == [[H], [], [EOS]]
    single = split_agents(src, PAD, EOS, 1, "tokens")
    assert agents_of(single, 1) == [[G, H, DOT, A, B, C, DOT, EOS]]


def test_an_empty_document_gives_its_eos_to_the_last_agent():
    layout = split_agents(torch.tensor([[EOS]]), PAD, EOS, 3, "sentences", BOUNDARIES)
    assert agents_of(layout, 0) == [[], [], [EOS]]


# ---------------------------------------------------------------------------------------------- the encoder
def test_message_is_the_mean_of_the_other_agents_last_states():
    last = torch.tensor([[[1.0, 0.0], [0.0, 2.0], [4.0, 4.0]],
                         [[1.0, 1.0], [0.0, 0.0], [3.0, 5.0]]])  # B x M x H; agent 1 of document 1 is empty
    nonempty = torch.tensor([[True, True, True], [True, False, True]])
    z = agent_messages(last, nonempty)
    torch.testing.assert_close(z[0], torch.tensor([[2.0, 3.0], [2.5, 2.0], [0.5, 1.0]]))  # not its own state
    torch.testing.assert_close(z[1], torch.tensor([[3.0, 5.0], [2.0, 3.0], [1.0, 1.0]]))  # the empty one sends 0
    assert torch.equal(agent_messages(last[:, :1], nonempty[:, :1]), torch.zeros(2, 1, 2))  # M = 1: no message


def test_encoder_sends_each_layer_the_other_agents_true_last_states():
    torch.manual_seed(0)
    model = build(contextual_layers=2).eval()
    src, lengths, _ = batch()
    layout = split_agents(right_padded(src), PAD, EOS, 3, "sentences", BOUNDARIES)
    embedded = model.encoder.embed_tokens(model.encoder.as_unk(layout.tokens))
    encoded = model.encoder.agents(embedded, layout.lengths, layout.padding_mask)
    assert len(encoded.messages) == 2 and len(encoded.layer_last) == 3
    top = encoded.states
    for b in range(3):
        for a in range(3):
            n = int(layout.lengths[b, a])
            expected_last = top[b, a, n - 1] if n else torch.zeros(top.size(3))
            torch.testing.assert_close(encoded.layer_last[-1][b, a], expected_last)  # true last token, not padding
            assert torch.all(top[b, a, n:] == 0)
    for k, message in enumerate(encoded.messages):
        last = encoded.layer_last[k]
        for b in range(3):
            for a in range(3):
                others = [m for m in range(3) if m != a and layout.lengths[b, m] > 0]
                torch.testing.assert_close(message[b, a], torch.stack([last[b, m] for m in others]).mean(0))


def test_agents_are_independent_without_messages():
    """Changing the words of agent 2 changes agent 1's states only when the agents communicate."""
    src = torch.tensor([[A, B, DOT, C, D, DOT, E, F, DOT, EOS]])
    changed = src.clone()
    changed[0, 3:5] = torch.tensor([G, H])  # the second sentence: agent 2's words
    lengths = torch.tensor([10])
    for communicate in (False, True):
        torch.manual_seed(1)
        model = build(no_communication=not communicate).eval()
        first = model.encoder(src, lengths)["agent_states"]
        second = model.encoder(changed, lengths)["agent_states"]
        assert not torch.allclose(first[0, 1], second[0, 1])
        assert torch.allclose(first[0, 0], second[0, 0]) != communicate
        assert torch.allclose(first[0, 2], second[0, 2]) != communicate


def test_run_bilstm_equals_a_bidirectional_lstm_on_each_sequence_alone():
    torch.manual_seed(2)
    forward, backward = LSTM(3, 4), LSTM(3, 4)
    reference = torch.nn.LSTM(3, 4, batch_first=True, bidirectional=True)
    with torch.no_grad():
        for name, param in reference.named_parameters():
            source = backward if name.endswith("_reverse") else forward
            param.copy_(getattr(source, name.replace("_reverse", "")))
    x = torch.randn(6, 6, 3)
    lengths = torch.tensor([6, 2, 0, 4, 2, 5])
    out, cells = run_bilstm(forward, backward, x, lengths)
    for row, n in enumerate(lengths.tolist()):
        if n == 0:
            assert torch.all(out[row] == 0) and torch.all(cells[row] == 0)
            continue
        alone, (_, c) = reference(x[row:row + 1, :n])
        torch.testing.assert_close(out[row, :n], alone[0])
        assert torch.all(out[row, n:] == 0)
        torch.testing.assert_close(cells[row], torch.cat([c[0, 0], c[1, 0]]))  # final cells of both directions


def test_last_states_read_the_true_last_token():
    states = torch.arange(2 * 2 * 3 * 1, dtype=torch.float).view(2, 2, 3, 1)
    last = last_states(states, torch.tensor([[3, 1], [0, 2]]))
    assert last.view(-1).tolist() == [2.0, 3.0, 0.0, 10.0]


# ---------------------------------------------------------------------------------------------- the decoder
@pytest.mark.parametrize("options", [{}, {"agent_split": "tokens"}, {"num_agents": 1}])
def test_attentions_sum_to_one_and_ignore_padding_and_empty_agents(options):
    torch.manual_seed(3)
    model = build(**options).eval()
    src, lengths, prev = batch()
    logits, extra = model(src, lengths, prev)
    encoder_out = model.encoder(src, lengths)
    nonempty = encoder_out["agent_lengths"] > 0  # B x M
    word, agent = extra["word_attn"], extra["agent_attn"]  # B x T x M x S_a, B x T x M
    torch.testing.assert_close(word.sum(3), nonempty.unsqueeze(1).float().expand(-1, prev.size(1), -1))
    assert torch.all(word.masked_select(encoder_out["agent_padding"].unsqueeze(1)) == 0)
    torch.testing.assert_close(agent.sum(2), torch.ones(3, prev.size(1)))
    assert torch.all(agent.masked_select(~nonempty.unsqueeze(1)) == 0)
    flat = extra["attn"][0]  # B x T x S over the right-padded source
    torch.testing.assert_close(flat.sum(2), torch.ones(3, prev.size(1)))
    assert torch.all(flat.masked_select(right_padded(src).eq(PAD).unsqueeze(1)) == 0)


@pytest.mark.parametrize("options", [{}, {"no_copy": True}, {"no_contextual_agent_attention": True}])
def test_final_distribution_sums_to_one_over_the_extended_vocabulary(options):
    torch.manual_seed(4)
    model = build(**options).eval()
    src, lengths, prev = batch()
    probs = model.get_normalized_probs(model(src, lengths, prev), log_probs=False)
    assert probs.shape == (3, prev.size(1), len(DICT))
    torch.testing.assert_close(probs.sum(2), torch.ones(3, prev.size(1)))
    assert torch.all(probs >= 0)
    assert torch.all(probs[:, :, M1] == 0)  # a marker in no source


def test_multi_agent_pointer_follows_the_formula_and_copies_from_both_agents():
    """P(w) = sum_a g_a [p_a P_voc(w) + (1 - p_a) sum_{i: x_ai = w} l'_ai], l'_a the word attention renormalised
    without </s> (never copied; an agent holding only </s> generates only); <oov-0> is in agents 2 and 3."""
    torch.manual_seed(5)
    model = build().eval()
    src, lengths, prev = batch()
    logits, extra = model(src, lengths, prev)
    probs = model.get_normalized_probs((logits, extra), log_probs=False)
    tokens = model.encoder(src, lengths)["agent_tokens"]  # B x M x S_a
    g, p, word = extra["agent_attn"], extra["agent_p_gen"], extra["word_attn"]
    word = word.masked_fill(tokens.eq(EOS).unsqueeze(1), 0.0)  # B x T x M x S_a
    copyable = word.sum(3, keepdim=True)  # B x T x M x 1
    only_eos = copyable.eq(0) & tokens.eq(EOS).any(2).view(3, 1, -1, 1)  # an agent with nothing but </s>
    assert only_eos[2, :, 2].all()  # the one-token document: its last agent holds </s> alone
    word = word / copyable.masked_fill(copyable.eq(0), 1.0)
    p = p.masked_fill(only_eos.squeeze(3), 1.0)
    p_voc = torch.softmax(logits, dim=-1)
    for w in (M0, E, DOT, EOS):
        vocab = p_voc[..., w] if w < model.decoder.num_regular else torch.zeros_like(g[..., 0])  # B x T
        copy_by_agent = (word * tokens.eq(w).unsqueeze(1)).sum(3)  # B x T x M
        per_agent = g * (p * vocab.unsqueeze(2) + (1 - p) * copy_by_agent)  # B x T x M
        torch.testing.assert_close(probs[..., w], per_agent.sum(2))
        if w == M0:
            assert torch.all(per_agent[0, :, 1] > 0) and torch.all(per_agent[0, :, 2] > 0)  # mass from both agents
            assert torch.all(per_agent[0, :, 0] == 0)


def test_target_probs_match_the_full_distribution():
    torch.manual_seed(6)
    model = build().eval()
    src, lengths, prev = batch()
    target = torch.cat([prev[:, 1:], torch.full((3, 1), EOS)], dim=1)
    net_output = model(src, lengths, prev)
    full = model.get_normalized_probs(net_output, log_probs=False).gather(2, target.unsqueeze(2)).squeeze(2)
    torch.testing.assert_close(model.get_target_probs(net_output, target), full)


def test_left_and_right_padding_give_the_same_result():
    torch.manual_seed(7)
    model = build().eval()
    src, lengths, prev = batch()
    left = model.get_normalized_probs(model(src, lengths, prev), log_probs=False)
    right = model.get_normalized_probs(model(right_padded(src), lengths, prev), log_probs=False)
    torch.testing.assert_close(left, right)


def test_short_documents_train_with_finite_gradients():
    """Empty agents (a one-token and an empty document) give no NaN, forward or backward."""
    torch.manual_seed(8)
    model = build(dropout=0.1).train()
    src = torch.tensor([[A, B, DOT, C, EOS], [PAD, PAD, PAD, H, EOS], [PAD, PAD, PAD, PAD, EOS]])
    lengths = torch.tensor([5, 2, 1])
    prev = torch.tensor([[EOS, A, B], [EOS, H, C], [EOS, D, E]])
    target = torch.tensor([[A, B, EOS], [H, C, EOS], [D, E, EOS]])
    net_output = model(src, lengths, prev)
    loss = -torch.log(model.get_target_probs(net_output, target).clamp(min=1e-12)).sum()
    loss.backward()
    assert torch.isfinite(loss)
    assert all(torch.isfinite(p.grad).all() for p in model.parameters() if p.grad is not None)


INCREMENTAL_OPTIONS = [{}, {"no_copy": True}, {"no_contextual_agent_attention": True},
                       {"decoder_init_cell": "zeros", "message_v1": True}, {"agent_split": "tokens", "num_agents": 2},
                       {"num_agents": 1, "contextual_layers": 0}, {"decoder_hidden_size": 6}]


@pytest.mark.parametrize("options", INCREMENTAL_OPTIONS)
def test_incremental_decoding_equals_full_forward_with_reordering(options):
    torch.manual_seed(9)
    model = build(**options).eval()
    assert_incremental_equals_full(model, *batch(), order=torch.tensor([2, 0, 1]))  # reordered halfway


def test_beam_search_with_trigram_blocking_and_the_hub_teacher_forcing():
    from fairseq_plugins.generation.generator import SummarizationGenerator
    from fairseq_plugins.inference.hub import teacher_force

    torch.manual_seed(10)
    model = build().eval()
    src, lengths, _ = batch()
    generator = SummarizationGenerator([model], DICT, beam_size=3, max_len_b=8, min_len=2, block_ngram_repeat=2)
    hypos = generator.generate([model], {"net_input": {"src_tokens": src, "src_lengths": lengths}})
    assert len(hypos) == 3 and all(len(h) == 3 for h in hypos)
    for h in hypos:
        tokens = h[0]["tokens"].tolist()
        bigrams = list(zip(tokens, tokens[1:]))
        assert len(bigrams) == len(set(bigrams))  # --block-ngram-repeat 2
    ids = right_padded(src)[0]
    forced = teacher_force(model, ids, hypos[0][0]["tokens"])
    assert forced["attention"].shape == (len(hypos[0][0]["tokens"]), ids.numel())  # T x S over the flat source
    assert abs(forced["attention"].sum(1) - 1).max() < 1e-5 and forced["p_gen"] is not None
    assert forced["coverage"] is None


def test_bad_options_are_named():
    with pytest.raises(ValueError, match="--agent-boundaries"):
        build(agent_boundaries="; :")
    with pytest.raises(ValueError, match="--num-agents"):
        build(num_agents=0)
    build(agent_boundaries="; :", agent_split="tokens")  # boundaries are not needed for token chunks


# ---------------------------------------------------------------------------------------------- end to end
@pytest.fixture(scope="module")
def data(tmp_path_factory):
    """A slice of data/scitldr, preprocessed as scitldr_small does (raw text, so word tokenization)."""
    work = tmp_path_factory.mktemp("dca")
    raw = slice_corpus("scitldr", work / "raw", (("train", 120), ("valid", 8), ("test", 6)))
    run(["./preprocess.sh", str(raw), str(work / "data")])  # word tokenization: periods are tokens
    return work / "data"


@pytest.mark.slow
def test_plain_fairseq_train_and_generate(data, tmp_path):
    save = tmp_path / "ckpt"
    run(["fairseq-train", str(data / "bin"), "--user-dir", USER_DIR, "--task", "summarization",
         "--arch", "dca_lstm_small", "--encoder-embed-dim", "32", "--encoder-hidden-size", "32",
         "--decoder-hidden-size", "32", "--criterion", "semantic_cohesion", "--cohesion-lambda", "0.5",
         "--optimizer", "adam", "--lr", "0.002", "--max-tokens", "3000", "--max-update", "3",
         "--save-dir", str(save), "--no-epoch-checkpoints", "--log-format", "simple", "--log-interval", "1"])
    generated = run(["fairseq-generate", str(data / "bin"), "--user-dir", USER_DIR, "--task", "summarization",
                     "--path", str(save / "checkpoint_last.pt"), "--gen-subset", "test", "--beam", "3",
                     "--max-len-b", "12", "--batch-size", "4", "--block-ngram-repeat", "3"])
    assert len(re.findall(r"^H-\d+\t", generated.stdout, flags=re.M)) == 6


@pytest.mark.slow
def test_train_and_generate_through_the_scripts(data, tmp_path):
    model = tmp_path / "model"
    # --force-config: the CNN/DM config's model on the small word-tokenized sample (it prepares text otherwise)
    train = run(["./train.sh", "-c", "dca_lstm_cnndm_small", "--force-config", str(data), str(model),
                 "--max-update", "2", "--encoder-embed-dim", "32", "--encoder-hidden-size", "32", "--decoder-hidden-size", "32",
                 "--eval-gen-args", '{"beam": 1, "max_len_a": 0, "max_len_b": 8, "min_len": 2}'])
    log = train.stdout + train.stderr
    assert re.search(r"\| cohesion [-\d.]+", log), log[-3000:]  # the criterion's term is logged
    docs = tmp_path / "docs.txt"
    docs.write_text("first document . it has two sentences .\n\na third , one-sentence document\n", encoding="utf-8")
    result = run(["./generate.sh", "-c", "dca_lstm_cnndm_small", "--input", str(docs), "--checkpoint",
                  "checkpoint_last.pt", str(data), str(model), "--max-len-b", "8", "--min-len", "1", "--beam", "2"])
    assert result.stdout.count("\n") == 3  # one summary per document, the empty one included
