"""The attention's hand-written autograd functions and the beam reordering that skips source-only tensors:
each must give exactly what the plain tensor formulas give."""
import importlib.util
from pathlib import Path

import pytest
import torch

from conftest import tiny_batch, tiny_dictionary, tiny_gru, tiny_model
from fairseq_plugins.accelerated import additive_scores as scores_module
from fairseq_plugins.accelerated import cpu_cache
from fairseq_plugins.accelerated.additive_scores import additive_scores
from fairseq_plugins.accelerated.step_gradient import select_rows, share_across_steps, step_gradient
from fairseq_plugins.modules.beam_reorder import SOURCE_ROW, reorder_rows, source_rows
from fairseq_plugins.modules.coverage_attention import CoverageAttention, WeightedSum


def plain_scores(keys, query, coverage, coverage_weight, v):
    """v^T tanh(k + q + w_c c), eq 11 (eq 1 without coverage), with ordinary tensor operations."""
    features = keys + query.unsqueeze(1)
    if coverage is not None:
        features = features + coverage.unsqueeze(2) * coverage_weight
    return torch.tanh(features) @ v


def inputs(bsz=5, src_len=7, attn_dim=3, steps=3, seed=0):
    generator = torch.Generator().manual_seed(seed)

    def leaf(*shape):
        return torch.randn(*shape, generator=generator, dtype=torch.double).requires_grad_()

    return leaf(bsz, src_len, attn_dim), leaf(steps, bsz, attn_dim), leaf(attn_dim), leaf(attn_dim)


def unroll(score_fn, keys, queries, coverage_weight, v, coverage: bool, share: bool):
    """A few decoder steps whose coverage accumulates the attention, as in pgn_lstm; returns a scalar loss."""
    keys = keys * 2.0  # a non-leaf, as the projected keys are
    if share:
        keys = share_across_steps(keys)
    cov = torch.zeros(keys.shape[:2], dtype=keys.dtype)
    loss = 0.0
    for query in queries:
        e = score_fn(keys, query, cov if coverage else None, coverage_weight, v)
        attn = torch.softmax(e, dim=1)
        loss = loss + (attn * torch.arange(attn.size(1), dtype=attn.dtype)).sum() + (e**2).sum()
        cov = cov + attn
    return loss


@pytest.mark.parametrize("coverage", [True, False])
@pytest.mark.parametrize("block_floats", [1 << 18, 7, 21])  # one block; one row per block; 3 rows + a remainder
def test_additive_scores_match_the_formula_with_gradients(monkeypatch, coverage, block_floats):
    monkeypatch.setattr(scores_module, "BLOCK_FLOATS", block_floats)
    keys, queries, coverage_weight, v = inputs()
    cov = torch.rand(5, 7, dtype=torch.double, requires_grad=True) if coverage else None
    torch.testing.assert_close(additive_scores(keys, queries[0], cov, coverage_weight, v),
                               plain_scores(keys, queries[0], cov, coverage_weight, v))
    leaves = (keys, queries[0], cov, coverage_weight, v) if coverage else (keys, queries[0], v)
    if coverage:
        assert torch.autograd.gradcheck(additive_scores, leaves)
    else:
        assert torch.autograd.gradcheck(lambda k, q, v_: additive_scores(k, q, None, None, v_), leaves)


@pytest.mark.parametrize("coverage", [True, False])
@pytest.mark.parametrize("share", [True, False])
def test_scores_over_steps_give_the_plain_gradients(monkeypatch, coverage, share):
    monkeypatch.setattr(scores_module, "BLOCK_FLOATS", 21)
    keys, queries, coverage_weight, v = inputs(seed=1)
    leaves = (keys, queries, coverage_weight, v) if coverage else (keys, queries, v)
    expected = torch.autograd.grad(unroll(plain_scores, keys, queries, coverage_weight, v, coverage, False), leaves)
    got = torch.autograd.grad(unroll(additive_scores, keys, queries, coverage_weight, v, coverage, share), leaves)
    for e, g in zip(expected, got):
        torch.testing.assert_close(g, e)


