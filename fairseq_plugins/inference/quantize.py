"""int8 dynamic quantisation of a summarization decoder's large matrices, for decoding on a CPU.

    generate.sh --quantize int8 ...                         (fairseq-generate / -interactive through ``main``)
    Summarizer.from_pretrained(model_dir, quantize="int8")  (fairseq_plugins/inference/hub.py)
    summ-serve MODEL_DIR --quantize int8                    (fairseq_plugins/serve/app.py)

All three call :func:`quantize_model`.  "Dynamic" int8: the weights of the chosen modules are stored as int8
(one scale per matrix); each call quantizes its input on the fly, multiplies in int8 with int32 accumulation
(fbgemm / oneDNN on x86) and returns float32.  Nothing is calibrated and the checkpoint is not changed.

Which library: ``torch.ao.quantization.quantize_dynamic``, part of torch itself (no new dependency), marked
deprecated in favour of torchao (its DeprecationWarning is silenced here); docs/design.md says why not torchao.

Which modules.  Not the whole decoder: some of our modules read the ``.weight`` of their submodules directly
(the additive attentions' ``v.weight`` in fused score kernels, tied output layers that multiply by the
embedding matrix, Paulus et al.'s shared projection tanh(W_emb W_proj)), and a quantized module has no float
``.weight``.  So each decoder class has an explicit plan (:data:`PLANS`): its recurrent cells and the matrices
of its readout and output layer, the per-step work of beam search.  A planned module is quantized only when it
is exactly an ``nn.Linear``, ``nn.LSTM``, ``nn.LSTMCell`` or ``nn.GRUCell``: a tied output layer
(``--share-decoder-input-output-embed``, ``--shared-output-projection``) has no ``output_projection`` Linear
and stays float, as do the embeddings, the attentions, the copy switch (one output row), the initial-state
projections (once per document) and the encoder (once per document).

What it gains depends on how much of a decode these matrices are; the option is off by default because on the
project's models they are a small part of a beam-search decode (docs/design.md, docs/results/quantize_int8.md).
"""
import logging
import warnings
from typing import Dict, List, Sequence

import torch
import torch.nn as nn

CHOICES = ("int8",)
# Per decoder class: the submodules (names relative to the decoder) to quantize, when present.  A ModuleList
# (pgn_lstm's stacked LSTM cells) stands for its members.
PLANS: Dict[str, Sequence[str]] = {
    # pgn_lstm's decoders: LSTM cells (FedDecoder: See / Luong readouts, input feeding) or one nn.LSTM
    # (UnfedDecoder: the Paulus preset); See's V (See eq 4) or Luong's W_c (Shi eq 3); the output layer V' /
    # W_vocab / W_out when it is not tied
    "FedDecoder": ("layers", "readout.pre_output", "readout.attentional", "output_projection"),
    "UnfedDecoder": ("lstm", "output_projection"),
    # global_gate_gru: the GRU cell (Song eq 11), the readout W_r (Song eq 19) and W_o (Song eq 17)
    "GlobalGateDecoder": ("cell", "readout", "output_projection"),
    # dca_lstm: the decoder LSTM, V (~Celikyilmaz eqs 12-13) and V'
    "DCADecoder": ("lstm", "pre_output", "output_projection"),
}
QUANTIZABLE = (nn.Linear, nn.LSTM, nn.LSTMCell, nn.GRUCell)  # exact types: quantize_dynamic's own mapping

logger = logging.getLogger("fairseq_plugins.inference.quantize")  # also under python -m


class QuantizeError(ValueError):
    """A quantisation that cannot be done: an unknown scheme, a device other than the CPU, a decoder without a
    plan."""


def check_quantize(quantize, device=None) -> None:
    """A QuantizeError unless ``quantize`` is None or one of :data:`CHOICES` and ``device`` (a torch.device, a
    string or None) is the CPU: the int8 kernels are CPU kernels."""
    if quantize is None:
        return
    if quantize not in CHOICES:
        raise QuantizeError(f"unknown quantize {quantize!r} (choose from {', '.join(CHOICES)}, or none)")
    if device is not None and str(device).split(":")[0] != "cpu":  # "cuda", "cuda:1", torch.device("cuda")
        raise QuantizeError(f"quantize {quantize!r} decodes on the CPU only, not on {str(device)!r} "
                            f"(its int8 kernels are CPU kernels): use device 'cpu'")
    engines = torch.backends.quantized.supported_engines
    if not any(engine in engines for engine in ("x86", "fbgemm", "onednn", "qnnpack")):
        raise QuantizeError(f"this torch has no int8 CPU engine (supported: {engines})")


def plan(model: nn.Module) -> List[str]:
    """Names (relative to ``model``) of the modules :func:`quantize_model` turns into int8 ones, in order."""
    decoder = model.decoder
    names = PLANS.get(type(decoder).__name__)
    if names is None:
        raise QuantizeError(f"no int8 plan for the decoder {type(decoder).__name__} (known: {', '.join(PLANS)})")
    chosen = []
    for name in names:
        module = _submodule(decoder, name)
        members = list(module.named_children()) if isinstance(module, nn.ModuleList) else [("", module)]
        chosen += [f"decoder.{name}" + (f".{child}" if child else "") for child, member in members
                   if type(member) in QUANTIZABLE]
    return chosen


def _submodule(module: nn.Module, dotted: str):
    """The submodule at ``dotted`` (e.g. "readout.pre_output"), or None."""
    for part in dotted.split("."):
        module = getattr(module, part, None)
        if not isinstance(module, nn.Module):
            return None
    return module


def quantize_model(model: nn.Module, quantize: str = "int8") -> List[str]:
    """Quantize ``model``'s planned decoder modules to dynamic int8, in place (the model is put in eval mode and
    must be on the CPU).  Returns the names of the quantized modules."""
    check_quantize(quantize, next(model.parameters()).device)
    names = plan(model)
    from torch.ao.quantization import default_dynamic_qconfig, quantize_dynamic

    model.eval()
    with warnings.catch_warnings():  # load time only: torch.ao's deprecation notices, not a decoding call's
        warnings.simplefilter("ignore", DeprecationWarning)
        warnings.filterwarnings("ignore", message=".*quantize_per_tensor.*")
        quantize_dynamic(model, {name: default_dynamic_qconfig for name in names}, dtype=torch.qint8, inplace=True)
    return names


def quantized_modules(model: nn.Module) -> List[str]:
    """Names of ``model``'s modules that hold int8 weights (torch's dynamic quantized modules)."""
    from torch.ao.nn.quantized import dynamic

    int8 = (dynamic.Linear, dynamic.LSTM, dynamic.LSTMCell, dynamic.GRUCell)
    return [name for name, module in model.named_modules() if isinstance(module, int8)]


# ---------------------------------------------------------------------------------------------- fairseq CLIs
COMMANDS = {"fairseq-generate": "fairseq_cli.generate", "fairseq-interactive": "fairseq_cli.interactive"}


def quantizing(load, quantize: str):
    """``checkpoint_utils.load_model_ensemble`` (``load``) with each loaded model quantized."""
    def load_and_quantize(*args, **kwargs):
        models, cfg = load(*args, **kwargs)
        for model in models:
            logger.info("decoder modules in %s: %s", quantize, ", ".join(quantize_model(model, quantize)))
        return models, cfg
    return load_and_quantize
