"""Paulus, Xiong & Socher (2017)'s building blocks: the intra-temporal attention (eqs 1-5), the intra-decoder
attention (eqs 6-8) and the output layer tied to the embeddings (eq 13), each checked against the paper's
formulas written out directly, between its whole-sequence and step-by-step forms (also across beam
reordering), and for finite gradients."""
import pytest
import torch
import torch.nn as nn
from torch.func import functional_call

from fairseq_plugins.accelerated.step_gradient import share_across_steps
from fairseq_plugins.modules.beam_reorder import SOURCE_ROW, reorder_rows
from fairseq_plugins.modules.intra_decoder_attention import PAST, IntraDecoderAttention
from fairseq_plugins.modules.shared_projection import SharedOutputProjection
from fairseq_plugins.modules.temporal_attention import (
    KEYS, RUNNING, STEPS, IntraTemporalAttention, temporal_step_weights, temporal_weights,
)

DOUBLE = torch.double


def generator(seed):
    return torch.Generator().manual_seed(seed)


def randn(*shape, seed=0, scale=1.0, dtype=DOUBLE):
    return torch.randn(*shape, generator=generator(seed), dtype=dtype) * scale


def uniform(*shape, seed=0, magnitude=1.0, dtype=DOUBLE):
    """Scores uniform in [-magnitude, magnitude]."""
    return (torch.rand(*shape, generator=generator(seed), dtype=dtype) * 2 - 1) * magnitude


def padding(bsz, src_len, lengths):
    """B x S, True beyond each row's length."""
    return torch.arange(src_len).unsqueeze(0) >= torch.tensor(lengths).unsqueeze(1)


# ---------------------------------------------------------------------------------------- direct formulas
def direct_temporal_weights(scores, padding_mask):
    """Eqs 3-4 exactly as printed, with exp and division (float64 loops): B x T x S."""
    bsz, steps, src_len = scores.size()
    attn = torch.zeros_like(scores)
    for b in range(bsz):
        real = [i for i in range(src_len) if not padding_mask[b, i]]
        for t in range(steps):
            e_prime = {}
            for i in real:
                if t == 0:
                    e_prime[i] = torch.exp(scores[b, 0, i])  # eq 3, t = 1
                else:
                    e_prime[i] = torch.exp(scores[b, t, i]) / torch.exp(scores[b, :t, i]).sum()  # eq 3, t > 1
            total = sum(e_prime.values())
            for i in real:
                attn[b, t, i] = e_prime[i] / total  # eq 4
    return attn


def direct_temporal_attention(attention, queries, encoder_states, padding_mask):
    """Eqs 1-5 directly: e_ti = h^d_t^T W^e_attn h^e_i, then the direct eqs 3-4 and c^e_t = sum_i a_ti h^e_i."""
    scores = torch.einsum("btd,de,bse->bts", queries, attention.weight, encoder_states)  # eqs 1-2
    attn = direct_temporal_weights(scores, padding_mask)
    return attn, torch.einsum("bts,bse->bte", attn, encoder_states)  # eq 5


def direct_decoder_attention(attention, states):
    """Eqs 6-8 directly: a loop over t, a softmax over t' < t, c^d_1 = 0."""
    bsz, steps, hidden = states.size()
    attn = torch.zeros(bsz, steps, steps, dtype=states.dtype)
    context = torch.zeros_like(states)
    for t in range(1, steps):
        scores = torch.einsum("bh,hk,bsk->bs", states[:, t], attention.weight, states[:, :t])  # eq 6
        attn[:, t, :t] = torch.softmax(scores, dim=1)  # eq 7
        context[:, t] = torch.einsum("bs,bsh->bh", attn[:, t, :t], states[:, :t])  # eq 8
    return attn, context


