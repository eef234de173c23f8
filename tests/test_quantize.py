"""int8 dynamic quantisation of the decoders (fairseq_plugins/inference/quantize.py): every architecture
quantizes its planned modules (and only them) and still decodes with beam search; generate.sh --quantize int8, the hub's
``quantize="int8"`` and ``summ-serve --quantize int8`` give the same summaries; bad values are usage errors."""
import copy

import pytest
import torch
import torch.nn as nn

import test_dca_lstm
from conftest import run, tiny_batch, tiny_dictionary, tiny_gru, tiny_model
from fairseq_plugins.inference import quantize
from fairseq_plugins.generation.generator import SummarizationGenerator

DICT = tiny_dictionary()
PAULUS = dict(decoder_readout="paulus", intra_temporal_attention=True, intra_decoder_attention=True,
              shared_output_projection=True, no_coverage=True)  # the pgn_lstm_paulus2017 preset's options
SEE = ["decoder.layers.0", "decoder.readout.pre_output", "decoder.output_projection"]
# name -> (build the model, the modules expected in int8)
ARCHITECTURES = {
    "pgn_lstm (See)": (lambda: tiny_model(DICT), SEE),
    "pgn_lstm (See), 2 layers": (lambda: tiny_model(DICT, decoder_layers=2),
                                 ["decoder.layers.0", "decoder.layers.1", *SEE[1:]]),
    "pgn_lstm (Luong, Shi et al.)": (lambda: tiny_model(DICT, decoder_readout="luong", embed_norm=True),
                                     ["decoder.layers.0", "decoder.readout.attentional", "decoder.output_projection"]),
    # the shared projection tanh(W_emb W_proj) reads the embedding's .weight: it stays float
    "pgn_lstm (Paulus preset)": (lambda: tiny_model(DICT, **PAULUS), ["decoder.lstm"]),
    "pgn_lstm (Paulus readout, free output)": (
        lambda: tiny_model(DICT, decoder_readout="paulus", intra_decoder_attention=True),
        ["decoder.lstm", "decoder.output_projection"]),
    # tied output layer: F.linear over the embedding matrix, no output_projection
    "pgn_lstm (tied embeddings)": (
        lambda: tiny_model(DICT, share_decoder_input_output_embed=True, decoder_out_embed_dim=8, decoder_embed_dim=8),
        ["decoder.layers.0", "decoder.readout.pre_output"]),
    "global_gate_gru": (lambda: tiny_gru(DICT), ["decoder.cell", "decoder.readout", "decoder.output_projection"]),
    "global_gate_gru + copy": (lambda: tiny_gru(DICT, copy=True),
                               ["decoder.cell", "decoder.readout", "decoder.output_projection"]),
    "dca_lstm": (test_dca_lstm.build, ["decoder.lstm", "decoder.pre_output", "decoder.output_projection"]),
}
FLOAT_TYPES = (nn.Linear, nn.LSTM, nn.LSTMCell, nn.GRUCell, nn.GRU, nn.Embedding)


def batch_for(name):
    """(dictionary, source tokens, lengths) that the architecture reads."""
    if name == "dca_lstm":
        src, lengths, _ = test_dca_lstm.batch()
        return test_dca_lstm.DICT, src, lengths
    src, lengths, _ = tiny_batch(DICT)
    return DICT, src, lengths


def beam_search(model, dictionary, src, lengths):
    generator = SummarizationGenerator([model], dictionary, beam_size=3, max_len_b=8, min_len=2)
    sample = {"net_input": {"src_tokens": src, "src_lengths": lengths}, "id": torch.arange(src.size(0))}
    with torch.no_grad():
        return generator.generate([model], sample)


def log_probs(model, src, lengths, prev_length=4):
    """Teacher-forced log P(w) over the extended vocabulary: B x T x V_ext."""
    prev = src[:, -prev_length:].clone()
    with torch.no_grad():
        out = model(src, lengths, prev)
    return model.get_normalized_probs(out, log_probs=True)


@pytest.mark.parametrize("name", ARCHITECTURES)
def test_each_architecture_quantizes_its_planned_modules_and_decodes(name):
    build, expected = ARCHITECTURES[name]
    torch.manual_seed(0)
    model = build().eval()
    int8 = copy.deepcopy(model)
    assert quantize.plan(int8) == expected
    assert quantize.quantize_model(int8, "int8") == expected
    assert sorted(quantize.quantized_modules(int8)) == sorted(expected)
    for module_name in expected:  # int8 weights: torch's dynamic quantized modules, packed qint8
        module = int8.get_submodule(module_name)
        assert type(module).__module__.startswith("torch.ao.nn.quantized.dynamic"), module_name
        dtype = module.weight().dtype if isinstance(module, torch.ao.nn.quantized.dynamic.Linear) else (
            getattr(module, "weight_dtype", None) or module.dtype)  # the cells' weight_dtype, the LSTM's dtype
        assert dtype == torch.qint8, module_name
    for module_name, module in int8.named_modules():  # everything else keeps float32 weights
        if isinstance(module, FLOAT_TYPES):
            assert module_name not in expected
            assert all(p.dtype == torch.float32 for p in module.parameters(recurse=False)), module_name
    assert sum(p.numel() for p in int8.parameters()) < sum(p.numel() for p in model.parameters())

    dictionary, src, lengths = batch_for(name)
    hypos = beam_search(int8, dictionary, src, lengths)
    assert len(hypos) == src.size(0) and all(len(h) == 3 for h in hypos)  # one n-best list per input, in order
    assert all(torch.isfinite(h[0]["positional_scores"]).all() for h in hypos)
    # int8 approximates the float model: the same distributions up to the quantisation error
    expected_lp, got_lp = log_probs(model, src, lengths), log_probs(int8, src, lengths)
    finite = torch.isfinite(expected_lp)
    assert torch.equal(finite, torch.isfinite(got_lp))  # P(w) = 0 stays 0 (markers absent from the source)
    assert (got_lp.exp() - expected_lp.exp()).abs().max() < 0.05


