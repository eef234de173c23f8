"""The project's beam search (fairseq_plugins/generation/): n-gram blocking and the coverage penalty."""
import argparse
import math
import random

import pytest
import torch

from conftest import tiny_batch, tiny_dictionary, tiny_model


def build(task_options=None, **generation):
    """The summarization task's generator for ``models`` with fairseq-generate-like ``generation`` options."""
    from fairseq_plugins.tasks.summarization import SummarizationConfig, SummarizationTask

    dictionary = generation.pop("dictionary")
    models = generation.pop("models")
    task = SummarizationTask(SummarizationConfig(**(task_options or {})), dictionary, dictionary)
    args = argparse.Namespace(**{"beam": 5, "max_len_a": 0, "max_len_b": 12, "min_len": 1, **generation})
    return task.build_generator(models, args)


def generate(generator, src, lengths):
    sample = {"net_input": {"src_tokens": src, "src_lengths": lengths}, "id": torch.arange(src.size(0))}
    with torch.no_grad():
        return generator.generate(generator.model.models, sample)


def trigrams(tokens):
    return [tuple(tokens[i:i + 3]) for i in range(len(tokens) - 2)]


def has_repeat(tokens, n=3, ignore=()):
    """Does an n-gram occur twice (n-grams containing an ``ignore`` token left out)?"""
    grams = [tuple(tokens[i:i + n]) for i in range(len(tokens) - n + 1)]
    grams = [g for g in grams if not set(g) & set(ignore)]
    return len(grams) != len(set(grams))


# ----------------------------------------------------------------------------------------------- ban list
@pytest.mark.parametrize("n", [1, 2, 3, 4])
def test_vectorised_ban_list_equals_the_definition(n):
    from fairseq_plugins.generation.ngram_blocking import NGramBlocker, banned_reference

    rng = random.Random(n)
    for trial in range(60):
        rows, length, vocab = rng.randint(1, 7), rng.randint(0, 14), rng.randint(3, 6)  # small vocab: many repeats
        ignore = set(rng.sample(range(vocab), rng.randint(0, 2)))
        generated = torch.tensor([[rng.randrange(vocab) for _ in range(length)] for _ in range(rows)],
                                 dtype=torch.long).view(rows, length)
        lprobs = torch.randn(rows, vocab + 2)
        blocked = NGramBlocker(n, ignore).block(generated, lprobs.clone())
        for r in range(rows):
            expected = banned_reference(generated[r].tolist(), n, ignore)
            got = {w for w in range(vocab + 2) if blocked[r, w] == -math.inf}
            assert got == expected, (trial, generated[r].tolist(), ignore)
            keep = [w for w in range(vocab + 2) if w not in expected]
            assert torch.equal(blocked[r, keep], lprobs[r, keep])  # nothing else changes


@pytest.mark.parametrize("n", [0, 1, 3])
def test_the_immediate_repeat_ban_equals_the_definition(n):
    """With ``immediate``, each hypothesis's last token is banned too (unless ignored), alone (n = 0) or beside
    the n-gram blocking."""
    from fairseq_plugins.generation.ngram_blocking import NGramBlocker, banned_reference

    rng = random.Random(10 + n)
    for trial in range(60):
        rows, length, vocab = rng.randint(1, 7), rng.randint(0, 10), rng.randint(3, 6)
        ignore = set(rng.sample(range(vocab), rng.randint(0, 2)))
        generated = torch.tensor([[rng.randrange(vocab) for _ in range(length)] for _ in range(rows)],
                                 dtype=torch.long).view(rows, length)
        lprobs = torch.randn(rows, vocab + 2)
        blocked = NGramBlocker(n, ignore, immediate=True).block(generated, lprobs.clone())
        for r in range(rows):
            tokens = generated[r].tolist()
            expected = banned_reference(tokens, n, ignore, immediate=True)
            assert {w for w in range(vocab + 2) if blocked[r, w] == -math.inf} == expected, (trial, tokens, ignore)
            if tokens and tokens[-1] not in ignore:
                assert tokens[-1] in expected
            keep = [w for w in range(vocab + 2) if w not in expected]
            assert torch.equal(blocked[r, keep], lprobs[r, keep])


