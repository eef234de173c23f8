"""``--print-alignment`` and ``--score-reference`` under ``--task summarization``: with --print-alignment the
project's beam search still blocks n-grams and applies the coverage penalty (and adds the alignment);
--score-reference scores the reference with fairseq's scorer, where there is no search to block or re-rank."""
import logging

import pytest
import torch

from conftest import tiny_batch, tiny_dictionary, tiny_model
from test_generator import build, copy_only_model, generate, has_repeat


@pytest.fixture
def copier():
    """A tiny pgn_lstm that copies the most frequent source token, <oov-0>, at every step (six times unblocked),
    attending uniformly to 10 source tokens: 7 steps cover each with 0.7, so the coverage penalty is below 0."""
    from fairseq_plugins.text.markers import marker

    dictionary = tiny_dictionary()
    m0 = dictionary.index(marker(0))
    src = torch.tensor([[m0, m0, m0, *(dictionary.index(w) for w in "abcdef"), dictionary.eos()]])
    options = dict(dictionary=dictionary, models=[copy_only_model(dictionary)], min_len=6, max_len_b=6)
    return options, src, torch.tensor([10])


@pytest.mark.parametrize("alignment", ["hard", "soft"])
@pytest.mark.parametrize("blocking", [{"block_ngram_repeat": 3}, {"no_repeat_ngram_size": 3}])
def test_print_alignment_keeps_ngram_blocking(copier, alignment, blocking):
    options, src, lengths = copier
    eos = options["dictionary"].eos()
    free = generate(build(**options, print_alignment=alignment), src, lengths)
    assert has_repeat(free[0][0]["tokens"].tolist())  # the copier loops without blocking
    aligned = generate(build(**options, print_alignment=alignment, **blocking), src, lengths)
    plain = generate(build(**options, **blocking), src, lengths)
    for with_alignment, without in zip(aligned[0], plain[0]):
        tokens = with_alignment["tokens"].tolist()
        assert tokens == without["tokens"].tolist() and with_alignment["score"] == without["score"]
        assert not has_repeat([t for t in tokens if t != eos])
        # hard: a (source, target) pair per word, </s> left out; soft: a row of source weights per token
        assert len(with_alignment["alignment"]) == len(tokens) - (alignment == "hard")
        assert len(without["alignment"]) == 0


def test_print_alignment_keeps_the_coverage_penalty(copier):
    options, src, lengths = copier
    aligned = generate(build(**options, print_alignment="hard", coverage_penalty=0.5), src, lengths)
    plain = generate(build(**options, coverage_penalty=0.5), src, lengths)
    for with_alignment, without in zip(aligned[0], plain[0]):
        assert float(with_alignment["coverage_penalty"]) < 0  # the copier covers only part of the source
        assert with_alignment["coverage_penalty"] == without["coverage_penalty"]
        assert with_alignment["score"] == without["score"]


@pytest.mark.parametrize("alignment", ["hard", "soft"])
def test_a_padded_source_gets_the_alignment_it_gets_alone(alignment):
    """pgn_lstm attends in right-padded order, the batch is left-padded: a shorter source's alignment must not
    depend on the padding its batch gives it."""
    dictionary = tiny_dictionary()
    torch.manual_seed(4)
    model = tiny_model(dictionary).eval()
    with torch.no_grad():  # sharper attention: by itself the source's best aligned word is its second one
        model.decoder.attention.key_proj.weight.mul_(10)
        model.decoder.attention.v.weight.mul_(10)
    options = dict(dictionary=dictionary, models=[model], min_len=4, max_len_b=4, beam=2, print_alignment=alignment)
    src, lengths, _ = tiny_batch(dictionary)  # the second source has 2 pads on the left
    batch = generate(build(**options), src, lengths)
    alone = generate(build(**options), src[1:, 2:], lengths[1:])
    for in_batch, by_itself in zip(batch[1], alone[0]):
        assert torch.equal(in_batch["tokens"], by_itself["tokens"])
        if alignment == "hard":  # (source word, target word) pairs
            assert in_batch["alignment"] == by_itself["alignment"]
            assert {source for source, _ in by_itself["alignment"]} == {1}  # a shift by the padding would show
        else:  # rows of source weights as strings with 6 decimals
            weights = [torch.tensor([[float(w) for w in row] for row in hypo["alignment"]])
                       for hypo in (in_batch, by_itself)]
            assert torch.allclose(*weights, atol=2e-6), weights


@pytest.mark.parametrize("alignment", [None, "hard"])
def test_score_reference_uses_fairseqs_scorer_and_says_the_search_options_do_not_apply(copier, alignment, caplog):
    from fairseq.sequence_scorer import SequenceScorer

    options, _, _ = copier
    with caplog.at_level(logging.INFO, logger="fairseq_plugins.tasks.summarization"):
        scorer = build(**options, score_reference=True, print_alignment=alignment, block_ngram_repeat=3,
                       coverage_penalty=0.5)
    assert isinstance(scorer, SequenceScorer) and bool(scorer.compute_alignment) == bool(alignment)
    assert "--score-reference" in caplog.text and "--block-ngram-repeat" in caplog.text
    assert "--coverage-penalty" in caplog.text
    caplog.clear()
    build(**options, score_reference=True)
    assert "--score-reference" not in caplog.text  # nothing to say when no search option is set
