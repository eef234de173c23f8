"""The fused recurrence of See et al.'s decoder (accelerated/fused_steps.py): its hand-written backward against
finite differences, and the model with it against the same model run module by module (--no-fused-steps):
the same outputs and gradients, incremental decoding included, on the CPU's blocked attention path too, under
bfloat16 autocast, and a clear error for inconsistent shapes."""
import copy

import pytest
import torch

import fairseq_plugins.accelerated.additive_scores as additive_scores
from conftest import assert_incremental_equals_full, assert_same_gradients, tiny_batch, tiny_dictionary, tiny_model
from fairseq_plugins.accelerated.fused_steps import FusedSteps, Memory, StepWeights, fused_steps, one_step, run_loop

DICT = tiny_dictionary("a b c d e f g")
B, T, S, H, F, A = 3, 4, 5, 4, 6, 5


def inputs(coverage: bool, one: bool = False, seed: int = 0):
    """FusedSteps' inputs after ``accumulate``, float64, row 1 of the source padded from position 3."""
    generator = torch.Generator().manual_seed(seed)

    def param(*shape):
        return (0.5 * torch.randn(*shape, generator=generator, dtype=torch.float64)).requires_grad_()

    mask = torch.zeros(B, S, dtype=torch.bool)
    mask[1, 3:] = True
    coverage0 = torch.rand(B, S, generator=generator, dtype=torch.float64).requires_grad_()
    return (param(B, 1 if one else T, 4 * H), None if one else param(4 * H, F), param(4 * H, H), param(A, H),
            param(A) if coverage else None, param(A), param(B, S, A), param(B, S, F), mask, param(B, H),
            param(B, H), param(B, F), coverage0)


@pytest.mark.parametrize("coverage, accumulate, one", [(True, True, False), (False, True, False),
                                                       (False, False, False), (True, True, True)],
                         ids=["coverage_attention", "coverage_loss_only", "no_coverage", "one_step"])
def test_backward_matches_finite_differences(coverage, accumulate, one):
    assert torch.autograd.gradcheck(lambda *x: FusedSteps.apply(accumulate, *x), inputs(coverage, one),
                                    atol=1e-8, rtol=1e-6)


def test_one_step_equals_the_loop():
    """Beam search's step without buffers gives the loop's numbers."""
    gates_x, _, *rest = inputs(coverage=True, one=True)
    weights, memory, start = StepWeights(None, *rest[:4]), Memory(*rest[4:7]), list(rest[7:])
    with torch.no_grad():
        for got, expected in zip(one_step(gates_x, weights, memory, start, True),
                                 run_loop(gates_x, weights, memory, start, True)):
            torch.testing.assert_close(got, expected, rtol=1e-12, atol=1e-12)


def fused_and_modules(**options):
    """The same tiny pgn_lstm twice in float64: fused steps, and module by module."""
    torch.manual_seed(0)
    fused = tiny_model(DICT, **options).double()
    modules = copy.deepcopy(fused)
    modules.decoder.fused = False
    assert fused.decoder.fused
    return fused, modules


def outputs_and_gradients(model, src, lengths, prev):
    model.zero_grad()
    logits, extra = model(src, lengths, prev)
    log_probs = model.get_normalized_probs((logits, extra), log_probs=True)
    loss = log_probs.masked_fill(torch.isinf(log_probs), 0).sin().sum() + extra["attn"][0].cos().sum()
    if "coverage" in extra:
        loss = loss + torch.minimum(extra["attn"][0], extra["coverage"]).sum()  # See eq 12's coverage loss
    loss.backward()
    gradients = [None if p.grad is None else p.grad.clone() for p in model.parameters()]
    return log_probs, extra, gradients


@pytest.mark.parametrize("options", [{}, {"no_coverage_attention": True}, {"no_coverage": True, "no_copy": True},
                                     {"attention_dim": 3, "dropout": 0.0}],
                         ids=["see", "coverage_loss_only", "plain_attention", "attention_dim"])
def test_model_matches_module_by_module(options):
    fused, modules = fused_and_modules(**options)
    batch = tiny_batch(DICT)
    got, got_extra, got_grads = outputs_and_gradients(fused, *batch)
    expected, expected_extra, expected_grads = outputs_and_gradients(modules, *batch)
    torch.testing.assert_close(got, expected, rtol=1e-9, atol=1e-9)
    for key in ("decoder_states", "coverage", "p_gen"):
        if key in expected_extra:
            torch.testing.assert_close(got_extra[key], expected_extra[key], rtol=1e-9, atol=1e-9)
    assert_same_gradients(got_grads, expected_grads, fused)