# ---------------------------------------------------------------------------------------- temporal: eqs 3-4
def test_temporal_normalisation_equals_the_direct_formula_with_padding():
    scores = randn(3, 5, 6, seed=1, scale=2.0)
    mask = padding(3, 6, [6, 4, 1])  # a full row, two padded positions, a single real position
    attn, running = temporal_weights(scores, mask)
    expected = direct_temporal_weights(scores, mask)
    torch.testing.assert_close(attn, expected)
    # t = 1 is a plain softmax of e_1 over the real positions
    torch.testing.assert_close(attn[:, 0], torch.softmax(scores[:, 0].masked_fill(mask, float("-inf")), dim=1))
    # the running log-sum-exp is log sum_{j<=t} exp(e_ji), finite everywhere, padding included
    torch.testing.assert_close(running, torch.log(torch.cumsum(torch.exp(scores), dim=1)))
    assert torch.isfinite(running).all()


def test_temporal_rows_sum_to_one_and_padding_gets_zero():
    scores = randn(2, 7, 5, seed=2, scale=3.0)
    mask = padding(2, 5, [5, 3])
    attn, _ = temporal_weights(scores, mask)
    torch.testing.assert_close(attn.sum(dim=2), torch.ones(2, 7, dtype=DOUBLE))
    assert (attn[1, :, 3:] == 0).all()
    assert (attn[~mask.unsqueeze(1).expand_as(attn)] > 0).all()


def test_temporal_normalisation_penalises_positions_attended_before():
    """The past step's scores enter through sum_j exp(e_ji), not through the past *normalised* weights: a
    position with a huge past score and equal current scores elsewhere loses almost all its weight."""
    scores = torch.zeros(1, 2, 3, dtype=DOUBLE)
    scores[0, 0, 0] = 5.0  # step 1 attends to position 0
    attn, _ = temporal_weights(scores, None)
    # step 2: e' = [1 / e^5, 1, 1]; dividing by past softmax weights instead would give [1/0.98.., 1/0.0066.., ..]
    torch.testing.assert_close(attn[0, 1], direct_temporal_weights(scores, torch.zeros(1, 3, dtype=torch.bool))[0, 1])
    assert attn[0, 1, 0] < 0.01 and attn[0, 1, 1] == attn[0, 1, 2]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_temporal_log_space_agrees_with_the_direct_formula_for_400_steps_of_large_scores(dtype):
    scores = uniform(2, 400, 6, seed=3, magnitude=200.0)  # |e| up to 200
    mask = padding(2, 6, [6, 4])
    direct = direct_temporal_weights(scores[:, :60], mask)  # the loops are slow: the first 60 steps
    assert torch.isfinite(direct).all()  # float64 exp(200) is still finite here
    attn, running = temporal_weights(scores.to(dtype), mask)
    assert attn.dtype == dtype and torch.isfinite(attn).all() and torch.isfinite(running).all()
    torch.testing.assert_close(attn.sum(dim=2), torch.ones(2, 400, dtype=dtype))
    assert (attn[1, :, 4:] == 0).all()
    tolerance = {"atol": 1e-4, "rtol": 1e-3} if dtype == torch.float32 else {}
    torch.testing.assert_close(attn[:, :60].double(), direct, **tolerance)
    if dtype == torch.float32:  # the direct formula in this dtype overflows: the test is in the hard regime
        assert not torch.isfinite(torch.exp(scores.to(dtype))).all()


def test_temporal_log_space_stays_finite_where_the_direct_formula_does_not():
    scores = uniform(1, 400, 5, seed=4, magnitude=1000.0)
    mask = padding(1, 5, [4])
    with torch.no_grad():
        direct = direct_temporal_weights(scores[:, :10], mask)
    assert not torch.isfinite(direct).all()  # exp(1000) = inf in float64: inf / inf
    attn, _ = temporal_weights(scores, mask)
    assert torch.isfinite(attn).all()
    torch.testing.assert_close(attn.sum(dim=2), torch.ones(1, 400, dtype=DOUBLE))
    # where the direct one is finite, they agree
    finite = torch.isfinite(direct).all(dim=2)  # B x T
    torch.testing.assert_close(attn[:, :10][finite], direct[finite])