def test_the_original_float_model_is_not_touched_by_planning():
    model = tiny_model(DICT).eval()
    quantize.plan(model)
    assert quantize.quantized_modules(model) == []


def test_a_decoder_without_a_plan_is_refused():
    model = tiny_model(DICT).eval()

    class OtherDecoder(nn.Module):
        pass

    model.decoder = OtherDecoder()
    with pytest.raises(quantize.QuantizeError, match="no int8 plan for the decoder OtherDecoder"):
        quantize.plan(model)


@pytest.mark.parametrize("scheme, device, message", [
    ("int4", None, "unknown quantize 'int4' (choose from int8"),
    ("int8", "cuda", "CPU only, not on 'cuda'"),
    ("int8", "cuda:1", "CPU only, not on 'cuda:1'"),
])
def test_bad_scheme_or_device_is_a_clear_error(scheme, device, message):
    with pytest.raises(quantize.QuantizeError) as error:
        quantize.check_quantize(scheme, device)
    assert message in str(error.value)
    assert isinstance(error.value, ValueError)


def test_quantizing_a_model_off_the_cpu_is_refused():
    model = tiny_model(DICT).eval().to("meta")  # a device that is not the CPU (no GPU needed)
    with pytest.raises(quantize.QuantizeError, match="CPU only, not on 'meta'"):
        quantize.quantize_model(model)
    assert quantize.quantized_modules(model) == []


@pytest.mark.parametrize("options, message", [
    ({"quantize": "int4"}, "unknown quantize 'int4'"),
    ({"quantize": "int8", "device": "cuda"}, "CPU only"),
])
def test_hub_refuses_a_bad_quantize_before_reading_the_checkpoint(tmp_path, options, message):
    from fairseq_plugins.inference.hub import Summarizer

    with pytest.raises(ValueError, match=message):
        Summarizer.from_pretrained(tmp_path / "no-such-model", **options)


@pytest.mark.parametrize("options, message", [
    (["--quantize", "int4"], "invalid choice: 'int4'"),
    (["--quantize", "int8", "--device", "cuda"], "CPU only"),
])
def test_summ_serve_refuses_a_bad_quantize_with_exit_2(tmp_path, capsys, options, message):
    from fairseq_plugins.cli.serve import main

    try:
        status = main([str(tmp_path), *options])
    except SystemExit as exit_:  # argparse's usage error
        status = exit_.code
    assert status == 2
    assert message in capsys.readouterr().err


# ---------------------------------------------------------------------------------------------- end to end
@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    from serving import tiny_model as trained_tiny_model

    return trained_tiny_model(tmp_path_factory)


@pytest.mark.slow
@pytest.mark.parametrize("options, message", [
    (["--quantize", "int4"], "--quantize: unknown scheme 'int4' (int8)"),
    (["--quantize", ""], "--quantize needs a value"),
    (["--quantize", "int8", "DATA", "MODEL", "--fp16"], "does not combine with --fp16"),
])
def test_generate_sh_bad_quantize_is_a_usage_error(options, message):
    result = run(["./generate.sh", *options, *(["DATA", "MODEL"] if "DATA" not in options else [])], check=False)
    assert result.returncode == 2
    assert message in result.stderr


@pytest.mark.slow
def test_generate_sh_hub_and_server_agree_in_int8(trained, tmp_path):
    from serving import Server, sample_documents

    from fairseq_plugins.inference.hub import Summarizer

    _, data, model, config = trained
    documents = sample_documents()
    (tmp_path / "docs.txt").write_text("\n".join(documents) + "\n", encoding="utf-8")
    script = run(["./generate.sh", "-c", config, "--quantize", "int8", "--input", tmp_path / "docs.txt",
                  "--output", tmp_path / "int8.txt", data, model, "--beam", "3", "--max-len-b", "20"])
    assert "decoder in int8" in script.stderr
    log = (tmp_path / "int8.txt.log").read_text(encoding="utf-8")
    assert "decoder modules in int8: decoder.layers.0, decoder.readout.pre_output, decoder.output_projection" in log
    expected = (tmp_path / "int8.txt").read_text(encoding="utf-8").split("\n")[:-1]
    assert len(expected) == len(documents)

    summarizer = Summarizer.from_pretrained(model, quantize="int8")
    assert summarizer.device.type == "cpu" and quantize.quantized_modules(summarizer.model)
    assert summarizer.summarize(documents, beam=3, max_len_b=20) == expected

    server = Server(model, "--quantize", "int8")
    try:
        assert server.summaries(documents, beam=3, max_len_b=20) == expected
    finally:
        server.stop()


# ---------------------------------------------------------------------------------------------- the benchmark
@pytest.mark.parametrize("argv, message", [
    (["--models", "none"], "--models none needs --quantize int8 --quantize-checkpoint FILE"),
    (["--quantize-checkpoint", "x.pt"], "--quantize-checkpoint needs --quantize int8"),
    (["--quantize", "int8", "--models", "lstm"], "--quantize needs the pgn_lstm row"),
    (["--quantize", "int4"], "invalid choice: 'int4'"),
    (["--quantize", "int8", "--quantize-checkpoint", "no-such.pt", "--models", "none"],
     "--quantize-checkpoint: no file no-such.pt"),
])
def test_throughput_quantize_options_are_checked(root, capsys, argv, message):
    import sys

    from scripts.bench import throughput

    with pytest.raises(SystemExit) as exit_:
        throughput.parse_args(argv)
    assert exit_.value.code == 2 and message in capsys.readouterr().err