def test_shared_gradient_is_not_carried_into_the_next_backward():
    """retain_graph and a second backward: the step buffer is handed over and emptied each time."""
    keys, queries, coverage_weight, v = inputs(seed=2)
    loss = unroll(additive_scores, keys, queries, coverage_weight, v, True, True)
    loss.backward(retain_graph=True)
    first = keys.grad.clone()
    loss.backward()
    torch.testing.assert_close(keys.grad, 2 * first)


def test_sharing_is_a_no_op_without_gradients():
    keys = torch.randn(2, 3, 4)
    assert share_across_steps(keys) is keys and step_gradient(keys) is None
    with torch.no_grad():
        leaf = torch.randn(2, 3, 4, requires_grad=True)
        assert share_across_steps(leaf) is leaf


@pytest.mark.parametrize("share", [True, False])
def test_weighted_sum_gives_the_plain_context_and_gradients(share):
    generator = torch.Generator().manual_seed(3)
    values = torch.randn(4, 6, 5, generator=generator, dtype=torch.double, requires_grad=True)
    logits = torch.randn(3, 4, 6, generator=generator, dtype=torch.double, requires_grad=True)

    def loss_of(context_fn):
        vals = values * 1.5
        vals = share_across_steps(vals) if share else vals
        return sum((context_fn(torch.softmax(step, 1), vals) ** 2).sum() for step in logits)

    plain = loss_of(lambda a, h: torch.bmm(a.unsqueeze(1), h).squeeze(1))  # eq 3
    mine = loss_of(lambda a, h: WeightedSum.apply(a, h, step_gradient(h)))
    torch.testing.assert_close(mine, plain)
    for e, g in zip(torch.autograd.grad(plain, (values, logits)), torch.autograd.grad(mine, (values, logits))):
        torch.testing.assert_close(g, e)


def test_attention_module_gradients_match_a_plain_implementation():
    torch.manual_seed(4)
    attention = CoverageAttention(6, 5, 4, coverage=True).double()
    encoder_states = torch.randn(3, 7, 6, dtype=torch.double, requires_grad=True)
    queries = torch.randn(4, 3, 5, dtype=torch.double)
    mask = torch.zeros(3, 7, dtype=torch.bool)
    mask[1, 5:] = True

    def loss_of(step):
        keys, cov, total = attention.project_keys(encoder_states), torch.zeros(3, 7, dtype=torch.double), 0.0
        values = share_across_steps(encoder_states * 1.0)
        for query in queries:
            attn, context = step(keys, values, query, cov, mask)
            total = total + (context**2).sum() + (attn * cov).sum()
            cov = cov + attn
        return total

    def plain_step(keys, values, query, cov, mask):
        e = plain_scores(keys, attention.query_proj(query), cov, attention.coverage_weight, attention.v.weight[0])
        attn = torch.softmax(e.masked_fill(mask, float("-inf")), dim=1)
        return attn, torch.bmm(attn.unsqueeze(1), values).squeeze(1)

    params = [encoder_states, *attention.parameters()]
    expected = torch.autograd.grad(loss_of(plain_step), params)
    got = torch.autograd.grad(loss_of(attention), params)
    for e, g in zip(expected, got):
        torch.testing.assert_close(g, e)


