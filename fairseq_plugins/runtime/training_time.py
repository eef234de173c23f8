"""A fine-tuning run gets its own ``--stop-time-hours`` budget.

fairseq's trainer saves its cumulative training time in every checkpoint (``previous_training_time``) and
restores it from whatever checkpoint it loads, including the parent model of ``--finetune-from-model``.  An RL
run given 10 minutes after a 15-minute ML run therefore stopped after its first update: its clock started at 15
minutes.  ``--max-update`` already counts afresh in a fine-tuning run (its optimizer history is reset); this
makes the training time do the same.

Rule (``--task summarization`` only): when a checkpoint is loaded with the meters reset (``--reset-meters``,
which ``--finetune-from-model`` implies on its first launch), training time counts from 0; otherwise (a run
resumed from its own ``checkpoint_last.pt``) it continues from the checkpoint's.  Either way the log says which
time ``--stop-time-hours`` counts.  ``install()`` wraps ``fairseq.trainer.Trainer.load_checkpoint`` once
(``fairseq_plugins.register`` calls it); for other tasks it changes nothing.
"""
import functools
import inspect
import logging
import time

logger = logging.getLogger(__name__)

_installed = False


def install() -> None:
    """Wrap fairseq's ``Trainer.load_checkpoint`` (idempotent)."""
    global _installed
    if _installed:
        return
    from fairseq.trainer import Trainer

    Trainer.load_checkpoint = _with_own_clock(Trainer.load_checkpoint)
    _installed = True


def _with_own_clock(load_checkpoint):
    signature = inspect.signature(load_checkpoint)

    @functools.wraps(load_checkpoint)
    def wrapper(trainer, filename, *args, **kwargs):
        extra_state = load_checkpoint(trainer, filename, *args, **kwargs)
        if extra_state is not None and getattr(trainer.task, "counts_own_training_time", False):
            call = signature.bind(trainer, filename, *args, **kwargs)
            call.apply_defaults()
            restart_clock(trainer, filename, bool(call.arguments["reset_meters"]))
        return extra_state
    return wrapper


def restart_clock(trainer, filename, reset_meters: bool) -> None:
    """Training time from 0 after a load with the meters reset; the log says which time is counted."""
    inherited = trainer._previous_training_time
    if reset_meters:
        trainer._previous_training_time = 0
        trainer._start_time = time.time()
        trainer._cumulative_training_time = None
        logger.info("training time counts from 0 in this run (a fine-tuning start: meters reset); the %.3f h "
                    "recorded in %s are not counted against --stop-time-hours", inherited / 3600, filename)
    else:
        logger.info("training time continues from the %.3f h recorded in %s (--stop-time-hours counts them)",
                    inherited / 3600, filename)