def test_temporal_gradients_are_finite_for_400_steps_of_large_scores():
    scores = uniform(2, 400, 6, seed=5, magnitude=200.0, dtype=torch.float32).requires_grad_()
    mask = padding(2, 6, [6, 3])
    attn, _ = temporal_weights(scores, mask)
    (attn * randn(2, 400, 6, seed=6, dtype=torch.float32)).sum().backward()
    assert torch.isfinite(scores.grad).all()
    assert (scores.grad[1, :, 3:] == 0).all()  # padded scores influence nothing


def test_temporal_step_weights_equal_the_whole_sequence():
    scores = randn(3, 6, 5, seed=7, scale=4.0)
    mask = padding(3, 5, [5, 2, 4])
    whole, whole_running = temporal_weights(scores, mask)
    running = randn(3, 5, seed=9, scale=50.0)  # whatever the state holds before step 1 is ignored
    steps = torch.zeros(3, dtype=torch.long)
    for t in range(6):
        attn, running = temporal_step_weights(scores[:, t], running, steps, mask)
        steps = steps + 1
        torch.testing.assert_close(attn, whole[:, t])
        torch.testing.assert_close(running, whole_running[:, t])


def test_temporal_step_weights_rows_at_different_steps():
    """Each row follows its own step count (a row at t = 1 next to rows further on)."""
    scores = randn(2, 3, 4, seed=8)
    whole, whole_running = temporal_weights(scores, None)
    running = torch.stack([whole_running[0, 1], torch.zeros(4, dtype=DOUBLE)])  # row 0 after 2 steps, row 1 new
    attn, _ = temporal_step_weights(torch.stack([scores[0, 2], scores[1, 0]]), running, torch.tensor([2, 0]))
    torch.testing.assert_close(attn, torch.stack([whole[0, 2], whole[1, 0]]))


# ---------------------------------------------------------------------------------------- temporal: the module
def temporal_inputs(bsz=3, steps=5, src_len=6, key_dim=4, query_dim=3, lengths=(6, 3, 5), seed=10):
    torch.manual_seed(seed)
    attention = IntraTemporalAttention(key_dim, query_dim).double()
    encoder_states = randn(bsz, src_len, key_dim, seed=seed + 1)
    queries = randn(bsz, steps, query_dim, seed=seed + 2)
    return attention, encoder_states, queries, padding(bsz, src_len, list(lengths))


def run_temporal_steps(attention, encoder_states, queries, mask, share=False):
    """The step form over all the queries: attn B x T x S, context B x T x H_e, final state."""
    values = share_across_steps(encoder_states * 1.0) if share else encoder_states
    state = attention.initial_state(attention.project_keys(encoder_states))
    attns, contexts = [], []
    for t in range(queries.size(1)):
        attn, context, state = attention.step(queries[:, t], values, state, mask)
        attns.append(attn)
        contexts.append(context)
    return torch.stack(attns, dim=1), torch.stack(contexts, dim=1), state


def test_temporal_attention_equals_eqs_1_to_5():
    attention, encoder_states, queries, mask = temporal_inputs()
    attn, context, state = attention(queries, attention.project_keys(encoder_states), encoder_states, mask)
    expected_attn, expected_context = direct_temporal_attention(attention, queries, encoder_states, mask)
    torch.testing.assert_close(attn, expected_attn)
    torch.testing.assert_close(context, expected_context)
    assert attention.weight.shape == (3, 4)  # W^e_attn: H_d x H_e
    assert state[STEPS].tolist() == [5, 5, 5]


def test_temporal_attention_has_no_parameters_beyond_w_attn():
    attention = IntraTemporalAttention(4, 3)
    assert [name for name, _ in attention.named_parameters()] == ["weight"]