@pytest.mark.parametrize("other_use", [False, True])
def test_rows_leaving_a_shared_tensor_give_the_plain_gradients(other_use):
    """Rows that leave the batch mid-decode (generation/sampling.py): ``select_rows`` of a shared tensor, twice
    in a row and with a repeated row, read by WeightedSum at every step, gives index_select's gradients; each
    subset has a buffer of its own, and without gradients it is index_select."""
    generator = torch.Generator().manual_seed(7)
    values = torch.randn(5, 6, 3, generator=generator, dtype=torch.double, requires_grad=True)
    logits = torch.randn(3, 5, 6, generator=generator, dtype=torch.double, requires_grad=True)
    orders = (torch.tensor([4, 0, 2, 2]), torch.tensor([3, 1]))  # 5 rows -> 4 (row 2 twice) -> 2

    def loss_of(select, context_fn):
        vals = values * 1.5
        vals, rows = (share_across_steps(vals) if select is select_rows else vals), torch.arange(5)
        total = 0.0
        for step, order in zip(logits, (None,) + orders):
            if order is not None:
                vals, rows = select(vals, order), rows[order]
            total = total + (context_fn(torch.softmax(step[rows], 1), vals) ** 2).sum()
            if other_use:  # a use outside the steps also reaches the parent
                total = total + vals.sum()
        return total

    plain = loss_of(lambda t, i: t.index_select(0, i), lambda a, h: torch.bmm(a.unsqueeze(1), h).squeeze(1))
    mine = loss_of(select_rows, lambda a, h: WeightedSum.apply(a, h, step_gradient(h)))
    torch.testing.assert_close(mine, plain)
    for e, g in zip(torch.autograd.grad(plain, (values, logits)), torch.autograd.grad(mine, (values, logits))):
        torch.testing.assert_close(g, e)
    shared = share_across_steps(values * 1.0)
    assert step_gradient(select_rows(shared, orders[0])) not in (None, step_gradient(shared))  # a buffer of its own
    with torch.no_grad():
        assert step_gradient(select_rows(shared, orders[0])) is None
    assert torch.equal(select_rows(shared, orders[1], dim=1), shared.index_select(1, orders[1]))


def test_reorder_keeps_source_only_tensors_while_beams_stay_within_their_source():
    states = {"keys": torch.arange(4.0).view(4, 1), "hidden": torch.arange(4.0).view(1, 4, 1),
              SOURCE_ROW: torch.tensor([0, 0, 1, 1])}
    within = reorder_rows(states, torch.tensor([1, 1, 3, 2]), source_only=("keys",), dims={"hidden": 1})
    assert within["keys"] is states["keys"]  # rows 0-1 and 2-3 share a source: nothing to copy
    assert within["hidden"].view(-1).tolist() == [1.0, 1.0, 3.0, 2.0]
    assert within[SOURCE_ROW].tolist() == [0, 0, 1, 1]

    across = reorder_rows(states, torch.tensor([2, 0, 1, 3]), source_only=("keys",), dims={"hidden": 1})
    assert across["keys"].view(-1).tolist() == [2.0, 0.0, 1.0, 3.0]
    assert across[SOURCE_ROW].tolist() == [1, 0, 0, 1]

    shrunk = reorder_rows(states, torch.tensor([2, 3]), source_only=("keys",), dims={"hidden": 1})  # doc 0 done
    assert shrunk["keys"].view(-1).tolist() == [2.0, 3.0] and shrunk[SOURCE_ROW].tolist() == [1, 1]
    assert source_rows(3, "cpu").tolist() == [0, 1, 2]


