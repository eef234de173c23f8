"""Switch off dropout (or the model's own-prediction feeding) for one pass, without putting the model in eval mode.

A criterion that needs a pass *with gradient* but without dropout (self-critical training scores its sampled
summary with the network it was sampled from) cannot call ``model.eval()``: cuDNN's recurrent backward refuses
a module in eval mode ("cudnn RNN backward can only be called in training mode"), and eval mode would also
change every other training-only behaviour of the model.  These context managers touch only what they name:

``dropout_off(model)``
    every parameterless dropout module (torch's ``nn.Dropout`` family, fairseq's ``FairseqDropout``) is put in
    eval mode, and every recurrent layer's inter-layer dropout (``nn.RNNBase.dropout``) is set to 0 while the
    layer stays in training mode.  So no module with parameters changes mode, and the maths is the eval-mode
    network's.
``own_predictions_off(model)``
    every module with an ``own_prediction_prob`` (Paulus et al. 2018 section 6.1: a teacher-forced pass reads
    the model's own previous prediction with that probability) reads the given tokens only: an exact
    teacher-forced pass.

Both restore what they changed on exit, also after an exception, and do nothing when ``off`` is False.
"""
import contextlib
from typing import Iterator, List, Tuple

import torch.nn as nn

try:  # fairseq's dropout module checks ``self.training`` like torch's
    from fairseq.modules.fairseq_dropout import FairseqDropout
    DROPOUT_MODULES: Tuple[type, ...] = (nn.modules.dropout._DropoutNd, FairseqDropout)
except ImportError:  # pragma: no cover (fairseq is a dependency; kept importable without it)
    DROPOUT_MODULES = (nn.modules.dropout._DropoutNd,)


@contextlib.contextmanager
def dropout_off(model: nn.Module, off: bool = True) -> Iterator[None]:
    """No dropout anywhere in ``model`` inside the block; modules with parameters keep their mode."""
    if not off:
        yield
        return
    switched: List[nn.Module] = [m for m in model.modules() if isinstance(m, DROPOUT_MODULES) and m.training]
    rates: List[Tuple[nn.RNNBase, float]] = [(m, m.dropout) for m in model.modules()
                                             if isinstance(m, nn.RNNBase) and m.dropout > 0]
    for module in switched:
        module.eval()
    for rnn, _ in rates:
        rnn.dropout = 0.0
    try:
        yield
    finally:
        for module in switched:
            module.train()
        for rnn, rate in rates:
            rnn.dropout = rate


@contextlib.contextmanager
def own_predictions_off(model: nn.Module, off: bool = True) -> Iterator[None]:
    """Teacher-forced passes inside the block read the given tokens only (``own_prediction_prob`` 0)."""
    saved = [(m, m.own_prediction_prob) for m in model.modules()
             if off and getattr(m, "own_prediction_prob", 0) > 0]
    for module, _ in saved:
        module.own_prediction_prob = 0.0
    try:
        yield
    finally:
        for module, prob in saved:
            module.own_prediction_prob = prob
