"""fairseq ``--user-dir`` package: summarization models, criterions, task, generator and scorers.

    fairseq-train DATA --user-dir fairseq_plugins --task summarization --arch pgn_lstm \
        --criterion focal_copy_coverage ...

``register()`` imports every plugin module (which registers it with fairseq) and allow-lists the classes a
fairseq checkpoint holds, so checkpoints load with torch's safe (``weights_only``) loading left on; it also
gives a fine-tuning run of ``--task summarization`` its own training-time budget (``runtime/training_time.py``).
It runs by itself when this package is imported after fairseq, as ``--user-dir`` does.  The text and scoring tools
(``summ-prepare``, ``summ-rouge``...) import the package *without* fairseq, so they start fast; Python code
that imports this package before fairseq calls ``fairseq_plugins.register()`` itself.
"""
import sys

_registered = False


def register() -> None:
    """Register the plugins with fairseq and allow-list fairseq checkpoints (idempotent)."""
    global _registered
    if _registered:
        return
    from fairseq_plugins.runtime import checkpoint_safety, training_time

    checkpoint_safety.allow_fairseq_checkpoints()
    training_time.install()  # a fine-tuning run gets its own --stop-time-hours budget
    from fairseq_plugins import criterions, models, tasks  # noqa: F401  (registration)
    from fairseq_plugins import optim  # noqa: F401  (registration)
    from fairseq_plugins.scoring import rouge  # noqa: F401

    _registered = True


if "fairseq" in sys.modules:
    register()
