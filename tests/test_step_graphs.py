"""The fused recurrence through captured shapes (accelerated/step_graphs.py): padded to its bucket, its static
tensors filled and read back, the same outputs and gradients as accelerated/fused_steps.py, on a CPU with the loops
run in place of graphs (``GraphCache(eager=True)``) and, on a GPU, with real CUDA graphs: shapes that share a
bucket, a second forward before the first backward, a gradient of the last cell, the GPU's cell-kernel path,
the model's --cuda-graphs; and what is refused or left to the plain function."""
import pytest
import torch

import fairseq_plugins.accelerated.fused_steps as fused_module
from conftest import assert_same_gradients, tiny_batch, tiny_dictionary, tiny_model
from fairseq_plugins.accelerated.fused_steps import Memory, StepWeights, fused_steps
from fairseq_plugins.accelerated.step_graphs import BUCKETS, GraphCache, Shape, graphed_steps
from test_fused_steps import reference_cell, reference_cell_backward

H, F, A = 4, 6, 5


def call_inputs(bsz: int, steps: int, source: int, coverage: bool = True, masked: bool = True, seed: int = 0,
                device: str = "cpu"):
    """fused_steps' arguments (float64 on a CPU, float32 on a GPU), gradients wanted; row 0's source padded
    after its second position."""
    generator = torch.Generator().manual_seed(seed)
    dtype = torch.float64 if device == "cpu" else torch.float32

    def param(*shape):
        return (0.5 * torch.randn(*shape, generator=generator, dtype=dtype)).to(device).requires_grad_()

    mask = None
    if masked:
        mask = torch.zeros(bsz, source, dtype=torch.bool, device=device)
        mask[0, 2:] = True
    weights = StepWeights(param(4 * H, F), param(4 * H, H), param(A, H), param(A) if coverage else None, param(A))
    memory = Memory(param(bsz, source, A), param(bsz, source, F), mask)
    start = [param(bsz, H), param(bsz, H), param(bsz, F), torch.zeros(bsz, source, dtype=dtype, device=device)]
    return param(bsz, steps, 4 * H), weights, memory, start


def leaves(gates_x, weights, memory, start):
    return [x for x in (gates_x, *weights, memory.keys, memory.values, *start) if x is not None and x.requires_grad]


def run(function, inputs, accumulate=True, last_cell_grad=False, **kwargs):
    """Outputs and the gradients of every input from a weighted sum of the outputs (the last cell's too with
    LAST_CELL_GRAD)."""
    outputs = function(*inputs, accumulate=accumulate, **kwargs)
    generator = torch.Generator().manual_seed(7)
    weigh = [torch.randn(x.shape, generator=generator, dtype=x.dtype).to(x.device) for x in outputs]
    used = outputs[:4] + (outputs[4:5] if last_cell_grad else ())
    loss = sum((w * x).sum() for w, x in zip(weigh, used))
    return [x.detach() for x in outputs], torch.autograd.grad(loss, leaves(*inputs))


def graphed(cache):
    return lambda *inputs, accumulate: graphed_steps(cache, *inputs, accumulate=accumulate)


def assert_close_all(got, expected, tolerance):
    for a, b in zip(got, expected):
        torch.testing.assert_close(a, b, rtol=tolerance, atol=tolerance)


@pytest.mark.parametrize("coverage, accumulate, masked", [(True, True, True), (False, True, True),
                                                          (False, False, False), (True, True, False)],
                         ids=["coverage_attention", "coverage_loss_only", "no_coverage", "no_mask"])
def test_padded_to_its_bucket_it_gives_the_plain_outputs_and_gradients(coverage, accumulate, masked):
    shape = (3, 5, 7)  # none a multiple of its bucket
    assert Shape(*shape).bucket() == Shape(*BUCKETS)
    inputs = call_inputs(*shape, coverage=coverage, masked=masked)
    expected = run(fused_steps, inputs, accumulate)
    cache = GraphCache(eager=True)
    got = run(graphed(cache), inputs, accumulate)
    assert [tuple(x.shape) for x in got[0]] == [tuple(x.shape) for x in expected[0]]
    assert_close_all(got[0], expected[0], 1e-12)
    assert_close_all(got[1], expected[1], 1e-12)
    assert cache.captures == 1


def test_shapes_of_one_bucket_share_a_capture_and_a_second_forward_before_a_backward_is_kept_apart():
    """Two calls of one bucket (other documents, steps, source lengths): one capture.  Their forwards both run
    before either backward (the ML and RL passes of one update, say): each backward still gets its own call's
    gradients."""
    cache = GraphCache(eager=True)
    first, second = call_inputs(3, 5, 7, seed=1), call_inputs(6, 8, 12, seed=2)
    expected = [run(fused_steps, first), run(fused_steps, second)]
    outputs = [graphed_steps(cache, *x, accumulate=True) for x in (first, second)]
    assert cache.captures == 1 and len(cache.entries) == 1
    for (plain_outputs, plain_grads), got, inputs in zip(reversed(expected), reversed(outputs), (second, first)):
        generator = torch.Generator().manual_seed(7)
        weigh = [torch.randn(x.shape, generator=generator, dtype=x.dtype) for x in got]
        grads = torch.autograd.grad(sum((w * x).sum() for w, x in zip(weigh, got[:4])), leaves(*inputs))
        assert_close_all([x.detach() for x in got], plain_outputs, 1e-12)
        assert_close_all(grads, plain_grads, 1e-12)