def test_temporal_step_form_equals_the_whole_sequence():
    attention, encoder_states, queries, mask = temporal_inputs()
    whole_attn, whole_context, whole_state = attention(
        queries, attention.project_keys(encoder_states), encoder_states, mask)
    attn, context, state = run_temporal_steps(attention, encoder_states, queries, mask)
    torch.testing.assert_close(attn, whole_attn)
    torch.testing.assert_close(context, whole_context)
    torch.testing.assert_close(state[RUNNING], whole_state[RUNNING])
    assert torch.equal(state[STEPS], whole_state[STEPS])


def test_temporal_step_form_continues_from_the_whole_sequence_state():
    attention, encoder_states, queries, mask = temporal_inputs(steps=6)
    keys = attention.project_keys(encoder_states)
    whole_attn, whole_context, _ = attention(queries, keys, encoder_states, mask)
    _, _, prefix_state = attention(queries[:, :4], keys, encoder_states, mask)
    state = dict(attention.initial_state(keys), **prefix_state)
    for t in (4, 5):
        attn, context, state = attention.step(queries[:, t], encoder_states, state, mask)
        torch.testing.assert_close(attn, whole_attn[:, t])
        torch.testing.assert_close(context, whole_context[:, t])


@pytest.mark.parametrize("share", [False, True])
def test_temporal_step_form_gives_the_whole_sequence_gradients(share):
    attention, encoder_states, queries, mask = temporal_inputs(seed=20)
    encoder_states.requires_grad_()
    queries.requires_grad_()
    weights = randn(3, 5, 4, seed=21)
    leaves = (encoder_states, queries, attention.weight)

    def loss(attn, context):
        return (context * weights).sum() + (attn * torch.arange(6.0, dtype=DOUBLE)).sum()

    whole = attention(queries, attention.project_keys(encoder_states), encoder_states, mask)[:2]
    steps = run_temporal_steps(attention, encoder_states, queries, mask, share=share)[:2]
    for expected, got in zip(torch.autograd.grad(loss(*whole), leaves), torch.autograd.grad(loss(*steps), leaves)):
        assert torch.isfinite(got).all()
        torch.testing.assert_close(got, expected)


def test_temporal_gradients_at_padding_are_finite_and_zero():
    attention, encoder_states, queries, mask = temporal_inputs(seed=30)
    encoder_states = (encoder_states * 50.0).requires_grad_()  # large scores
    attn, context, _ = attention(queries, attention.project_keys(encoder_states), encoder_states, mask)
    ((context**2).sum() + attn.sum()).backward()
    assert torch.isfinite(encoder_states.grad).all() and torch.isfinite(attention.weight.grad).all()
    assert (encoder_states.grad[mask] == 0).all()
    assert (encoder_states.grad[~mask].abs().sum(dim=1) > 0).all()


@pytest.mark.parametrize("form", ["whole", "step", "step, shared gradients"])
def test_temporal_gradcheck(form):
    attention, encoder_states, queries, mask = temporal_inputs(bsz=2, steps=3, src_len=4, key_dim=3, query_dim=2,
                                                               lengths=(4, 2), seed=40)
    values = randn(2, 4, 3, seed=41)

    def function(weight, states, queries_, values_):
        params = {"weight": weight}
        if form == "whole":
            keys = torch.nn.functional.linear(states, weight)  # W^e_attn h^e_i
            attn, context, _ = functional_call(attention, params, (queries_, keys, values_, mask))
            return attn, context
        keys = torch.nn.functional.linear(states, weight)  # B x S x H_d
        values_ = values_ * 1.0
        if form == "step, shared gradients":  # one gradient buffer each for the keys and the values
            keys, values_ = share_across_steps(keys), share_across_steps(values_)
        state = attention.initial_state(keys)
        out = []
        for t in range(queries_.size(1)):
            attn, context, state = attention.step(queries_[:, t], values_, state, mask)
            out += [attn, context]
        return tuple(out)

    leaves = tuple(x.clone().requires_grad_() for x in (attention.weight.detach(), encoder_states, queries, values))
    assert torch.autograd.gradcheck(function, leaves)