def test_incremental_decoding_equals_full_forward():
    fused, _ = fused_and_modules()
    fused.eval()
    with torch.no_grad():
        assert_incremental_equals_full(fused, *tiny_batch(DICT))


def test_cpu_blocks_give_the_one_block_gradients(monkeypatch):
    """The CPU's cache-sized blocks of the attention (one batch row per block here) against one block."""
    fused, _ = fused_and_modules()
    batch = tiny_batch(DICT)
    monkeypatch.setattr(additive_scores, "BLOCK_FLOATS", 10**9)
    one = outputs_and_gradients(fused, *batch)
    monkeypatch.setattr(additive_scores, "BLOCK_FLOATS", 1)
    blocks = outputs_and_gradients(fused, *batch)
    torch.testing.assert_close(blocks[0], one[0], rtol=1e-12, atol=1e-12)
    assert_same_gradients(blocks[2], one[2], fused)


def test_bfloat16_autocast_keeps_coverage_in_float32():
    torch.manual_seed(0)
    model = tiny_model(DICT)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        logits, extra = model(*tiny_batch(DICT))
        loss = logits.float().logsumexp(-1).sum() + extra["coverage"].sum()
    loss.backward()
    assert extra["coverage"].dtype == torch.float32 and extra["attn"][0].dtype == torch.float32
    assert all(torch.isfinite(p.grad).all() for p in model.parameters() if p.grad is not None)
    assert model.decoder.layers[0].weight_hh.grad.abs().sum() > 0


def test_architectures_that_are_not_fused_say_so():
    """Only See's readout with one layer and the additive attention is fused; --no-fused-steps turns it off."""
    assert tiny_model(DICT).decoder.fused
    assert not tiny_model(DICT, no_fused_steps=True).decoder.fused
    assert not tiny_model(DICT, decoder_readout="luong").decoder.fused
    assert not tiny_model(DICT, decoder_layers=2).decoder.fused
    assert not tiny_model(DICT, decoder_readout="paulus", intra_temporal_attention=True, no_coverage=True).decoder.fused


def test_inconsistent_shapes_are_refused():
    gates_x, w_feed, *rest = inputs(coverage=True)
    weights, memory, start = StepWeights(w_feed, *rest[:4]), Memory(*rest[4:7]), list(rest[7:])
    with pytest.raises(ValueError, match=r"gates_x .* 4 x the hidden size"):
        fused_steps(gates_x[:, :, :-1], weights, memory, start, True)
    with pytest.raises(ValueError, match=r"keys .* values"):
        fused_steps(gates_x, weights, Memory(memory.keys[:, :-1], memory.values, memory.padding_mask), start, True)


def reference_cell(input_gates, hidden_gates, cell):
    """What torch's fused CUDA cell computes (aten::_thnn_fused_lstm_cell), in tensor operations."""
    i, f, g, o = (input_gates + hidden_gates).chunk(4, dim=1)
    acts = torch.cat([i.sigmoid(), f.sigmoid(), g.tanh(), o.sigmoid()], dim=1)
    i, f, g, o = acts.chunk(4, dim=1)
    after = f * cell + i * g
    return o * after.tanh(), after, acts


def reference_cell_backward(d_state, d_cell, before, after, acts):
    """What its backward kernel computes (aten::_thnn_fused_lstm_cell_backward_impl)."""
    i, f, g, o = acts.chunk(4, dim=1)
    tanh_after = after.tanh()
    d_after = d_state * o * (1 - tanh_after**2) + d_cell
    d_gates = torch.cat([d_after * g * i * (1 - i), d_after * before * f * (1 - f), d_after * i * (1 - g**2),
                         d_state * tanh_after * o * (1 - o)], dim=1)
    return d_gates, d_after * f


def test_the_gpu_cell_kernel_path_gives_the_same_gradients(monkeypatch):
    """The loops' path through torch's fused cell kernels (a GPU's), with the kernels' documented semantics in
    tensor operations, against the composed cell of the CPU: same outputs and gradients."""
    import fairseq_plugins.accelerated.fused_steps as fused_module

    fused, _ = fused_and_modules()
    batch = tiny_batch(DICT)
    composed = outputs_and_gradients(fused, *batch)
    monkeypatch.setattr(fused_module, "cell_kernels", lambda tensor: True)
    monkeypatch.setattr(fused_module, "kernel_cell", reference_cell)
    monkeypatch.setattr(fused_module, "kernel_cell_backward", reference_cell_backward)
    kernels = outputs_and_gradients(fused, *batch)
    torch.testing.assert_close(kernels[0], composed[0], rtol=1e-10, atol=1e-10)
    assert_same_gradients(kernels[2], composed[2], fused)
    fused.eval()
    with torch.no_grad():
        assert_incremental_equals_full(fused, *batch)


