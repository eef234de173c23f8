#!/usr/bin/env python
"""OpenNMT-py 3.5.1's ``onmt_translate``, with the three fixes it needs to decode here, and the decoding timed as
fairseq-generate times it.  Run by the OpenNMT-py virtual environment's python (scripts/bench/peers/onmt.py);
it takes onmt_translate's own options.

What is changed, and only that:
  1. torch >= 2.6 loads checkpoints with ``weights_only=True``; OpenNMT-py's checkpoints hold an
     ``argparse.Namespace`` (its options).  The checkpoint, written by this benchmark a minute earlier, is loaded
     with that one class allow-listed.
  2. OpenNMT-py issue 2503: a model trained with ``-copy_attn`` saves its CopyGenerator's parameters as
     ``generator: {linear.weight, linear.bias, linear_copy.weight, linear_copy.bias}``, but
     ``NMTModel.load_state_dict`` looks those up as ``weight``/``bias`` and fails with "Missing key in checkpoint:
     generator.linear.weight".  They are moved to the model's own state under their full names
     (``generator.linear.weight`` ...), where the loader finds them.
  3. ``InferenceEnginePY.infer_file`` builds its data iterator without ``copy=True``, so batches have no
     ``src_map`` (the copy source map) and a copy model fails with KeyError: 'src_map'.  The iterator is built
     here with ``copy`` set from the model.
Decoding itself (beam search, -block_ngram_repeat, lengths) is OpenNMT-py's, untouched.

Timing: fairseq-generate's "Translated N sentences ... (X sentences/s" counts only the model's search
(task.inference_step), not data reading, detokenization or writing.  The same scope here: the seconds spent
inside ``Translator.translate_batch``.  The last line printed is

    BENCH-DECODE sentences=N seconds=S tokens=K

(K: predicted tokens of the best hypotheses, with </s> when a hypothesis ended with it).
"""
import argparse
import time

import torch

import onmt.model_builder
from onmt.bin.translate import _get_parser
from onmt.constants import CorpusTask
from onmt.inference_engine import InferenceEnginePY
from onmt.inputters.dynamic_iterator import build_dynamic_dataset_iter
from onmt.utils.misc import set_random_seed, use_gpu
from onmt.utils.parse import ArgumentParser

_stock_load_checkpoint = onmt.model_builder.load_checkpoint


def load_checkpoint(path):
    """Fixes 1 and 2 (see the module docstring)."""
    with torch.serialization.safe_globals([argparse.Namespace]):
        checkpoint = _stock_load_checkpoint(path)
    generator = checkpoint.get("generator") or {}
    if any(key.startswith("linear") for key in generator):  # a CopyGenerator's keys (OpenNMT-py issue 2503)
        checkpoint["model"].update({f"generator.{key}": value for key, value in generator.items()})
        checkpoint["generator"] = {}
    return checkpoint


class TimedSearch:
    """Wraps Translator.translate_batch: sums its seconds, sentences and predicted tokens."""

    def __init__(self, translator):
        self.translate_batch = translator.translate_batch
        self.seconds, self.sentences, self.tokens = 0.0, 0, 0

    def __call__(self, batch, attn_debug):
        start = time.perf_counter()
        result = self.translate_batch(batch, attn_debug)
        self.seconds += time.perf_counter() - start
        self.sentences += len(result["predictions"])
        self.tokens += sum(len(hypotheses[0]) for hypotheses in result["predictions"])
        return result


def main():
    opt = _get_parser().parse_args()
    ArgumentParser.validate_translate_opts(opt)  # as onmt/bin/translate.py does
    ArgumentParser._get_all_transform_translate(opt)
    ArgumentParser._validate_transforms_opts(opt)
    ArgumentParser.validate_translate_opts_dynamic(opt)
    set_random_seed(opt.seed, use_gpu(opt))

    onmt.model_builder.load_checkpoint = load_checkpoint
    engine = InferenceEnginePY(opt)
    translator = engine.translator
    timed = TimedSearch(translator)
    translator.translate_batch = timed
    infer_iter = build_dynamic_dataset_iter(opt, engine.transforms_cls, engine.vocabs, copy=translator.copy_attn,
                                            task=CorpusTask.INFER, device_id=engine.device_id)  # fix 3
    translator._translate(infer_iter, infer_iter.transforms, opt.attn_debug, opt.align_debug)
    engine.terminate()
    print(f"BENCH-DECODE sentences={timed.sentences} seconds={timed.seconds:.4f} tokens={timed.tokens}", flush=True)


if __name__ == "__main__":
    main()