def test_temporal_attention_in_half_precision_normalises_in_float32():
    attention = IntraTemporalAttention(4, 4)
    encoder_states = randn(2, 5, 4, seed=50, scale=30.0, dtype=torch.float32).half()
    queries = randn(2, 40, 4, seed=51, scale=30.0, dtype=torch.float32).half()
    mask = padding(2, 5, [5, 2])
    with torch.no_grad():
        attention.half()
        keys = attention.project_keys(encoder_states)
        attn, context, state = attention(queries, keys, encoder_states, mask)
        step_attn, step_context, step_state = run_temporal_steps(attention, encoder_states, queries, mask)
    assert attn.dtype == torch.float32 and state[RUNNING].dtype == torch.float32 and context.dtype == torch.half
    assert torch.isfinite(attn).all() and torch.isfinite(context).all()
    torch.testing.assert_close(attn.sum(dim=2), torch.ones(2, 40))
    assert (attn[1, :, 2:] == 0).all()
    torch.testing.assert_close(step_attn, attn, atol=2e-3, rtol=1e-2)


def test_temporal_attention_rejects_encoder_states_of_the_wrong_size():
    attention = IntraTemporalAttention(4, 3)
    with pytest.raises(ValueError, match="key_dim = 4"):
        attention.project_keys(torch.zeros(2, 5, 3))
    with pytest.raises(ValueError, match="positive"):
        IntraTemporalAttention(0, 3)


# ---------------------------------------------------------------------------------------- beam reordering
def beam_orders(num_docs, beam, steps, seed):
    """For each step, a new order that keeps every row within its document (parents drawn with
    replacement, as beam search does)."""
    gen = generator(seed)
    return [torch.cat([d * beam + torch.randint(0, beam, (beam,), generator=gen) for d in range(num_docs)])
            for _ in range(steps)]


def test_temporal_step_form_equals_the_whole_sequence_after_beam_reordering():
    num_docs, beam, steps = 2, 3, 6
    attention, encoder_states, _, mask = temporal_inputs(bsz=num_docs, lengths=(6, 4), seed=60)
    expand = torch.arange(num_docs).repeat_interleave(beam)  # B*beam: the generator's first expansion
    state = attention.reorder_state(attention.initial_state(attention.project_keys(encoder_states)), expand)
    values, rows_mask = encoder_states[expand], mask[expand]  # (B*beam) x S x H_e, (B*beam) x S
    assert state[KEYS].size(0) == num_docs * beam and state[SOURCE_ROW].tolist() == expand.tolist()
    queries = randn(steps, num_docs * beam, 3, seed=61)
    history = {"query": [], "attn": [], "context": []}
    for t, order in enumerate(beam_orders(num_docs, beam, steps, seed=62)):
        attn, context, state = attention.step(queries[t], values, state, rows_mask)
        for key, value in zip(history, (queries[t], attn, context)):
            history[key].append(value)
        keys_before = state[KEYS]
        state = reorder_rows(state, order, source_only=IntraTemporalAttention.SOURCE_ONLY)
        assert state[KEYS] is keys_before  # the beam stays within each source: the keys are not copied
        history = {key: [value.index_select(0, order) for value in values_] for key, values_ in history.items()}
    # each final hypothesis: its own query history, read through the whole-sequence form
    stacked = {key: torch.stack(values_, dim=1) for key, values_ in history.items()}
    whole_attn, whole_context, whole_state = attention(stacked["query"], state[KEYS], values, rows_mask)
    torch.testing.assert_close(stacked["attn"], whole_attn)
    torch.testing.assert_close(stacked["context"], whole_context)
    torch.testing.assert_close(state[RUNNING], whole_state[RUNNING])