def test_no_blocking_at_all_is_refused():
    from fairseq_plugins.generation.ngram_blocking import NGramBlocker

    with pytest.raises(ValueError, match="n >= 1"):
        NGramBlocker(0)
    with pytest.raises(ValueError, match="n >= 1"):
        NGramBlocker(-1, immediate=True)


def test_blocker_reads_fairseqs_token_buffer():
    """SequenceGenerator passes its whole token buffer (start symbol, tokens so far, then padding)."""
    from fairseq_plugins.generation.ngram_blocking import NGramBlocker

    pad, bos = 1, 2
    tokens = torch.tensor([[bos, 5, 6, 7, 5, 6, pad, pad]])  # step 5: five tokens generated
    lprobs = torch.zeros(1, 10)
    NGramBlocker(3)(tokens, lprobs, bsz=1, beam_size=1, step=5)
    assert (lprobs[0] == -math.inf).nonzero().view(-1).tolist() == [7]  # "5 6 7" exists: 7 after "5 6" is banned


def test_ignore_ids_maps_tokens_through_the_dictionary():
    from fairseq.data import Dictionary

    from fairseq_plugins.generation.ngram_blocking import ignore_ids

    d = Dictionary()
    for word in ["a", ",", "\u2581.", "b"]:
        d.add_symbol(word)
    assert ignore_ids(d, ", .") == sorted({d.unk(), d.index(","), d.index("\u2581.")})
    assert ignore_ids(d, "") == [d.unk()]
    d.add_symbol("<q>")
    assert ignore_ids(d, "") == [d.unk(), d.index("<q>")]  # the sentence separator, where the dictionary has it
    with pytest.raises(ValueError, match="'zz' is not in the target dictionary"):
        ignore_ids(d, ", zz")


# ----------------------------------------------------------------------------------------------- scripted loop
class ScriptedModel:
    """A model whose next-token distribution is a fixed function of the previous token (``table``: a V x V
    matrix of log-probabilities), as a fairseq encoder-decoder with an incremental decoder."""

    @staticmethod
    def build(dictionary, table, by_position=False):
        """``by_position``: ``table`` is a steps x V matrix, row t the log-probabilities of step t whatever came
        before (a script without ties, where a token's successor would depend on where it stands)."""
        from fairseq.models import FairseqEncoder, FairseqEncoderDecoderModel, FairseqIncrementalDecoder

        class Encoder(FairseqEncoder):
            def forward(self, src_tokens, src_lengths=None, **kwargs):
                return {"src_tokens": src_tokens}

            def reorder_encoder_out(self, encoder_out, new_order):
                return {"src_tokens": encoder_out["src_tokens"].index_select(0, new_order)}

        class Decoder(FairseqIncrementalDecoder):
            def forward(self, prev_output_tokens, encoder_out=None, incremental_state=None, **kwargs):
                steps = torch.arange(prev_output_tokens.size(1)).expand_as(prev_output_tokens)  # B x T
                if incremental_state is not None:
                    prev_output_tokens, steps = prev_output_tokens[:, -1:], steps[:, -1:]
                logits = table[steps] if by_position else table[prev_output_tokens]  # B x T x V
                src_len = encoder_out["src_tokens"].size(1)
                attn = torch.full((*prev_output_tokens.shape, src_len), 1.0 / src_len)  # B x T x S
                return logits, {"attn": [attn]}

            def reorder_incremental_state(self, incremental_state, new_order):
                pass

            def max_positions(self):
                return 1000

        class Model(FairseqEncoderDecoderModel):
            def get_normalized_probs(self, net_output, log_probs, sample=None):
                return torch.log_softmax(net_output[0], dim=-1)

        return Model(Encoder(dictionary), Decoder(dictionary))


def loop_table(dictionary, cycle):
    """Log-probabilities where after each token of ``cycle`` its successor in the cycle is likely (0.7), </s> is
    unlikely and every other regular word shares the rest (after the start symbol: the cycle's first token)."""
    size = len(dictionary)
    table = torch.full((size, size), -8.0)
    table[:, dictionary.eos()] = -30.0
    table[:, dictionary.pad()] = -1e9
    for prev, nxt in zip([dictionary.eos()] + cycle, cycle + cycle[:1]):
        table[prev, nxt] = 2.0
    return table


