"""self_critical_rouge: free-running sampling, the reward, eq 15's direction, eq 16's mixture with the ML loss,
and RL updates through plain fairseq-train from an ML checkpoint for every architecture."""
import json
import logging
import math
import re
from pathlib import Path

import pytest
import torch

from conftest import (assert_same_gradients, run, slice_corpus, stub_task, tiny_dictionary, tiny_gru,
                      tiny_model)
from fairseq_plugins.criterions.focal_copy_coverage import FocalCopyCoverageCriterion
from fairseq_plugins.criterions.nonfinite import NonFiniteLossError
from fairseq_plugins.criterions.self_critical_rouge import (
    SelfCriticalRougeConfig,
    SelfCriticalRougeCriterion,
    sentence_rewards,
)
from fairseq_plugins.generation.sampling import (
    FreeRun,
    choose,
    draw,
    free_run,
    sample_and_greedy,
    teacher_forcing_input,
)
from fairseq_plugins.scoring.rouge_python import RougeScorer
from fairseq_plugins.text.markers import marker

ROOT = Path(__file__).resolve().parent.parent
DICT = tiny_dictionary()  # <s>=0 <pad>=1 </s>=2 <unk>=3, a..g = 4..10, <oov-0..3> = 11..14
BOS, PAD, EOS, UNK = DICT.bos(), DICT.pad(), DICT.eos(), DICT.unk()
M0 = DICT.index(marker(0))
A, B, C, D, E = (DICT.index(w) for w in "abcde")


Task = stub_task(DICT, skips_nonfinite_updates=True)


def criterion(**options) -> SelfCriticalRougeCriterion:
    defaults = dict(focal_alpha=1.0, focal_gamma=0.0, coverage_lambda=1.0, loss_average="sequence",
                    on_nonfinite="stop", rl_max_len_b=6)
    defaults.update(options)
    return SelfCriticalRougeCriterion(Task(), SelfCriticalRougeConfig(**defaults))


def focal(**options) -> FocalCopyCoverageCriterion:
    args = dict(focal_alpha=1.0, focal_gamma=0.0, coverage_lambda=1.0, loss_average="sequence", sentence_avg=False)
    args.update(options)
    return FocalCopyCoverageCriterion(Task(), **args)


def batch(target=None):
    """Two documents (the second left-padded, as fairseq collates sources), both with a copyable marker."""
    src = torch.tensor([[A, B, M0, C, EOS], [PAD, PAD, D, M0, EOS]])
    target = torch.tensor([[A, M0, B, EOS], [M0, E, EOS, PAD]]) if target is None else target
    return {"net_input": {"src_tokens": src, "src_lengths": torch.tensor([5, 3]),
                          "prev_output_tokens": teacher_forcing_input(target, PAD, EOS)},
            "target": target, "ntokens": int(target.ne(PAD).sum()), "id": torch.tensor([0, 1])}


def run_of(rows) -> FreeRun:
    """A FreeRun of hand-made summaries (each row its tokens, </s> included when it has one)."""
    width = max(len(r) for r in rows)
    tokens = torch.tensor([r + [PAD] * (width - len(r)) for r in rows])
    return FreeRun(tokens, torch.tensor([len(r) for r in rows]), torch.zeros(tokens.shape),
                   torch.zeros(len(rows), dtype=torch.bool))


def sample_log_prob(model, sample, rows) -> torch.Tensor:
    """sum_t log p(y_t | y_<t, x) of each row, from the full distribution (independent of the criterion)."""
    tokens = run_of(rows).tokens
    net_input = dict(sample["net_input"], prev_output_tokens=teacher_forcing_input(tokens, PAD, EOS))
    log_probs = model.get_normalized_probs(model(**net_input), log_probs=True)  # B x T x V
    picked = log_probs.gather(2, tokens.unsqueeze(2)).squeeze(2)
    return (picked * tokens.ne(PAD)).sum(dim=1)


@pytest.fixture(params=["pgn", "pgn_no_coverage", "gru"])
def model(request):
    torch.manual_seed(3)
    if request.param == "gru":
        return tiny_gru(DICT).train()
    return tiny_model(DICT, no_coverage=request.param == "pgn_no_coverage").train()


# ---------------------------------------------------------------------------------------------- sampling
def scripted_model(table):
    """A fairseq encoder-decoder model whose next-token distribution is table[previous token], a fixed V x V
    table, whatever the source (a Markov chain started from </s>)."""
    from fairseq.models import FairseqEncoder, FairseqEncoderDecoderModel, FairseqIncrementalDecoder

    class Encoder(FairseqEncoder):
        def forward(self, src_tokens, src_lengths=None, **unused):
            return {"rows": torch.arange(src_tokens.size(0))}

        def reorder_encoder_out(self, encoder_out, new_order):
            return {"rows": encoder_out["rows"].index_select(0, new_order)}

    class Decoder(FairseqIncrementalDecoder):
        def __init__(self):
            super().__init__(DICT)
            self.register_buffer("log_table", table.log())

        def forward(self, prev_output_tokens, encoder_out=None, incremental_state=None, **unused):
            if incremental_state is not None:
                prev_output_tokens = prev_output_tokens[:, -1:]
            return self.log_table[prev_output_tokens], {"attn": None}  # B x T x V logits

    return FairseqEncoderDecoderModel(Encoder(DICT), Decoder())


def markov_table():
    table = torch.full((len(DICT), len(DICT)), 1.0 / len(DICT))
    rows = {
        EOS: {A: 0.45, B: 0.30, C: 0.10, UNK: 0.05, PAD: 0.06, BOS: 0.04},  # the first step
        A: {EOS: 1.0},
        B: {D: 0.7, EOS: 0.3},
        C: {C: 1.0},  # never ends: cut at the length limit
        UNK: {EOS: 1.0},
        D: {EOS: 1.0},
    }
    for prev, probs in rows.items():
        table[prev] = 0.0
        for token, p in probs.items():
            table[prev, token] = p
    return table