def test_temporal_state_follows_rows_that_change_source():
    """A finished document leaves the batch: the source-only keys are reindexed too, and decoding goes on."""
    attention, encoder_states, queries, mask = temporal_inputs(seed=70)
    keys = attention.project_keys(encoder_states)
    whole_attn, whole_context, _ = attention(queries, keys, encoder_states, mask)
    state = attention.initial_state(keys)
    for t in range(2):
        _, _, state = attention.step(queries[:, t], encoder_states, state, mask)
    keep = torch.tensor([2, 0])
    state = attention.reorder_state(state, keep)
    assert state[KEYS].size(0) == 2 and state[SOURCE_ROW].tolist() == [2, 0]
    for t in range(2, 5):
        attn, context, state = attention.step(queries[keep, t], encoder_states[keep], state, mask[keep])
        torch.testing.assert_close(attn, whole_attn[keep, t])
        torch.testing.assert_close(context, whole_context[keep, t])


# ---------------------------------------------------------------------------------------- intra-decoder
def decoder_inputs(bsz=3, steps=6, hidden=4, seed=100):
    torch.manual_seed(seed)
    return IntraDecoderAttention(hidden).double(), randn(bsz, steps, hidden, seed=seed + 1)


def test_intra_decoder_attention_equals_eqs_6_to_8():
    attention, states = decoder_inputs()
    attn, context = attention(states)
    expected_attn, expected_context = direct_decoder_attention(attention, states)
    torch.testing.assert_close(attn, expected_attn)
    torch.testing.assert_close(context, expected_context)
    assert [name for name, p in attention.named_parameters()] == ["weight"] and attention.weight.shape == (4, 4)


def test_intra_decoder_first_context_is_zero_and_rows_sum_to_one_over_the_past():
    attention, states = decoder_inputs(steps=5)
    states = states * 30.0  # large scores
    attn, context = attention(states)
    assert torch.isfinite(attn).all() and torch.isfinite(context).all()
    assert (context[:, 0] == 0).all() and (attn[:, 0] == 0).all()  # c^d_1 = 0
    torch.testing.assert_close(attn[:, 1:].sum(dim=2), torch.ones(3, 4, dtype=DOUBLE))
    future = torch.ones(5, 5, dtype=torch.bool).triu()  # t' >= t
    assert (attn[:, future] == 0).all()


def test_intra_decoder_single_step():
    attention, states = decoder_inputs(steps=1)
    states.requires_grad_()
    attn, context = attention(states)
    assert attn.shape == (3, 1, 1) and (attn == 0).all() and (context == 0).all()
    context.sum().backward()
    assert (states.grad == 0).all()


def test_intra_decoder_attention_is_causal():
    attention, states = decoder_inputs(steps=7, seed=110)
    _, context = attention(states)
    changed = states.clone()
    changed[:, 4] += randn(3, 4, seed=111)
    _, changed_context = attention(changed)
    assert torch.equal(changed_context[:, :4], context[:, :4])  # steps before the change: identical
    assert not torch.allclose(changed_context[:, 4], context[:, 4])  # step 5 reads its own state as query
    assert not torch.allclose(changed_context[:, 5:], context[:, 5:])  # later steps attend to it


def test_intra_decoder_step_form_equals_the_whole_sequence():
    attention, states = decoder_inputs(seed=120)
    whole_attn, whole_context = attention(states)
    cache = attention.initial_state(states[:, 0])
    for t in range(states.size(1)):
        attn, context, cache = attention.step(states[:, t], cache)
        assert attn.shape == (3, t)
        torch.testing.assert_close(attn, whole_attn[:, t, :t])
        torch.testing.assert_close(context, whole_context[:, t])
    assert cache[PAST].shape == (3, 6, 4)