@pytest.mark.parametrize("arch", ["pgn_lstm", "global_gate_gru"])
def test_beam_search_is_unchanged_by_skipping_source_only_copies(monkeypatch, arch):
    """Beam search with the reordering shortcut gives the same hypotheses and scores as copying every
    tensor at every step."""
    from fairseq.sequence_generator import SequenceGenerator

    from fairseq_plugins.models import global_gate_gru, pgn_lstm

    dictionary = tiny_dictionary()
    torch.manual_seed(5)
    if arch == "pgn_lstm":
        model, module = tiny_model(dictionary).eval(), pgn_lstm
    else:
        model, module = tiny_gru(dictionary).eval(), global_gate_gru
    src, lengths, _ = tiny_batch(dictionary)
    sample = {"net_input": {"src_tokens": src, "src_lengths": lengths}}

    def search():
        generator = SequenceGenerator([model], dictionary, beam_size=3, max_len_b=6, min_len=2)
        hypotheses = generator.generate([model], sample)
        return [[(h["tokens"].tolist(), h["score"].item()) for h in hyps] for hyps in hypotheses]

    calls = []
    plain = reorder_rows

    def copy_everything(tensors, new_order, source_only, dims=None):
        calls.append(torch.equal(tensors[SOURCE_ROW].index_select(0, new_order), tensors[SOURCE_ROW]))
        return plain(tensors, new_order, source_only=(), dims=dims)

    fast = search()
    monkeypatch.setattr(module, "reorder_rows", copy_everything)
    from fairseq_plugins.modules import beam_reorder

    monkeypatch.setattr(beam_reorder, "reorder_rows", copy_everything)  # the decoder state (modules/step_state.py)
    slow = search()
    assert any(calls), "beam search never reordered within the sources: the shortcut was not exercised"
    assert len(fast) == len(slow) == 2
    for fast_hyps, slow_hyps in zip(fast, slow):
        assert [tokens for tokens, _ in fast_hyps] == [tokens for tokens, _ in slow_hyps]
        assert [score for _, score in fast_hyps] == pytest.approx([score for _, score in slow_hyps], abs=1e-6)


@pytest.mark.parametrize("lengths, max_groups", [
    ([5, 5, 5, 5], 16),  # no padding: one plain call
    ([5, 3, 5, 2], 16),  # three lengths: one plain call per length
    ([5, 3, 4, 2], 2),  # more lengths than MAX_LENGTH_GROUPS: a PackedSequence
])
def test_encoder_lstm_equals_a_packed_run(monkeypatch, lengths, max_groups):
    """However the encoder runs its LSTM, outputs (zero at padding) and final states are those of a
    PackedSequence run, forward and backward."""
    from fairseq_plugins.models import pgn_lstm

    monkeypatch.setattr(pgn_lstm, "MAX_LENGTH_GROUPS", max_groups)
    torch.manual_seed(6)
    encoder = tiny_model(tiny_dictionary()).encoder.eval()
    x = torch.randn(4, 5, 8, requires_grad=True)
    lengths = torch.tensor(lengths)

    def packed_run():
        packed = torch.nn.utils.rnn.pack_padded_sequence(x, lengths, batch_first=True, enforce_sorted=False)
        out, final = encoder.lstm(packed)
        return torch.nn.utils.rnn.pad_packed_sequence(out, batch_first=True, total_length=5)[0], final

    results = []
    for run in (packed_run, lambda: encoder.run_lstm(x, lengths)):
        out, (h, c) = run()
        weights = torch.arange(out.numel(), dtype=out.dtype).view_as(out).cos()
        grad = torch.autograd.grad((out * weights).sum() + h.sin().sum() + c.cos().sum(), x)[0]
        results.append((out, h, c, grad))
    for expected, got in zip(*results):
        torch.testing.assert_close(got, expected)
    assert torch.all(results[1][0][1, lengths[1]:] == 0)  # padding positions are zeros


def test_attention_runs_under_mixed_precision():
    """Under autocast (CPU bfloat16 here; float16 on a GPU) the linear layers hand the attention bfloat16
    queries and keys while v, w_c and the coverage stay float32: forward and backward still run, close to the
    float32 result, and every gradient comes back in its parameter's dtype."""
    torch.manual_seed(7)
    attention = CoverageAttention(6, 5, 4, coverage=True)
    encoder_states = torch.randn(3, 7, 6, requires_grad=True)
    queries = torch.randn(4, 3, 5)

    def loss_and_grads(autocast: bool):
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
            keys, values = attention.project_keys(encoder_states), share_across_steps(encoder_states * 1.0)
            cov, total = torch.zeros(3, 7), 0.0
            for query in queries:
                attn, context = attention(keys, values, query, cov, None)
                total = total + (context.float() ** 2).sum() + (attn.float() * cov).sum()
                cov = cov + attn.float()
        return total, torch.autograd.grad(total, [encoder_states, *attention.parameters()])

    loss32, grads32 = loss_and_grads(False)
    loss16, grads16 = loss_and_grads(True)
    assert loss16.item() == pytest.approx(loss32.item(), rel=2e-2)
    for g32, g16 in zip(grads32, grads16):
        assert g16.dtype == torch.float32
        assert (g16 - g32).abs().max() <= 5e-2 * g32.abs().max()