def test_sampling_a_known_table_gives_its_frequencies():
    n = 6000
    table = markov_table()
    model = scripted_model(table)
    net_input = {"src_tokens": torch.full((n, 2), A), "src_lengths": torch.full((n,), 2)}
    greedy = torch.zeros(n, dtype=torch.bool)
    greedy[:10] = True
    run = free_run(model, net_input, greedy, torch.full((n,), 4), generator=torch.Generator().manual_seed(0))
    tokens = run.tokens[10:]
    assert not torch.isin(tokens, torch.tensor([BOS])).any() and not tokens[:, 0].eq(PAD).any()
    assert tokens.size(1) == 4

    allowed = 1.0 - 0.06 - 0.04  # padding and <s> are never drawn: the rest is renormalised
    first = tokens[:, 0]
    for token, p in ((A, 0.45), (B, 0.30), (C, 0.10), (UNK, 0.05)):
        share, expected = first.eq(token).float().mean().item(), p / allowed
        assert abs(share - expected) < 5 * math.sqrt(expected * (1 - expected) / len(first)), (token, share)
    after_b = tokens[first.eq(B), 1]  # the sampled token is fed back: the second step follows table[b]
    share_d = after_b.eq(D).float().mean().item()
    assert abs(share_d - 0.7) < 5 * math.sqrt(0.21 / len(after_b))
    assert set(after_b.tolist()) == {D, EOS}

    lengths = run.lengths[10:]
    assert torch.equal(tokens[first.eq(A)][:, :2], torch.tensor([[A, EOS]]).expand(int(first.eq(A).sum()), 2))
    assert (lengths[first.eq(A)] == 2).all() and (tokens[first.eq(A)][:, 2:] == PAD).all()
    cut = first.eq(C)  # c c c c: 4 tokens, no </s> forced
    assert (lengths[cut] == 4).all() and (tokens[cut] == C).all()
    # log p of each decoded token is the model's own (unrestricted) probability
    torch.testing.assert_close(run.log_probs[10:][first.eq(A), 0], torch.full((int(first.eq(A).sum()),),
                                                                               math.log(0.45)))
    assert torch.equal(run.tokens[:10, :2], torch.tensor([[A, EOS]]).expand(10, 2))  # greedy rows: argmax


@pytest.mark.parametrize("drawn", [[], [0, 1, 2, 3, 4, 5, 6], [1, 4, 6]])
def test_a_choice_flags_broken_rows_and_never_takes_padding_or_bos(drawn):
    """The per-step choice: argmax or a draw, padding and <s> never; a row with a NaN, an infinity or a negative
    value anywhere (its padding and <s> columns included) is bad and ends with </s>, and so does a row with no
    mass left; the other rows are untouched by them."""
    probs = torch.zeros(7, len(DICT))
    probs[:, A], probs[:, B], probs[:, PAD], probs[:, BOS] = 0.3, 0.1, 0.5, 0.1  # padding would win an argmax
    probs[1, C] = float("nan")
    probs[2, PAD] = float("inf")
    probs[3, D] = -0.2
    probs[4, BOS] = float("nan")
    probs[5, :] = 0.0
    probs[5, PAD] = 1.0  # only padding: nothing to choose from, but not broken
    choice, bad = choose(probs, torch.tensor(drawn, dtype=torch.long), PAD, EOS, BOS,
                         torch.Generator().manual_seed(0))
    assert bad.tolist() == [False, True, True, True, True, False, False]
    assert choice[1:6].tolist() == [EOS] * 5
    for row in (0, 6):
        assert choice[row] == A if row not in drawn else choice[row] in (A, B)


def test_a_draw_stays_on_words_of_positive_probability_at_the_edge(monkeypatch):
    """u * total can never reach the total with u < 1, but a uniform of exactly 1 (outside torch.rand's range)
    still lands on the last word of positive probability, not on the zeros after it."""
    probs = torch.tensor([[0.0, 0.25, 0.0, 0.75, 0.0, 0.0], [0.5, 0.0, 0.0, 0.0, 0.0, 0.0]])
    monkeypatch.setattr(torch, "rand", lambda shape, generator=None, dtype=None, device=None:
                        torch.ones(shape, dtype=dtype))
    assert draw(probs).tolist() == [3, 0]
    monkeypatch.setattr(torch, "rand", lambda shape, generator=None, dtype=None, device=None:
                        torch.zeros(shape, dtype=dtype))
    assert draw(probs).tolist() == [1, 0]  # u = 0: the first word of positive probability


def looping_table(floor: float = 0.0):
    """a b a b ... by argmax (never </s>); from b, d (then </s>) is the second choice; every other token
    ``floor`` (before normalising)."""
    table = torch.full((len(DICT), len(DICT)), floor)
    for prev, probs in {EOS: {A: 1.0}, A: {B: 0.6, EOS: 0.4}, B: {A: 0.6, D: 0.4}, D: {EOS: 1.0}}.items():
        for token, p in probs.items():
            table[prev, token] = p
    table[C] = table[E] = 1.0
    return table / table.sum(dim=1, keepdim=True)


def repeats_a_trigram(row) -> bool:
    trigrams = [tuple(row[i:i + 3]) for i in range(len(row) - 2)]
    return len(set(trigrams)) < len(trigrams)