def test_intra_decoder_step_form_equals_the_whole_sequence_after_beam_reordering():
    num_docs, beam, steps = 2, 3, 6
    attention, states = decoder_inputs(bsz=num_docs * beam, steps=steps, seed=130)
    cache = attention.initial_state(states[:, 0], source_row=torch.arange(num_docs).repeat_interleave(beam))
    history = {"state": [], "attn": [], "context": []}
    for t, order in enumerate(beam_orders(num_docs, beam, steps, seed=131)):
        attn, context, cache = attention.step(states[:, t], cache)
        for key, value in zip(history, (states[:, t], widen(attn, steps), context)):
            history[key].append(value)
        cache = attention.reorder_state(cache, order)
        history = {key: [value.index_select(0, order) for value in values_] for key, values_ in history.items()}
    stacked = {key: torch.stack(values_, dim=1) for key, values_ in history.items()}
    torch.testing.assert_close(cache[PAST], stacked["state"])  # the cache is each hypothesis' own past
    whole_attn, whole_context = attention(stacked["state"])
    torch.testing.assert_close(stacked["attn"], whole_attn)
    torch.testing.assert_close(stacked["context"], whole_context)


def widen(attn, steps):
    """B x (t-1) step weights widened with zeros to B x T (a row of the whole-sequence matrix)."""
    return torch.nn.functional.pad(attn, (0, steps - attn.size(1)))


def test_intra_decoder_gradcheck_and_finite_gradients():
    attention, states = decoder_inputs(bsz=2, steps=4, hidden=3, seed=140)

    def function(weight, states_):
        return functional_call(attention, {"weight": weight}, (states_,))

    leaves = (attention.weight.detach().clone().requires_grad_(), states.clone().requires_grad_())
    assert torch.autograd.gradcheck(function, leaves)

    big = (states * 100.0).requires_grad_()
    attn, context = attention(big)
    (context.sum() + attn.sum()).backward()
    assert torch.isfinite(big.grad).all() and torch.isfinite(attention.weight.grad).all()


def test_intra_decoder_step_gradcheck():
    """The step form's gradient with respect to the states (W^d_attn: the whole-form gradcheck, and the two
    forms agree)."""
    attention, states = decoder_inputs(bsz=2, steps=3, hidden=3, seed=150)

    def function(states_):
        cache, out = attention.initial_state(states_[:, 0]), []
        for t in range(states_.size(1)):
            attn, context, cache = attention.step(states_[:, t], cache)
            out += [attn, context]
        return tuple(out)

    assert torch.autograd.gradcheck(function, (states.clone().requires_grad_(),))


def test_intra_decoder_rejects_states_of_the_wrong_size():
    attention = IntraDecoderAttention(4)
    with pytest.raises(ValueError, match="hidden_size = 4"):
        attention(torch.zeros(2, 3, 5))
    with pytest.raises(ValueError, match="hidden_size = 4"):
        attention.initial_state(torch.zeros(2, 3))


# ---------------------------------------------------------------------------------------- shared projection
VOCAB_ROWS, NUM_REGULAR, EMBED_DIM, FEATURE_DIM = 9, 7, 3, 5  # 7 regular words, then 2 OOV markers


class TiedDecoder(nn.Module):
    """What a decoder holds: the embedding, and the output layer that reads it."""

    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(VOCAB_ROWS, EMBED_DIM, padding_idx=1)
        self.out = SharedOutputProjection(self.embed, FEATURE_DIM, num_regular=NUM_REGULAR)
        with torch.no_grad():
            self.out.bias.normal_()

    def forward(self, features):
        return self.out(features)


def tied_decoder(seed=200):
    torch.manual_seed(seed)
    return TiedDecoder().double()


def direct_logits(decoder, features):
    """eq 9's argument with eq 13's W_out, computed directly."""
    w_out = torch.tanh(decoder.embed.weight[:NUM_REGULAR] @ decoder.out.proj)  # eq 13
    return features @ w_out.t() + decoder.out.bias