def fake_cache_dir(root, caches):
    """A sysfs-like cpu0/cache folder: (level, type, size, shared_cpu_list) per index."""
    for index, (level, kind, size, shared) in enumerate(caches):
        folder = root / f"index{index}"
        folder.mkdir(parents=True)
        for name, value in (("level", level), ("type", kind), ("size", size), ("shared_cpu_list", shared)):
            (folder / name).write_text(f"{value}\n")
    return root


def test_block_size_comes_from_the_l2_share_of_one_thread(tmp_path):
    caches = cpu_cache.read_cpu_caches(fake_cache_dir(tmp_path / "smt", [
        (1, "Data", "48K", "0-1"), (1, "Instruction", "32K", "0-1"), (2, "Unified", "1024K", "0-1"),
        (3, "Unified", "32768K", "0-15")]))
    assert caches == [cpu_cache.CacheLevel(1, 48 << 10, 2), cpu_cache.CacheLevel(2, 1 << 20, 2),
                      cpu_cache.CacheLevel(3, 32 << 20, 16)]
    floats, why = cpu_cache.block_floats_per_thread(caches)
    assert floats * 4 == (1 << 20) // 2 // cpu_cache.L2_FRACTION  # two SMT threads share the L2
    assert "1024 KiB L2 shared by 2 CPUs" in why
    private = cpu_cache.read_cpu_caches(fake_cache_dir(tmp_path / "zen3", [(2, "Unified", "512K", "3")]))
    assert cpu_cache.block_floats_per_thread(private)[0] * 4 == (512 << 10) // cpu_cache.L2_FRACTION
    assert cpu_cache.read_cpu_caches(tmp_path / "missing") == []
    fallback, why = cpu_cache.block_floats_per_thread([])
    assert fallback * 4 == cpu_cache.FALLBACK_BLOCK_BYTES and "no L2 size" in why


def test_cpu_caches_are_read_once_at_the_first_cpu_call_not_at_import(monkeypatch):
    """Importing the kernel reads no /sys file; its first CPU call reads the caches, later calls reuse them."""
    reads = []
    read_text = Path.read_text
    monkeypatch.setattr(Path, "read_text", lambda path, *a, **k: reads.append(str(path)) or read_text(path, *a, **k))
    spec = importlib.util.spec_from_file_location("fresh_additive_scores", scores_module.__file__)
    fresh = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(fresh)  # the import, again
    assert [path for path in reads if path.startswith("/sys")] == []
    cpu_cache.block_size.cache_clear()
    keys, queries, coverage_weight, v = inputs()
    fresh.additive_scores(keys, queries[0], None, None, v)
    first = len(reads)
    fresh.additive_scores(keys, queries[1], None, None, v)
    assert len(reads) == first and cpu_cache.block_size.cache_info().misses == 1


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_tanh_block_matches_torch_tanh(dtype):
    """float32 on a CPU goes through 2 sigmoid(2f) - 1; bfloat16 keeps torch's tanh."""
    generator = torch.Generator().manual_seed(3)
    keys = (torch.randn(4, 9, 16, generator=generator) * 4).to(dtype)
    weights = torch.randn(4, 9, 2, generator=generator).to(dtype)
    terms = torch.randn(4, 2, 16, generator=generator).to(dtype)
    out = torch.empty_like(keys)
    got = scores_module._tanh_block(out, keys, weights, terms)
    assert got.data_ptr() == out.data_ptr()  # in place, in the block buffer
    expected = torch.tanh(torch.baddbmm(keys.double(), weights.double(), terms.double()))
    tolerance = 2e-7 if dtype == torch.float32 else 1e-2
    torch.testing.assert_close(got.double(), expected, rtol=0, atol=tolerance)