def test_a_gradient_of_the_last_cell_reaches_the_right_step():
    """With padded steps the real last cell is not the loop's last: its gradient takes the path without a graph,
    and gives the plain gradients."""
    inputs = call_inputs(3, 5, 7)
    expected = run(fused_steps, inputs, last_cell_grad=True)
    got = run(graphed(GraphCache(eager=True)), inputs, last_cell_grad=True)
    assert_close_all(got[1], expected[1], 1e-12)


def test_the_gpu_cell_kernel_path_is_kept_and_restored_through_the_copies(monkeypatch):
    """The loops' path through torch's fused cell kernels (a GPU's: no tanh of the cells kept), with the kernels'
    semantics in tensor operations."""
    monkeypatch.setattr(fused_module, "cell_kernels", lambda tensor: True)
    monkeypatch.setattr(fused_module, "kernel_cell", reference_cell)
    monkeypatch.setattr(fused_module, "kernel_cell_backward", reference_cell_backward)
    inputs = call_inputs(3, 5, 7)
    expected = run(fused_steps, inputs)
    got = run(graphed(GraphCache(eager=True)), inputs)
    assert_close_all(got[0], expected[0], 1e-12)
    assert_close_all(got[1], expected[1], 1e-12)


def test_only_training_passes_of_several_steps_on_a_gpu_are_taken():
    gates_x, weights, memory, start = call_inputs(3, 5, 7)
    assert GraphCache(eager=True).takes(gates_x, weights)
    assert not GraphCache().takes(gates_x, weights)  # a CPU tensor: the plain function
    with torch.no_grad():
        assert not GraphCache(eager=True).takes(gates_x, weights)  # no gradient (beam search, validation)
    assert not GraphCache(eager=True).takes(gates_x[:, :1], weights._replace(feed=None))  # one incremental step


def test_a_copy_of_the_model_starts_without_graphs():
    import copy

    cache = GraphCache(eager=True)
    graphed_steps(cache, *call_inputs(3, 5, 7), accumulate=True)
    twin = copy.deepcopy(cache)
    assert cache.entries and not twin.entries and twin.eager


DICT = tiny_dictionary("a b c d e f g")


def test_the_model_with_cuda_graphs_builds_a_cache_leaves_a_cpu_to_the_plain_function_and_needs_fusion():
    graphs = tiny_model(DICT, cuda_graphs=True)
    plain = tiny_model(DICT)
    assert isinstance(graphs.decoder.step_graphs, GraphCache) and plain.decoder.step_graphs is None
    graphs.load_state_dict(plain.state_dict())
    src, lengths, prev = tiny_batch(DICT)
    got, expected = graphs(src, lengths, prev)[0], plain(src, lengths, prev)[0]
    torch.testing.assert_close(got, expected, rtol=0, atol=0)
    assert not graphs.decoder.step_graphs.entries  # a CPU: nothing captured
    with pytest.raises(ValueError, match="--cuda-graphs replays the fused recurrence"):
        tiny_model(DICT, cuda_graphs=True, no_fused_steps=True)


@pytest.mark.cuda
@pytest.mark.parametrize("coverage", [True, False], ids=["coverage", "no_coverage"])
def test_on_cuda_replayed_graphs_give_the_plain_outputs_and_gradients(coverage):
    """Real CUDA graphs, float32: three calls of one bucket (the second and third replay the first's capture),
    each against the plain function."""
    cache = GraphCache()
    for seed, shape in enumerate([(3, 5, 7), (8, 8, 16), (5, 2, 9)]):
        inputs = call_inputs(*shape, coverage=coverage, seed=seed, device="cuda")
        expected = run(fused_steps, inputs)
        got = run(graphed(cache), inputs)
        assert_close_all(got[0], expected[0], 1e-5)
        assert_close_all(got[1], expected[1], 1e-4)
    assert cache.captures == 1


@pytest.mark.cuda
def test_on_cuda_the_model_with_cuda_graphs_trains_like_the_plain_one():
    graphs = tiny_model(DICT, cuda_graphs=True).cuda()
    plain = tiny_model(DICT).cuda()
    graphs.load_state_dict(plain.state_dict())
    graphs.train(), plain.train()
    batch = [x.cuda() for x in tiny_batch(DICT)]
    for model in (graphs, plain):
        torch.manual_seed(3)
        model(*batch)[0].float().logsumexp(-1).sum().backward()
    assert graphs.decoder.step_graphs.captures == 1
    assert_same_gradients([p.grad for p in graphs.parameters()], [p.grad for p in plain.parameters()], graphs)