def position_table(dictionary, cycle, steps):
    """Log-probabilities where step t's likely token (2.0) is cycle[t mod len], </s> unlikely and every other
    regular word shares the rest: the cycle, even where a token of it has two successors."""
    table = torch.full((steps, len(dictionary)), -8.0)
    table[:, dictionary.eos()] = -30.0
    table[:, dictionary.pad()] = -1e9
    for t in range(steps):
        table[t, cycle[t % len(cycle)]] = 2.0
    return table


@pytest.fixture
def loop_setup():
    dictionary = tiny_dictionary(words="a b c d e f g , .", num_markers=2)
    from fairseq_plugins.text.markers import marker

    ids = {w: dictionary.index(w) for w in ["a", "b", "c", ","]}
    ids["m0"] = dictionary.index(marker(0))
    src = torch.tensor([[ids["a"], ids["b"], dictionary.eos()]])
    return dictionary, ids, src, torch.tensor([3])


def best_tokens(finalized, eos):
    return [t for t in finalized[0][0]["tokens"].tolist() if t != eos]


def test_a_loop_repeats_trigrams_without_blocking_and_none_with_it(loop_setup):
    dictionary, ids, src, lengths = loop_setup
    cycle = [ids["a"], ids["b"], ids["c"], ids["m0"]]  # a b c <oov-0> a b c <oov-0> ...
    model = ScriptedModel.build(dictionary, loop_table(dictionary, cycle))
    options = dict(dictionary=dictionary, models=[model], min_len=12, max_len_b=12)
    free = best_tokens(generate(build(**options), src, lengths), dictionary.eos())
    assert len(free) == 12 and free[:8] == cycle + cycle and has_repeat(free)
    blocked = best_tokens(generate(build(**options, block_ngram_repeat=3), src, lengths), dictionary.eos())
    assert len(blocked) == 12 and not has_repeat(blocked)
    # the task option and fairseq's own --no-repeat-ngram-size do the same
    via_task = best_tokens(generate(build({"block_ngram_repeat": 3}, **options), src, lengths), dictionary.eos())
    via_fairseq = best_tokens(generate(build(**options, no_repeat_ngram_size=3), src, lengths), dictionary.eos())
    assert via_task == blocked == via_fairseq


def test_ignored_tokens_may_repeat(loop_setup):
    dictionary, ids, src, lengths = loop_setup
    cycle = [ids["a"], ids[","], ids["b"], ids[","]]  # a , b , a , b , ...: every bigram contains ","
    model = ScriptedModel.build(dictionary, position_table(dictionary, cycle, 16), by_position=True)
    options = dict(dictionary=dictionary, models=[model], min_len=10, max_len_b=10, block_ngram_repeat=2)
    ignored = best_tokens(generate(build(**options, block_ignore=","), src, lengths), dictionary.eos())
    unblocked = dict(options, block_ngram_repeat=0)
    assert ignored == best_tokens(generate(build(**unblocked), src, lengths), dictionary.eos())  # nothing blocked
    assert len(ignored) == 10 and has_repeat(ignored, n=2)
    strict = best_tokens(generate(build(**options), src, lengths), dictionary.eos())
    assert not has_repeat(strict, n=2)


def test_unk_is_never_blocked(loop_setup):
    dictionary, ids, src, lengths = loop_setup
    unk = dictionary.unk()
    cycle = [unk, ids["a"]]  # <unk> a <unk> a ...: each <unk> is another unknown word
    model = ScriptedModel.build(dictionary, loop_table(dictionary, cycle))
    options = dict(dictionary=dictionary, models=[model], min_len=8, max_len_b=8, block_ngram_repeat=2,
                   allow_unk=True)
    assert best_tokens(generate(build(**options), src, lengths), dictionary.eos()) == (cycle * 4)[:8]