@pytest.mark.parametrize("score", [False, True])
def test_the_greedy_baseline_can_be_blocked_as_beam_search_is_and_the_samples_never_are(score):
    """--rl-baseline-block-ngram 3: y^g repeats no trigram (here: a b a b d </s> instead of a b a b ... to the
    limit); the samples are drawn from the unblocked distribution (some repeat a trigram), with their own log p."""
    from fairseq_plugins.generation.ngram_blocking import NGramBlocker

    n = 300
    model = scripted_model(looping_table())
    net_input = {"src_tokens": torch.full((n, 2), A), "src_lengths": torch.full((n,), 2)}
    limit = torch.full((n,), 10)
    with torch.no_grad():
        plain = sample_and_greedy(model, net_input, limit, generator=torch.Generator().manual_seed(1))[1]
        sampled, greedy = sample_and_greedy(model, net_input, limit, generator=torch.Generator().manual_seed(1),
                                            blocker=NGramBlocker(3), score=score)
    assert plain.tokens[0].tolist() == [A, B] * 5 and (plain.lengths == 10).all()
    assert greedy.tokens.tolist() == [[A, B, A, B, D, EOS]] * n
    assert sum(repeats_a_trigram(row) for row in sampled.tokens.tolist()) > n // 20
    expected = torch.log(looping_table()[teacher_forcing_input(sampled.tokens, PAD, EOS), sampled.tokens])
    decoded = sampled.tokens.ne(PAD)
    torch.testing.assert_close(sampled.log_probs[decoded], expected[decoded])


def test_the_criterion_blocks_its_greedy_baseline_when_asked():
    scr = criterion(rl_baseline_block_ngram=3, rl_max_len_b=10, coverage_lambda=0.0)
    seen = spy_on_rewards(scr)
    scr(scripted_model(looping_table(floor=1e-3)).eval(), batch())  # the ML loss needs p(reference) > 0
    assert seen["greedy"].tokens.tolist() == [[A, B, A, B, D, EOS]] * 2


VARIANTS = {
    "pgn": (tiny_model, {}),
    "pgn_no_copy_no_coverage": (tiny_model, {"no_copy": True, "no_coverage": True}),
    "pgn_luong_embed_norm": (tiny_model, {"decoder_readout": "luong", "embed_norm": True}),
    "pgn_two_layers_shared": (tiny_model, {"decoder_layers": 2, "encoder_layers": 2, "encoder_embed_dim": 7,
                                           "decoder_embed_dim": 7, "decoder_out_embed_dim": 7,
                                           "share_all_embeddings": True}),
    "gru": (tiny_gru, {}),
    "gru_ablation": (tiny_gru, {"no_selective_gate": True, "no_global_encoding": True}),
}


@pytest.mark.parametrize("variant", VARIANTS)
def test_teacher_forced_scoring_reproduces_the_sampled_probabilities(variant):
    """The criterion's log p(y^s_t) (one teacher-forced pass) equals the probability each token was sampled
    with (incremental decoding), markers included: the RL gradient is taken on the distribution sampled from."""
    torch.manual_seed(0)
    build, options = VARIANTS[variant]
    model = build(DICT, **options).eval()
    sample = batch()
    generator = torch.Generator().manual_seed(1)
    sampled, greedy = sample_and_greedy(model, sample["net_input"], torch.tensor([7, 7]), generator=generator)
    scored = criterion().sample_log_probs(model, sample, sampled)
    decoded = torch.arange(sampled.tokens.size(1)).unsqueeze(0) < sampled.lengths.unsqueeze(1)
    torch.testing.assert_close(scored, sampled.log_probs * decoded, atol=1e-5, rtol=1e-5)
    assert (sampled.log_probs[decoded] < 0).all()
    # greedy rows are the argmax path
    steps = criterion().sample_log_probs(model, sample, greedy)
    torch.testing.assert_close(steps, greedy.log_probs * (torch.arange(greedy.tokens.size(1)) <
                                                          greedy.lengths.unsqueeze(1)), atol=1e-5, rtol=1e-5)


def test_dropout_is_off_while_sampling_and_scoring_unless_asked():
    """With dropout in the model, y^s is drawn and scored by the same network (dropout off), and the model is
    back in training mode afterwards; --rl-dropout keeps dropout on (the two then differ)."""
    torch.manual_seed(0)
    model = tiny_model(DICT, dropout=0.5).train()
    sample = batch()
    scr = criterion()
    torch.manual_seed(1)
    sampled, _ = scr.decode(model, sample)
    assert model.training
    scored = scr.sample_log_probs(model, sample, sampled)
    assert model.training and scored.requires_grad
    decoded = torch.arange(sampled.tokens.size(1)).unsqueeze(0) < sampled.lengths.unsqueeze(1)
    torch.testing.assert_close(scored, sampled.log_probs * decoded, atol=1e-5, rtol=1e-5)
    noisy = criterion(rl_dropout=True).sample_log_probs(model, sample, sampled)
    assert not torch.allclose(noisy, scored, atol=1e-3)


@pytest.mark.parametrize("build", [tiny_model, tiny_gru])
def test_one_shared_encoder_pass_scores_y_s_with_the_probabilities_it_was_sampled_with(build):
    """The encoder runs once per update and its output serves the decode, the ML pass and the
    pass over y^s; with dropout in the model (off while sampling and scoring), y^s is still differentiated
    under exactly the distribution it was sampled from, and the gradient reaches the encoder."""
    torch.manual_seed(4)
    model = build(DICT, dropout=0.5).train()
    scr = criterion()
    calls, seen = [], {}
    encoder_forward = model.encoder.forward
    model.encoder.forward = lambda *args, **kwargs: calls.append(1) or encoder_forward(*args, **kwargs)
    score_sample = scr.score_sample

    def spy(model, sample, sampled, encoder_out=None):
        seen.update(shared=encoder_out is not None, sampled=sampled)
        seen["log_p"], net_output = score_sample(model, sample, sampled, encoder_out)
        return seen["log_p"], net_output

    scr.score_sample = spy
    loss, _, _ = scr(model, batch())
    assert len(calls) == 1 and seen["shared"]  # one encoder pass for the whole update
    sampled = seen["sampled"]
    decoded = torch.arange(sampled.tokens.size(1)).unsqueeze(0) < sampled.lengths.unsqueeze(1)
    torch.testing.assert_close(seen["log_p"].detach(), sampled.log_probs * decoded, atol=1e-5, rtol=1e-5)
    loss.backward()
    assert all(p.grad is not None and p.grad.abs().sum() > 0 for p in model.encoder.parameters() if p.requires_grad)