def test_shared_projection_has_no_output_matrix_of_its_own():
    decoder = tied_decoder()
    shapes = {name: tuple(p.shape) for name, p in decoder.out.named_parameters()}
    assert shapes == {"proj": (EMBED_DIM, FEATURE_DIM), "bias": (NUM_REGULAR,)}  # W_proj d_emb x d_out, b_out
    assert not any(p.dim() == 2 and p.size(0) in (NUM_REGULAR, VOCAB_ROWS) for p in decoder.out.parameters())
    assert all(p is not decoder.embed.weight for p in decoder.out.parameters())
    assert set(decoder.state_dict()) == {"embed.weight", "out.proj", "out.bias"}  # the embedding once


def test_shared_projection_equals_eq_13():
    decoder = tied_decoder()
    features = randn(2, 4, FEATURE_DIM, seed=201)
    logits = decoder(features)
    assert logits.shape == (2, 4, NUM_REGULAR)
    torch.testing.assert_close(logits, direct_logits(decoder, features))


def test_shared_projection_gradient_reaches_the_embeddings():
    decoder = tied_decoder()
    features = randn(2, 4, FEATURE_DIM, seed=202)
    targets = torch.tensor([[0, 2, 3, 6], [4, 5, 0, 2]])
    torch.nn.functional.cross_entropy(decoder(features).transpose(1, 2), targets).backward()
    grad = decoder.embed.weight.grad
    assert grad is not None and torch.isfinite(grad).all()
    assert (grad[:NUM_REGULAR].abs().sum(dim=1) > 0).all()  # every regular word's row (its output row)
    assert (grad[NUM_REGULAR:] == 0).all()  # OOV markers have no output row
    assert decoder.out.proj.grad.abs().sum() > 0 and decoder.out.bias.grad.abs().sum() > 0


def test_shared_projection_gradcheck():
    decoder = tied_decoder()
    features = randn(2, 3, FEATURE_DIM, seed=203)
    names = ("embed.weight", "out.proj", "out.bias")

    def function(embed, proj, bias, features_):
        return functional_call(decoder, dict(zip(names, (embed, proj, bias))), (features_,))

    leaves = tuple(decoder.state_dict()[n].clone().requires_grad_() for n in names) + (features.requires_grad_(),)
    assert torch.autograd.gradcheck(function, leaves)


def test_shared_projection_without_gradients_sees_weight_updates():
    """Without gradients W_out is kept between calls; an update of the embedding or W_proj, even through
    ``.data`` (as fairseq's optimizers do), must be seen."""
    decoder = tied_decoder()
    features = randn(2, 3, FEATURE_DIM, seed=204)
    with torch.no_grad():
        first = decoder(features)
        torch.testing.assert_close(decoder(features), first)
        decoder.embed.weight.data[2] += 1.0
        torch.testing.assert_close(decoder(features), direct_logits(decoder, features))
        assert not torch.allclose(decoder(features)[..., 2], first[..., 2])
        decoder.out.proj.data.mul_(0.5)
        torch.testing.assert_close(decoder(features), direct_logits(decoder, features))
    logits = decoder(features)  # with gradients again: computed afresh and differentiable
    assert logits.requires_grad
    torch.testing.assert_close(logits, direct_logits(decoder, features))


def test_shared_projection_rejects_bad_sizes():
    embed = nn.Embedding(VOCAB_ROWS, EMBED_DIM)
    with pytest.raises(ValueError, match="num_regular = 10"):
        SharedOutputProjection(embed, FEATURE_DIM, num_regular=10)
    projection = SharedOutputProjection(embed, FEATURE_DIM)
    assert projection(torch.zeros(2, FEATURE_DIM)).shape == (2, VOCAB_ROWS)
    with pytest.raises(ValueError, match="feature_dim = 5"):
        projection(torch.zeros(2, 4))