@pytest.mark.parametrize("fairseq_loop", [False, True], ids=["project_loop", "fairseq_loop"])
def test_unk_is_never_generated_unless_allowed(loop_setup, fairseq_loop):
    """A model whose likeliest word is always <unk>: the search writes the next-best word instead, on both loops;
    --allow-unk (a task option or a generation option) gives the old search back."""
    dictionary, ids, src, lengths = loop_setup
    unk = dictionary.unk()
    table = loop_table(dictionary, [unk, ids["a"]])
    table[:, unk] = 5.0
    model = ScriptedModel.build(dictionary, table)
    options = dict(dictionary=dictionary, models=[model], min_len=6, max_len_b=6, fairseq_beam_search=fairseq_loop)
    banned = best_tokens(generate(build(**options), src, lengths), dictionary.eos())
    assert len(banned) == 6 and unk not in banned
    allowed = best_tokens(generate(build(**options, allow_unk=True), src, lengths), dictionary.eos())
    assert allowed == [unk] * 6
    assert best_tokens(generate(build({"allow_unk": True}, **options), src, lengths), dictionary.eos()) == allowed


@pytest.mark.parametrize("fairseq_loop", [False, True], ids=["project_loop", "fairseq_loop"])
def test_a_doubled_word_is_blocked_where_trigram_blocking_lets_it_through(loop_setup, fairseq_loop):
    """A model that writes every word twice ("a a b b c c ..."): trigram blocking keeps the doubled words,
    --block-immediate-repeat 1 (a generation or a task option) writes no word twice in a row, on both loops; the
    tokens of --block-ignore may still follow themselves."""
    dictionary, ids, src, lengths = loop_setup
    doubled = [ids["a"], ids["a"], ids["b"], ids["b"], ids["c"], ids["c"], ids[","], ids[","]]
    model = ScriptedModel.build(dictionary, position_table(dictionary, doubled, 16), by_position=True)
    options = dict(dictionary=dictionary, models=[model], min_len=8, max_len_b=8, fairseq_beam_search=fairseq_loop)

    def immediate_repeats(tokens):
        return [a for a, b in zip(tokens, tokens[1:]) if a == b]

    trigram = best_tokens(generate(build(**options, block_ngram_repeat=3), src, lengths), dictionary.eos())
    assert trigram == doubled
    both = best_tokens(generate(build(**options, block_ngram_repeat=3, block_immediate_repeat=1), src, lengths),
                       dictionary.eos())
    assert len(both) == 8 and not immediate_repeats(both) and not has_repeat(both)
    alone = best_tokens(generate(build({"block_immediate_repeat": 1}, **options), src, lengths), dictionary.eos())
    assert len(alone) == 8 and not immediate_repeats(alone)
    ignoring = best_tokens(generate(build(**options, block_immediate_repeat=1, block_ignore=","), src, lengths),
                           dictionary.eos())
    assert immediate_repeats(ignoring) == [ids[","]]
    with pytest.raises(ValueError, match=r"--block-immediate-repeat must be 1 \(on\) or 0 \(off\), not 2"):
        build(**options, block_immediate_repeat=2)


def test_the_sentence_separator_is_never_blocked():
    """Every summary sentence ends in ". <q>": the separator may follow its second "." although the bigram
    repeats, while a repeated bigram of words ("a .") is still blocked."""
    dictionary = tiny_dictionary(words="a b c . <q>", num_markers=0)
    ids = {w: dictionary.index(w) for w in ["a", "b", ".", "<q>"]}
    src, lengths = torch.tensor([[ids["a"], ids["b"], dictionary.eos()]]), torch.tensor([3])
    cycle = [ids["a"], ids["."], ids["<q>"], ids["b"], ids["."], ids["<q>"]]
    model = ScriptedModel.build(dictionary, position_table(dictionary, cycle, 16), by_position=True)
    options = dict(dictionary=dictionary, models=[model], min_len=8, max_len_b=8, block_ngram_repeat=2)
    blocked = best_tokens(generate(build(**options), src, lengths), dictionary.eos())
    assert blocked[:6] == cycle and blocked[6] == ids["a"] and blocked[7] != ids["."]


