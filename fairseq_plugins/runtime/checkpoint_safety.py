"""Load fairseq checkpoints with torch's safe unpickler (``weights_only=True``, the default since torch 2.6).

A fairseq checkpoint is mostly tensors and plain containers, plus a few Python objects in its configuration
(an ``argparse.Namespace`` for models configured by command-line flags, enums, numpy scalars in the training
state).  Instead of switching safe loading off for the whole process (torch's environment override),
we add exactly those classes to torch's allow-list.  Anything else in a checkpoint still fails to load.
"""
import argparse
import collections

import numpy as np
import torch


def _numpy_scalar_globals():
    """The numpy objects ``np.float64(...)`` etc. pickle through (their module moved in numpy 2)."""
    names = []
    try:
        from numpy._core.multiarray import scalar
    except ImportError:  # numpy < 2
        from numpy.core.multiarray import scalar
    names.append(scalar)
    names.append(np.dtype)
    names.extend(type(np.dtype(kind)) for kind in ("float64", "float32", "int64", "int32", "bool"))
    return names


def safe_globals():
    """The classes a fairseq checkpoint may contain besides tensors and builtins."""
    return [argparse.Namespace, collections.OrderedDict, collections.defaultdict, *_numpy_scalar_globals()]


def allow_fairseq_checkpoints() -> None:
    torch.serialization.add_safe_globals(safe_globals())