def teacher_forced(model, sample, run: FreeRun):
    """log p(y_t) (B x T) and decoder states (B x T x H) of a run's tokens from one ordinary teacher-forced pass,
    0 after each row's end: what a scored run must equal."""
    tokens = run.tokens
    net_output = model(**dict(sample["net_input"], prev_output_tokens=teacher_forcing_input(tokens, PAD, EOS)))
    decoded = torch.arange(tokens.size(1)).unsqueeze(0) < run.lengths.unsqueeze(1)  # B x T
    log_p = model.get_target_log_probs(net_output, tokens) * decoded
    return log_p, net_output[1]["decoder_states"] * decoded.unsqueeze(2)


def gradients(loss, model):
    return torch.autograd.grad(loss, list(model.parameters()), allow_unused=True)


@pytest.mark.parametrize("variant", ["pgn", "pgn_no_copy_no_coverage", "pgn_luong_embed_norm", "gru"])
def test_sampling_with_gradient_gives_the_teacher_forced_scores_states_and_gradients(variant):
    """``free_run(score=True)`` keeps the graph of the steps that drew y^s.  Its log p(y^s_t)
    and decoder states equal those of a teacher-forced pass over the same tokens, and so do the gradients of
    any function of them, with rows leaving the batch at different steps (limits 3 and 7)."""
    torch.manual_seed(6)
    build, options = VARIANTS[variant]
    model = build(DICT, **options).eval()
    sample = batch()
    src = {k: v for k, v in sample["net_input"].items() if k != "prev_output_tokens"}
    run = free_run(model, sample["net_input"], torch.zeros(2, dtype=torch.bool), torch.tensor([3, 7]),
                   generator=torch.Generator().manual_seed(2), encoder_out=model.encoder(**src), score=True)
    assert run.scored and run.log_probs.requires_grad and run.states.requires_grad
    assert run.lengths[0] <= 3
    log_p, states = teacher_forced(model, sample, run)
    torch.testing.assert_close(run.log_probs, log_p, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(run.states, states, atol=1e-5, rtol=1e-5)
    weights = torch.randn(log_p.shape)  # B x T
    directions = torch.randn(states.shape)  # B x T x H
    got = gradients((weights * run.log_probs).sum() + (directions * run.states).sum(), model)
    expected = gradients((weights * log_p).sum() + (directions * states).sum(), model)
    assert_same_gradients(got, expected, model)


def spy_on_rewards(scr) -> dict:
    """Keeps what the criterion's ``reward_factors`` saw and returned (sampled, greedy, factor)."""
    seen = {}
    reward_factors = scr.reward_factors

    def spy(sampled, greedy, target):
        seen.update(sampled=sampled, greedy=greedy)
        seen["factor"] = reward_factors(sampled, greedy, target)[0]
        return reward_factors(sampled, greedy, target)

    scr.reward_factors = spy
    return seen


@pytest.mark.parametrize("build", [tiny_model, tiny_gru])
def test_the_update_differentiates_y_s_in_the_steps_that_sampled_it(build):
    """--rl-score-in-sampling: the criterion's own decode, with dropout in the model (off while sampling), gives
    y^s scored (no teacher-forced pass over it), and the loss and its gradient equal eq 15 computed from an
    independent teacher-forced pass over the same y^s; by default y^s comes unscored (the teacher-forced pass)."""
    torch.manual_seed(7)
    model = build(DICT, dropout=0.5).train()
    scr = criterion(rl_gamma=1.0, rl_max_len_b=7, rl_timing=True, rl_score_in_sampling=True)
    seen = spy_on_rewards(scr)
    sample = batch()
    loss, _, log = scr(model, sample)
    assert seen["sampled"].scored and not seen["greedy"].scored
    got = gradients(loss, model)
    model.eval()  # the network y^s was sampled from: dropout off
    log_p, _ = teacher_forced(model, sample, seen["sampled"])
    expected = (seen["factor"].float() * log_p).sum()  # eq 15, summed over the batch
    torch.testing.assert_close(loss, expected, atol=1e-5, rtol=1e-5)
    assert_same_gradients(got, gradients(expected, model), model)
    default = criterion(rl_gamma=1.0, rl_max_len_b=7)
    seen = spy_on_rewards(default)
    default(model.train(), sample)
    assert not seen["sampled"].scored


@pytest.mark.parametrize("leave_out", [False, True])
def test_self_critical_cohesion_takes_the_sampled_summarys_states_from_the_sampling_steps(leave_out):
    """With --rl-score-in-sampling, self_critical_cohesion's ``sample_penalty`` (lambda L_SEM of y^s) reads the
    decoder states of the steps that sampled y^s: its value and gradient equal L_SEM of a teacher-forced pass over
    the same summaries.  --no-sample-cohesion leaves the term out of the loss and still logs it."""
    from fairseq_plugins.criterions.semantic_cohesion import (
        SelfCriticalCohesionConfig,
        SelfCriticalCohesionCriterion,
        semantic_cohesion,
    )

    words = tiny_dictionary("a b c d e f g .")
    dot = words.index(".")

    class DotTask(Task):
        target_dictionary = words

    torch.manual_seed(8)
    model = tiny_model(words, no_copy=True).eval()
    with torch.no_grad():
        model.decoder.output_projection.bias[dot] += 3.0  # summaries of several sentences
    scr = SelfCriticalCohesionCriterion(DotTask(), SelfCriticalCohesionConfig(
        focal_alpha=1.0, focal_gamma=0.0, coverage_lambda=1.0, on_nonfinite="stop", rl_gamma=1.0, rl_max_len_b=8,
        cohesion_lambda=0.5, cohesion_sentence_end=".", rl_score_in_sampling=True, no_sample_cohesion=leave_out))
    seen = spy_on_rewards(scr)
    sample = batch()
    loss, size, log = scr(model, sample)
    sampled = seen["sampled"]
    assert sampled.scored
    log_p, states = teacher_forced(model, sample, sampled)
    l_sem = semantic_cohesion(states, sampled.tokens, sampled.tokens.eq(dot), PAD, EOS, form="squared")  # B
    assert l_sem.sum() > 0, sampled.tokens  # some sample has two sentences
    torch.testing.assert_close(log["cohesion_sample"], l_sem.sum().detach(), atol=1e-6, rtol=1e-5)
    weight = 0.0 if leave_out else 0.5
    expected = (seen["factor"].float() * log_p).sum() + weight * l_sem.sum()  # gamma (L_rl + lambda L_SEM(y^s))
    torch.testing.assert_close(loss, expected, atol=1e-5, rtol=1e-5)
    assert_same_gradients(gradients(loss, model), gradients(expected, model), model)


def test_a_sampled_marker_round_trips_to_the_source_word(tmp_path, caplog):
    """A pointer model that only copies (p_gen = 0): the sample is made of the source's marker, which is fed
    back and scored as that document's marker, and the logged sample text shows the word behind it."""
    torch.manual_seed(0)
    model = tiny_model(DICT).train()
    from fairseq_plugins.modules.copy_mixture import GenerationSwitch

    switches = [m for m in model.modules() if isinstance(m, GenerationSwitch)]
    assert switches
    with torch.no_grad():
        for switch in switches:
            switch.proj.weight.zero_()
            switch.proj.bias.fill_(-60.0)  # p_gen = sigmoid(-60): every token is copied
    src = torch.tensor([[M0] * 6])  # no </s> to copy: P(<oov-0>) = 1 at every step
    target = torch.tensor([[M0, EOS]])
    sample = {"net_input": {"src_tokens": src, "src_lengths": torch.tensor([6]),
                            "prev_output_tokens": teacher_forcing_input(target, PAD, EOS)},
              "target": target, "ntokens": 2, "id": torch.tensor([1])}
    oov = tmp_path / "train.oov"
    oov.write_text("first\tdoc\nzyxwvut\n", encoding="utf-8")
    scr = criterion(rl_gamma=1.0, rl_log_samples=1, rl_oov_file=str(oov))
    with caplog.at_level(logging.INFO, logger="fairseq_plugins.criterions.self_critical_rouge"):
        loss, _, log = scr(model, sample)
    sampled_line = re.search(r"^\s+sample: (.*)$", caplog.text, flags=re.M)
    assert sampled_line, caplog.text
    assert sampled_line.group(1) == " ".join(["<oov-0=zyxwvut>"] * 6)  # up to --rl-max-len-b 6
    assert re.search(r"^\s+reference: <oov-0=zyxwvut>$", caplog.text, flags=re.M)
    assert torch.isfinite(loss) and log["reward_sample"] > 0  # the copied marker matched the reference's


# ---------------------------------------------------------------------------------------------- the reward
def test_rewards_equal_rouge_python_on_decoded_summaries(model):
    torch.manual_seed(5)
    sample = batch()
    scr = criterion()
    sampled, greedy = scr.decode(model, sample)
    _, reward_s, reward_g = scr.reward_factors(sampled, greedy, sample["target"])
    scorer = RougeScorer(stem=False)

    def text(ids):
        return " ".join(f"u{i}" if t == UNK else f"w{t}" for i, t in enumerate(ids) if t not in (PAD, EOS))

    for run, rewards in ((sampled, reward_s), (greedy, reward_g)):
        for row, (hyp, ref) in enumerate(zip(run.tokens.tolist(), sample["target"].tolist())):
            assert rewards[row].item() == scorer.score(text(ref), text(hyp))["rougeL"].fmeasure


# ---------------------------------------------------------------------------------------------- eq 15, eq 16
@pytest.mark.parametrize("loss_average", ["sequence", "token"])
def test_gamma_zero_is_focal_copy_coverage(model, loss_average):
    sample = batch()
    options = dict(focal_alpha=0.25, focal_gamma=1.0, coverage_lambda=0.7, loss_average=loss_average)
    torch.manual_seed(0)
    ml_loss, ml_size, ml_log = focal(**options)(model, sample)
    ml_loss.backward()
    ml_grads = {name: p.grad.clone() for name, p in model.named_parameters() if p.grad is not None}
    model.zero_grad()

    torch.manual_seed(0)
    loss, sample_size, log = criterion(rl_gamma=0.0, rl_mix="averages", **options)(model, sample)
    loss.backward()
    assert sample_size == ml_size
    torch.testing.assert_close(loss, ml_loss, rtol=0, atol=0)
    assert log["ml_loss"] == ml_log["loss"]
    for key in ("nll", "focal", "coverage", "p_gen"):
        assert log[key] == ml_log[key]
    rl_grads = {name: p.grad for name, p in model.named_parameters() if p.grad is not None}
    assert rl_grads.keys() == ml_grads.keys() and len(ml_grads) > 5
    for name in ml_grads:
        torch.testing.assert_close(rl_grads[name], ml_grads[name], rtol=0, atol=0, msg=name)


def inject(scr, sampled_rows, greedy_rows):
    """The seam: the criterion decodes these summaries instead of its own."""
    scr.decode = lambda model, sample, encoder_out=None: (run_of(sampled_rows), run_of(greedy_rows))
    return scr


def test_loss_is_eq_15_summed_over_the_batch(model):
    sample = batch(torch.tensor([[A, B, C, EOS], [D, E, EOS, PAD]]))
    sampled = [[A, B, C, EOS], [E, A, EOS]]  # ROUGE-L F1 1 and 0.5
    greedy = [[A, EOS], [D, E, EOS]]  # 0.5 (P 1, R 1/3) and 1
    scr = inject(criterion(rl_gamma=1.0), sampled, greedy)
    loss, sample_size, log = scr(model, sample)
    log_p = sample_log_prob(model, sample, sampled)
    reward_s, reward_g = torch.tensor([1.0, 0.5]), torch.tensor([0.5, 1.0])
    assert log["reward_sample"] == pytest.approx(1.5) and log["reward_greedy"] == pytest.approx(1.5)
    assert log["beat_baseline"] == 1 and log["sample_len"] == 5 and log["greedy_len"] == 3
    expected = ((reward_g - reward_s) * log_p).sum()  # (r(y^g) - r(y^s)) sum_t log p(y^s_t), per document
    torch.testing.assert_close(loss, expected, atol=1e-5, rtol=1e-5)
    assert sample_size == 2
    # token normalisation: the same sum over the number of sampled tokens (7), times fairseq's sample size
    loss_t, size_t, _ = inject(criterion(rl_gamma=1.0, rl_mix="averages", rl_normalization="token"), sampled,
                               greedy)(model, sample)
    torch.testing.assert_close(loss_t / size_t, expected / 7, atol=1e-6, rtol=1e-5)
    # eq 16 with --rl-mix averages: gamma mixes the two averages
    gamma = 0.25
    mixed, _, mixed_log = inject(criterion(rl_gamma=gamma, rl_mix="averages"), sampled, greedy)(model, sample)
    ml, _, _ = focal()(model, sample)
    torch.testing.assert_close(mixed, gamma * expected + (1 - gamma) * ml, atol=1e-5, rtol=1e-5)
    # eq 16 as the paper writes it (the default): both terms summed over each summary, averaged over documents
    paper, paper_size, _ = inject(criterion(rl_gamma=gamma), sampled, greedy)(model, sample)
    ml_sum, _, _ = focal(loss_average="token")(model, sample)  # the batch's sum of per-token terms
    assert paper_size == 2
    torch.testing.assert_close(paper, gamma * expected + (1 - gamma) * ml_sum, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("sample_wins", [True, False])
def test_one_sgd_step_raises_a_winning_sample_and_lowers_a_losing_one(sample_wins):
    torch.manual_seed(2)
    model = tiny_model(DICT).train()
    sample = batch(torch.tensor([[A, B, C, EOS], [D, E, A, EOS]]))
    good, bad = [[A, B, C, EOS], [D, E, A, EOS]], [[F_, EOS] for F_ in (E, B)]
    sampled, greedy = (good, bad) if sample_wins else (bad, good)
    scr = inject(criterion(rl_gamma=1.0), sampled, greedy)
    before = sample_log_prob(model, sample, sampled).detach()
    loss, _, log = scr(model, sample)
    assert (log["beat_baseline"] == 2) == sample_wins
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    after = sample_log_prob(model, sample, sampled).detach()
    if sample_wins:
        assert (after > before).all(), (before, after)
    else:
        assert (after < before).all(), (before, after)


def test_sentence_rewards_split_the_reward_and_reduce_to_eq_15_for_one_sentence(model):
    period = DICT.add_symbol(".")  # noqa: F841  (the dictionary now has a sentence end)
    try:
        prefix = torch.tensor([[0.0, 0.1, 0.3, 0.35, 0.45, 0.5, 0.7]])  # r of each prefix of "a . b c . d"
        tokens = torch.tensor([[A, period, B, C, period, D, EOS]])
        rewards, sentence = sentence_rewards(tokens, torch.tensor([6]), prefix, tokens.eq(period))
        torch.testing.assert_close(rewards, torch.tensor([[0.3, 0.2, 0.2]]))  # r(o_1..q) - r(o_1..q-1)
        assert sentence.tolist() == [[0, 0, 1, 1, 1, 2, 2]]  # </s> belongs to the last sentence

        sample = batch(torch.tensor([[A, B, period, C, EOS], [D, E, EOS, PAD, PAD]]))
        sampled = [[A, B, period, C, EOS], [D, period, EOS]]
        greedy = [[A, period, EOS], [D, E, EOS]]
        plain = inject(criterion(rl_gamma=1.0), sampled, greedy)
        split = inject(criterion(rl_gamma=1.0, rl_sentence_rewards=True), sampled, greedy)
        factor, reward_s, reward_g = split.reward_factors(run_of(sampled), run_of(greedy), sample["target"])
        full = RougeScorer(stem=False)
        # document 0: sentences "a b ." and "c"; the greedy's only sentence "a ." is the first one's baseline
        r1 = full.score("w4 w5 w15 w6", "w4 w5 w15")["rougeL"].fmeasure
        g1 = full.score("w4 w5 w15 w6", "w4 w15")["rougeL"].fmeasure
        assert factor[0].tolist() == pytest.approx([g1 - r1] * 3 + [0 - (reward_s[0].item() - r1)] * 2)
        assert (factor[0, :3].sum() / 3 + factor[0, 3:].sum() / 2).item() == pytest.approx(
            reward_g[0].item() - reward_s[0].item())

        one_sentence = [[A, B, C, EOS], [D, E, EOS]]
        plain_loss, _, _ = inject(criterion(rl_gamma=1.0), one_sentence, greedy)(model, sample)
        split_loss, _, _ = inject(criterion(rl_gamma=1.0, rl_sentence_rewards=True), one_sentence, greedy)(
            model, sample)
        assert plain is not split
        torch.testing.assert_close(split_loss, plain_loss)
    finally:
        DICT.symbols.pop()
        DICT.count.pop()
        del DICT.indices["."]


# ---------------------------------------------------------------------------------------------- logging, errors
def test_logged_metrics_mix_as_eq_16():
    from fairseq import metrics

    logs = [{"loss": 0.0, "ntokens": 7, "nsentences": 2, "sample_size": 2, "ml_loss": 6.0, "rl_loss": -1.0,
             "rl_norm": 2, "rl_docs": 2, "reward_sample": 0.8, "reward_greedy": 0.6, "beat_baseline": 1,
             "sample_len": 9, "greedy_len": 7, "focal": 1.0, "nll": 4.0, "coverage": 0.5, "p_gen": 5.0}]
    gamma = 0.9
    logs[0]["loss"] = gamma * logs[0]["rl_loss"] + (1 - gamma) * logs[0]["ml_loss"]
    with metrics.aggregate(new_root=True) as agg:
        SelfCriticalRougeCriterion.reduce_metrics(logs)
    values = {key: agg[key].avg for key in ("loss", "rl_loss", "ml_loss")}
    assert values["loss"] == pytest.approx(gamma * values["rl_loss"] + (1 - gamma) * values["ml_loss"], abs=2e-3)
    assert agg["reward_sample"].avg == pytest.approx(0.4) and agg["reward_greedy"].avg == pytest.approx(0.3)
    assert agg["beat_baseline"].avg == pytest.approx(0.5) and agg["sample_len"].avg == pytest.approx(4.5)
    assert agg["nll_loss"].avg == pytest.approx(4.0 / 7 / math.log(2), abs=1e-3)
    assert "nonfinite_skipped" not in agg


def poison_ml(scr):
    """NaN in the ML part's focal term, as test_nonfinite.py poisons focal_copy_coverage."""
    terms = scr.ml.token_terms

    def token_terms(model, net_output, target):
        values = terms(model, net_output, target)
        values["focal"] = values["focal"] * float("nan")
        return values

    scr.ml.token_terms = token_terms
    return scr


def test_non_finite_loss_stops_or_skips_as_focal_copy_coverage(caplog):
    torch.manual_seed(0)
    model = tiny_model(DICT).train()
    sample = batch()
    _, _, normal_log = criterion(on_nonfinite="skip")(model, sample)
    skip = poison_ml(criterion(on_nonfinite="skip"))
    skip.current_update = 5
    loss, sample_size, log = skip(model, sample)
    assert loss.item() == 0.0 and sample_size == 0 and log["nonfinite_skipped"] == 1
    assert normal_log["nonfinite_skipped"] == 0
    assert list(log) == list(normal_log) and all(type(log[k]) is type(normal_log[k]) for k in log)
    loss.backward()
    assert all(torch.count_nonzero(p.grad) == 0 for p in model.parameters())
    assert re.search(r"WARNING .*self_critical_rouge: non-finite loss nan at update 5 on a batch of 2 samples "
                     r"\(dataset ids 0, 1\); terms: rl_loss=[-\d.e]+, ml_loss=nan, focal=nan.*"
                     r"nonfinite_decode_rows=0\. Skipping", caplog.text)

    stop = poison_ml(criterion())
    stop.current_update = 5
    with pytest.raises(NonFiniteLossError, match=r"self_critical_rouge: non-finite loss nan at update 5 .*still "
                                                 r"those after update 4"):
        stop(model, sample)
    model.eval()  # validation always raises
    with pytest.raises(NonFiniteLossError, match=r"in validation after update 5"):
        skip(model, sample)


def test_a_non_finite_distribution_while_decoding_is_a_non_finite_batch():
    torch.manual_seed(0)
    model = tiny_model(DICT).train()
    sampled = run_of([[A, EOS], [B, EOS]])
    sampled.nonfinite[1] = True
    scr = criterion()
    scr.decode = lambda model, sample, encoder_out=None: (sampled, run_of([[A, EOS], [B, EOS]]))
    with pytest.raises(NonFiniteLossError, match=r"nonfinite_decode_rows=1"):
        scr(model, batch())
    # and the sampler reports it: a model whose distribution is NaN ends every row at once, flagged
    table = markov_table()
    table[EOS] = float("nan")
    run = free_run(scripted_model(table), {"src_tokens": torch.ones(3, 2, dtype=torch.long)},
                   torch.zeros(3, dtype=torch.bool), torch.full((3,), 4))
    assert run.nonfinite.all() and run.tokens.tolist() == [[EOS]] * 3


@pytest.mark.parametrize("options, message", [
    ({"rl_gamma": 1.5}, "--rl-gamma must be in"),
    ({"rl_normalization": "token"}, "--rl-normalization token averages L_rl over sampled tokens"),
    ({"rl_reward": "rouge7x"}, "--rl-reward"),
    ({"rl_max_len_b": 0}, "--rl-max-len-a 0.0 --rl-max-len-b 0"),
    ({"rl_sentence_rewards": True, "rl_sentence_end": "zz yy"}, "--rl-sentence-end 'zz yy': none of these"),
    ({"rl_baseline_block_ngram": -1}, "--rl-baseline-block-ngram must be >= 0"),
])
def test_bad_options_are_named(options, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        criterion(**options)


# ---------------------------------------------------------------------------------------------- end to end
@pytest.fixture(scope="module")
def data(tmp_path_factory):
    """The first 120 / 16 training / validation documents of the shipped SciTLDR-A sample, preprocessed."""
    work = tmp_path_factory.mktemp("rl_data")
    raw = slice_corpus("scitldr", work / "raw", (("train", 120), ("valid", 16), ("test", 4)))
    run(["./preprocess.sh", raw, work / "data"])
    return work / "data"


FAST = ["--dropout", "0", "--optimizer", "adam", "--max-tokens", "2500", "--log-format", "simple",
        "--log-interval", "1", "--seed", "3", "--no-epoch-checkpoints", "--num-workers", "0"]
RL_KEYS = ("rl_loss", "ml_loss", "reward_sample", "reward_greedy", "beat_baseline", "sample_len", "greedy_len",
           "nll_loss", "coverage")
FIELD = re.compile(r"(\w+)=(-?[\d.]+(?:e[-+]?\d+)?|inf|nan)")


def logged_updates(log: str) -> list:
    return [dict((k, float(v)) for k, v in FIELD.findall(line)) for line in log.splitlines()
            if "train_inner" in line and "num_updates=" in line]


@pytest.fixture(scope="module")
def ml_checkpoint(data, tmp_path_factory):
    """ml_checkpoint(arch): a 3-update ML model of that architecture (plain fairseq-train), trained once."""
    made = {}

    def train(arch):
        if arch not in made:
            save = tmp_path_factory.mktemp(f"ml_{arch}")
            run(["fairseq-train", data / "bin", "--user-dir", ROOT / "fairseq_plugins", "--task", "summarization",
                 "--arch", arch, *FAST, "--criterion", "focal_copy_coverage", "--lr", "0.002", "--max-update", "3",
                 "--disable-validation", "--save-dir", save])
            made[arch] = save / "checkpoint_last.pt"
        return made[arch]

    return train


@pytest.mark.slow
@pytest.mark.parametrize("arch", ["pgn_lstm_small", "global_gate_gru_small"])
def test_rl_updates_from_an_ml_checkpoint_through_fairseq_train(data, ml_checkpoint, tmp_path, arch):
    ml = ml_checkpoint(arch)
    rl = tmp_path / "rl"
    result = run(["fairseq-train", data / "bin", "--user-dir", ROOT / "fairseq_plugins", "--task", "summarization",
                  "--arch", arch, *FAST, "--criterion", "self_critical_rouge", "--lr", "0.0005",
                  "--rl-max-len-b", "12", "--rl-log-samples", "2", "--restore-file", ml, "--reset-optimizer",
                  "--reset-dataloader", "--max-update", "3", "--save-dir", rl])
    log = result.stdout + result.stderr
    assert re.search(rf"[Ll]oaded checkpoint {re.escape(str(ml))}", log), log[-3000:]
    updates = logged_updates(log)
    assert [u["num_updates"] for u in updates] == [1, 2, 3], log[-3000:]  # --reset-optimizer restarts the count
    for update in updates:
        assert all(key in update for key in RL_KEYS), update
        assert all(math.isfinite(v) for v in update.values()), update
        assert 0 <= update["reward_sample"] <= 1 and 0 <= update["beat_baseline"] <= 1
        assert 0 <= update["sample_len"] <= 12
    valid = re.search(r"valid on 'valid' subset .*\| reward_greedy ([\d.]+) \|.*\| greedy_len ([\d.]+) \|", log)
    assert valid, log[-3000:]  # validation decodes too
    assert re.search(r"self_critical_rouge sample at update \d+, dataset id \d+: reward [\d.]+ \(sample\)", log)
    assert (rl / "checkpoint_last.pt").exists()
    # summ-rl-stats decodes the validation set as that validation did (the last one, with the saved weights)
    stats = run(["summ-rl-stats", rl / "checkpoint_last.pt", "--data", data / "bin", "--max-len-b", "12",
                 "--max-tokens", "2500"])
    figures = json.loads(stats.stdout)
    assert figures["documents"] == 16 and 0 <= figures["greedy_at_limit"] <= 1
    assert abs(figures["reward_greedy"] - float(valid.group(1))) < 2e-3, (figures, valid.group(0))
    assert abs(figures["greedy_len"] - float(valid.group(2))) < 0.1, (figures, valid.group(0))


@pytest.mark.slow
def test_the_rl_config_fine_tunes_an_ml_model_through_train_sh(data, ml_checkpoint, tmp_path):
    """The documented one-liner: train.sh -c scitldr_small_rl DATA RL_DIR --finetune-from-model ML/checkpoint."""
    rl = tmp_path / "rl"
    args = ["./train.sh", "-c", "scitldr_small_rl", data, rl, "--finetune-from-model", ml_checkpoint("pgn_lstm_small"),
            "--disable-validation", "--log-interval", "1", "--max-tokens", "2500", "--rl-max-len-b", "10"]
    log = run([*args, "--max-update", "2"])
    text = log.stdout + log.stderr
    assert "loading pretrained model from" in text, text[-3000:]
    updates = logged_updates(text)
    assert [u["num_updates"] for u in updates] == [1, 2] and all(k in updates[0] for k in RL_KEYS)
    again = run([*args, "--max-update", "3"])  # the same command again: resumes the RL run, not the ML model
    assert "loading pretrained model from" not in again.stdout + again.stderr
    assert [u["num_updates"] for u in logged_updates(again.stdout + again.stderr)] == [3]


@pytest.mark.slow
def test_a_fine_tuning_run_gets_its_own_time_budget(data, ml_checkpoint, tmp_path):
    """A parent checkpoint that recorded 10 hours of training does not use up the child's
    --stop-time-hours: the fine-tuning run trains all its updates, and the log says which time it counts; a
    resumed run continues from its own recorded time."""
    import torch

    parent = tmp_path / "parent.pt"
    state = torch.load(ml_checkpoint("pgn_lstm_small"), map_location="cpu", weights_only=False)
    state["extra_state"]["previous_training_time"] = 10 * 3600.0
    torch.save(state, parent)
    child = tmp_path / "child"
    args = ["fairseq-train", data / "bin", "--user-dir", ROOT / "fairseq_plugins", "--task", "summarization",
            "--arch", "pgn_lstm_small", *FAST, "--criterion", "focal_copy_coverage", "--lr", "0.001",
            "--disable-validation", "--save-dir", child, "--finetune-from-model", parent, "--stop-time-hours", "0.5"]
    first = run([*args, "--max-update", "3"])
    log = first.stdout + first.stderr
    assert [u["num_updates"] for u in logged_updates(log)] == [1, 2, 3], log[-3000:]
    assert re.search(r"training time counts from 0 in this run .* the 10\.000 h recorded in .*parent\.pt", log)
    again = run([*args, "--max-update", "4"])  # resumes the child from its own checkpoint_last.pt
    log = again.stdout + again.stderr
    assert [u["num_updates"] for u in logged_updates(log)] == [4], log[-3000:]
    assert re.search(r"training time continues from the 0\.0\d\d h recorded in .*checkpoint_last\.pt", log), log[-3000:]