def test_blocking_changes_nothing_when_no_ngram_can_repeat():
    """Every continuation is a token larger than the previous one, so no hypothesis ever repeats a token:
    all finished hypotheses, their scores and positional scores are identical with and without blocking."""
    dictionary = tiny_dictionary(words=" ".join(f"w{i}" for i in range(60)), num_markers=0)
    size = len(dictionary)
    torch.manual_seed(0)
    table = torch.full((size, size), -1e9)
    for prev in range(size):
        nxt = [w for w in range(dictionary.nspecial, size) if w > prev][:14]
        table[prev, nxt] = torch.randn(len(nxt))
        table[prev, dictionary.eos()] = -4.0
    table[dictionary.eos(), dictionary.nspecial:dictionary.nspecial + 14] = torch.randn(14)
    model = ScriptedModel.build(dictionary, table)
    src = torch.tensor([[10, 11, dictionary.eos()], [dictionary.pad(), 12, dictionary.eos()]])
    lengths = torch.tensor([3, 2])
    options = dict(dictionary=dictionary, models=[model], min_len=3, max_len_b=9)
    plain = generate(build(**options), src, lengths)
    for n in (1, 2, 3):
        blocked = generate(build(**options, block_ngram_repeat=n), src, lengths)
        for hypos_a, hypos_b in zip(plain, blocked):
            assert len(hypos_a) == len(hypos_b) == 5
            for a, b in zip(hypos_a, hypos_b):
                assert torch.equal(a["tokens"], b["tokens"])
                assert torch.equal(a["positional_scores"], b["positional_scores"]) and a["score"] == b["score"]


# ----------------------------------------------------------------------------------------------- real models
def copy_only_model(dictionary):
    """A tiny pgn_lstm that (almost) only copies, with uniform attention: it copies the most frequent source
    token at every step."""
    model = tiny_model(dictionary).eval()
    with torch.no_grad():
        model.decoder.attention.v.weight.zero_()  # equal scores: uniform attention
        switch = model.decoder.readout.switch.proj
        switch.weight.zero_()
        switch.bias.fill_(-30.0)  # p_gen ~ 1e-13
    return model


def test_a_repeated_copied_marker_is_blocked():
    from fairseq_plugins.text.markers import marker

    dictionary = tiny_dictionary()
    m0 = dictionary.index(marker(0))
    model = copy_only_model(dictionary)
    src = torch.tensor([[m0, m0, m0, dictionary.index("a"), dictionary.eos()]])
    lengths = torch.tensor([5])
    options = dict(dictionary=dictionary, models=[model], min_len=6, max_len_b=6)
    free = best_tokens(generate(build(**options), src, lengths), dictionary.eos())
    assert free == [m0] * 6  # the copied OOV word, over and over
    blocked = best_tokens(generate(build(**options, block_ngram_repeat=3), src, lengths), dictionary.eos())
    assert blocked[:3] == [m0] * 3 and not has_repeat(blocked)


@pytest.mark.parametrize("arch", ["pgn_lstm", "global_gate_gru"])
def test_every_architecture_generates_without_repeated_trigrams(arch):
    """Random tiny models, the beam-reorder shortcut included: blocked outputs never repeat a trigram (except
    trigrams with <unk>, each of which is another unknown word), one summary per input."""
    from conftest import tiny_gru

    dictionary = tiny_dictionary(words="a b c", num_markers=2)  # 3 words: unblocked outputs loop
    torch.manual_seed(3)
    model = (tiny_model(dictionary) if arch == "pgn_lstm" else tiny_gru(dictionary)).eval()
    src, lengths, _ = tiny_batch(dictionary)
    options = dict(dictionary=dictionary, models=[model], min_len=10, max_len_b=10)
    blocked = generate(build(**options, block_ngram_repeat=3), src, lengths)
    assert len(blocked) == 2
    for hypos in blocked:
        for hypo in hypos:
            if math.isfinite(float(hypo["score"])):
                tokens = [t for t in hypo["tokens"].tolist() if t != dictionary.eos()]
                assert not has_repeat(tokens, ignore={dictionary.unk()})  # <unk> n-grams may repeat


# ----------------------------------------------------------------------------------------------- coverage penalty
def test_coverage_penalty_score_equals_the_formula():
    """score(beta) = score(0) + beta * sum_i log(min(sum_t a_i^t, 1)) with a^t recomputed by teacher forcing."""
    from fairseq_plugins.inference.hub import teacher_force

    dictionary = tiny_dictionary()
    torch.manual_seed(5)
    model = tiny_model(dictionary).eval()
    src, lengths, _ = tiny_batch(dictionary)
    options = dict(dictionary=dictionary, models=[model], beam=1, min_len=2, max_len_b=3)
    plain = generate(build(**options), src, lengths)
    beta = 0.7
    penalised = generate(build(**options, coverage_penalty=beta), src, lengths)
    penalties = []
    for row, (a, b) in enumerate(zip(plain, penalised)):
        assert torch.equal(a[0]["tokens"], b[0]["tokens"])  # beam 1: the penalty re-ranks nothing
        source = src[row][src[row].ne(dictionary.pad())]  # the real tokens, </s> included
        attention = teacher_force(model, source, a[0]["tokens"])["attention"]  # T x S
        coverage = torch.tensor(attention).double().sum(dim=0)  # S
        expected = beta * torch.log(coverage.clamp(max=1.0)).sum()
        assert float(b[0]["score"]) == pytest.approx(float(a[0]["score"]) + float(expected), abs=1e-4)
        penalties.append(float(expected))
    assert min(penalties) < 0  # the 5-token source is not fully covered: the test compares a real penalty