@pytest.mark.cuda
def test_cuda_fused_steps_match_module_by_module():
    """On a GPU, through torch's own fused cell kernels: outputs and gradients of the module-by-module model."""
    fused, modules = fused_and_modules()
    fused, modules = fused.cuda(), modules.cuda()
    batch = [x.cuda() for x in tiny_batch(DICT)]
    got, _, got_grads = outputs_and_gradients(fused, *batch)
    expected, _, expected_grads = outputs_and_gradients(modules, *batch)
    torch.testing.assert_close(got, expected, rtol=1e-9, atol=1e-9)
    assert_same_gradients(got_grads, expected_grads, fused)
    fused.eval()
    with torch.no_grad():  # a beam step (one step through the kernel) against the full forward pass
        state = {}
        full = fused.get_normalized_probs(fused(*batch), log_probs=True)
        encoder_out = fused.encoder(*batch[:2])
        for t in range(batch[2].size(1)):
            step = fused.decoder(batch[2][:, : t + 1], encoder_out, incremental_state=state)
            torch.testing.assert_close(fused.get_normalized_probs(step, log_probs=True)[:, 0], full[:, t],
                                       rtol=1e-9, atol=1e-9)


def test_the_forward_step_is_stated_once():
    """The loop, a beam step and the captured graphs all run ``see_step``: it alone computes the LSTM cell, the
    scores, the attention and the context, so a change to See et al.'s step is made in one place."""
    import ast
    import inspect

    import fairseq_plugins.accelerated.fused_steps as fused_module
    import fairseq_plugins.accelerated.step_graphs as graphs_module

    def callers(module, names):
        tree = ast.parse(inspect.getsource(module))
        found = {}
        for function in ast.walk(tree):
            if isinstance(function, ast.FunctionDef):
                for node in ast.walk(function):
                    if isinstance(node, ast.Call):
                        name = getattr(node.func, "attr", getattr(node.func, "id", None))
                        if name in names:
                            found.setdefault(name, set()).add(function.name)
        return found

    step_operations = {"scores_step", "softmax", "bmm", "lstm_cell", "kernel_cell", "composed_cell", "see_step"}
    assert callers(fused_module, step_operations) == {
        "scores_step": {"see_step"}, "softmax": {"see_step"}, "bmm": {"see_step", "backward_loop"},
        "lstm_cell": {"see_step"}, "kernel_cell": {"lstm_cell"}, "composed_cell": {"lstm_cell"},
        "see_step": {"run_loop", "one_step"}}
    assert not callers(graphs_module, step_operations - {"bmm"})  # it replays run_loop


def test_softmax_backward_without_torchs_private_operator(monkeypatch):
    """The public formula that stands in for torch._softmax_backward_data gives autograd's gradient of softmax,
    and the fused backward still passes finite differences with it."""
    import fairseq_plugins.accelerated.torch_ops as torch_ops

    scores = torch.randn(3, 1, 5, dtype=torch.float64, requires_grad=True)
    grad = torch.randn(3, 1, 5, dtype=torch.float64)
    expected, = torch.autograd.grad(torch.softmax(scores, dim=2), scores, grad)
    output = torch.softmax(scores, dim=2).detach()
    assert torch_ops.SOFTMAX_BACKWARD  # this torch has it: the fused backward's path on every test machine
    torch.testing.assert_close(torch_ops.softmax_backward(grad, output, 2), expected, rtol=1e-12, atol=1e-12)
    monkeypatch.setattr(torch_ops, "SOFTMAX_BACKWARD", False)
    torch.testing.assert_close(torch_ops.softmax_backward(grad, output, 2), expected, rtol=1e-12, atol=1e-12)
    assert torch.autograd.gradcheck(lambda *x: FusedSteps.apply(True, *x), inputs(True), atol=1e-8, rtol=1e-6)


def test_a_torch_without_the_fused_cell_kernels_runs_the_composed_cell(monkeypatch):
    """Where torch lacks its private CUDA cell operators, even a GPU tensor takes the cell in tensor operations."""
    import fairseq_plugins.accelerated.fused_steps as fused_module
    import fairseq_plugins.accelerated.torch_ops as torch_ops

    class OnGpu:
        is_cuda = True

    assert fused_module.cell_kernels(OnGpu()) == torch_ops.FUSED_CELL
    monkeypatch.setattr(torch_ops, "FUSED_CELL", False)
    assert not fused_module.cell_kernels(OnGpu())
