"""The hub's generation options and device: a config's GEN_ARGS as keyword arguments of ``summarize`` (over
fairseq-interactive's defaults, as generate.sh decodes: generation/defaults.py), the options recorded with a
model, and the device checked."""
import argparse
import logging
from typing import Dict, Sequence

import torch

from fairseq_plugins.generation.defaults import DEFAULT_GENERATION, FAIRSEQ_GENERATION
from fairseq_plugins.runtime import run_config

# generate.sh runs fairseq-interactive with --buffer-size 64: inputs are batched 64 at a time.
INTERACTIVE_BUFFER_SIZE = 64

logger = logging.getLogger(__name__)


def resolve_device(device=None) -> torch.device:
    """``device`` (a string such as "cpu", "cuda", "cuda:1", or a torch.device) checked; None: CUDA when
    available, else the CPU.  A ValueError names a device torch does not know or a CUDA device this machine
    lacks, rather than the AssertionError torch raises deep inside ``model.to``."""
    if device is None:
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        device = torch.device(device)
    except (RuntimeError, TypeError) as err:
        raise ValueError(f"unknown device {device!r} (give e.g. 'cpu', 'cuda' or 'cuda:0'): {err}") from None
    if device.type == "cuda":
        if not torch.cuda.is_available():
            raise ValueError(f"device {str(device)!r}: CUDA is not available on this machine "
                             f"(torch.cuda.is_available() is False); use device='cpu'")
        if device.index is not None and device.index >= torch.cuda.device_count():
            raise ValueError(f"device {str(device)!r}: this machine has {torch.cuda.device_count()} CUDA devices")
    return device


def model_device(model) -> torch.device:
    """The device of the model's parameters (the CPU for a model without any)."""
    param = next(model.parameters(), None)
    return torch.device("cpu") if param is None else param.device


def generation_options(gen_args: Sequence[str]) -> Dict:
    """The keyword arguments of ``summarize`` that a config's GEN_ARGS (fairseq options) set, over fairseq's
    defaults; fairseq's ``--no-repeat-ngram-size N`` means ``block_ngram_repeat`` as in the summarization task.
    Options the API has no use for (e.g. ``--print-alignment``) are logged and left out."""
    parser = argparse.ArgumentParser(add_help=False, allow_abbrev=False)
    for option, kind in (("--beam", int), ("--max-len-a", float), ("--max-len-b", int), ("--min-len", int),
                         ("--lenpen", float), ("--batch-size", int), ("--block-ngram-repeat", int),
                         ("--block-immediate-repeat", int), ("--no-repeat-ngram-size", int), ("--block-ignore", str),
                         ("--coverage-penalty", float), ("--unkpen", float)):
        parser.add_argument(option, type=kind)
    parser.add_argument("--allow-unk", action="store_true", default=None)
    known, unused = parser.parse_known_args(list(gen_args))
    options = {key: value for key, value in vars(known).items() if value is not None}
    if "no_repeat_ngram_size" in options:
        options.setdefault("block_ngram_repeat", options.pop("no_repeat_ngram_size"))
    if unused:
        logger.info("generation options of the model's config that the Python API does not use: %s",
                    " ".join(unused))
    return dict(FAIRSEQ_GENERATION, **options)


def recorded_generation(model_dir) -> Dict:
    """``generation_options`` of the GEN_ARGS recorded in ``model_dir/config.json``; scitldr_small's, with a
    warning, for a model directory without one."""
    record = run_config.read(model_dir)
    if record is None:
        logger.warning("%s records no config (trained before config.json existed): decoding with "
                       "configs/scitldr_small.conf's generation options unless given", model_dir)
        return dict(DEFAULT_GENERATION)
    return generation_options(record["gen_args"])