def test_coverage_penalty_reranks_finished_hypotheses():
    dictionary = tiny_dictionary()
    torch.manual_seed(6)
    model = tiny_model(dictionary).eval()
    src, lengths, _ = tiny_batch(dictionary)
    options = dict(dictionary=dictionary, models=[model], beam=4, min_len=2, max_len_b=8)
    for hypos in generate(build(**options, coverage_penalty=2.0), src, lengths):
        scores = [float(h["score"]) for h in hypos]
        assert scores == sorted(scores, reverse=True) and all("coverage_penalty" in h for h in hypos)


def test_coverage_penalty_finds_the_real_positions_of_left_padded_attention():
    from fairseq_plugins.generation.generator import coverage_penalty

    attention = torch.tensor([[0.0, 0.0], [0.0, 0.0], [0.5, 0.2], [0.5, 0.8]])  # S=4 x T=2, 2 pads first
    expected = math.log(0.7) + math.log(1.0)
    assert float(coverage_penalty(attention, 2, 1.0)) == pytest.approx(expected)
    assert float(coverage_penalty(attention.flip(0), 2, 1.0)) == pytest.approx(expected)  # right-padded


def test_bad_generator_options_are_reported():
    dictionary = tiny_dictionary()
    model = tiny_model(dictionary).eval()
    options = dict(dictionary=dictionary, models=[model])
    with pytest.raises(ValueError, match="--block-ignore needs --block-ngram-repeat"):
        build(**options, block_ignore=",")
    with pytest.raises(ValueError, match="disagree"):
        build(**options, block_ngram_repeat=3, no_repeat_ngram_size=2)
    with pytest.raises(ValueError, match="--coverage-penalty must be"):
        build(**options, coverage_penalty=-1.0)
    with pytest.raises(ValueError, match="n >= 1"):
        from fairseq_plugins.generation.ngram_blocking import NGramBlocker

        NGramBlocker(0)


# ----------------------------------------------------------------------------------------------- empty documents
@pytest.mark.parametrize("extra", [{}, {"coverage_penalty": 0.5}, {"print_alignment": "hard"}],
                         ids=["plain", "coverage_penalty", "alignment"])
def test_an_empty_source_gets_the_empty_summary_and_its_batch_mates_are_untouched(extra, caplog):
    """A source of ``</s>`` alone (an empty input line) gets ``</s>`` as every hypothesis, score 0, with a line in
    the log, whatever min_len says; the other documents of its batch get what they get alone."""
    import logging

    dictionary = tiny_dictionary(words="a b c", num_markers=2)
    torch.manual_seed(3)
    model = tiny_model(dictionary).eval()
    pad, eos = dictionary.pad(), dictionary.eos()
    src = torch.tensor([[pad, pad, pad, eos], [4, 5, 6, eos]])
    options = dict(dictionary=dictionary, models=[model], min_len=5, max_len_b=8, **extra)
    with caplog.at_level(logging.INFO, logger="fairseq_plugins.generation.generator"):
        together = generate(build(**options), src, torch.tensor([1, 4]))
    alone = generate(build(**options), src[1:], torch.tensor([4]))
    assert len(together) == 2
    for hypo in together[0]:
        assert hypo["tokens"].tolist() == [eos] and float(hypo["score"]) == 0.0
    assert [h["tokens"].tolist() for h in together[1]] == [h["tokens"].tolist() for h in alone[0]]
    assert len(together[1][0]["tokens"]) > 1
    assert any("1 empty document in this batch: empty summary" in r.getMessage() for r in caplog.records)
