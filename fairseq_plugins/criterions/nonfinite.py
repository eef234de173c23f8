"""The non-finite-loss policy shared by the project's criterions: ``--on-nonfinite stop|skip``.

A non-finite training loss is never back-propagated.  ``stop`` (default) raises NonFiniteLossError naming the
update (as fairseq logs ``num_updates``), the batch's dataset ids and the loss terms; fairseq-train saves the
(still good) parameters to crash.pt and exits, and checkpoint_last.pt keeps the last saved update.  ``skip``
(needs ``--task summarization``) logs a warning with the same details and skips the update: the task does not
call the optimizer, so parameters and optimizer state (Adam's moments and step count) stay bit-identical;
fairseq's update counter and learning-rate schedule still advance by one.  Skips are counted in the logged
``nonfinite_skipped``.  A non-finite validation loss always raises.

Its own module, not a part of one criterion: focal_copy_coverage, self_critical_rouge and (through
focal_copy_coverage) semantic_cohesion all mix ``NonFinitePolicy`` in, and the summarization task reads its
``on_nonfinite`` and sets its ``current_update``.
"""
import logging

import torch

from fairseq import metrics
from fairseq.dataclass import ChoiceEnum

ON_NONFINITE = ChoiceEnum(["stop", "skip"])

logger = logging.getLogger(__name__)


class NonFiniteLossError(FloatingPointError):
    pass


def zeroed(logging_output: dict) -> dict:
    """The same keys, in the same order, with values of the same types, all zero."""
    return {key: torch.zeros_like(value) if torch.is_tensor(value) else type(value)(0)
            for key, value in logging_output.items()}


class NonFinitePolicy:
    """``--on-nonfinite stop|skip``, shared by the project's criterions (a mixin of a FairseqCriterion).

    The criterion calls ``init_nonfinite`` in its constructor, adds ``nonfinite_skipped`` to its logging
    outputs when ``on_nonfinite == "skip"`` (``logging_skips``), and, before returning a loss that is not
    finite, returns ``handle_nonfinite(...)`` instead: in training with ``skip`` that is a zero loss with
    zero gradients and the zeroed logging output with ``nonfinite_skipped=1`` (the summarization task then
    skips the optimizer step); otherwise it raises NonFiniteLossError.  The summarization task sets
    ``current_update`` and reads ``on_nonfinite``.  Messages start with ``nonfinite_name`` and warnings go to
    ``nonfinite_logger``."""

    nonfinite_name = "criterion"
    nonfinite_logger = logger

    def init_nonfinite(self, task, on_nonfinite: str) -> None:
        if on_nonfinite == "skip" and not getattr(task, "skips_nonfinite_updates", False):
            raise ValueError(f"--on-nonfinite skip needs --task summarization (it skips the optimizer step); "
                             f"task {type(task).__name__} cannot skip an update")
        self.on_nonfinite = on_nonfinite
        # The update being computed, numbered as fairseq logs num_updates (the first update is 1); set by the
        # summarization task's train_step.  None: unknown.
        self.current_update = None
        self.skipped_updates = 0  # in this process

    @property
    def logging_skips(self) -> bool:
        return self.on_nonfinite == "skip"

    def handle_nonfinite(self, model, sample, loss, term_sums: dict, logging_output: dict):
        """What to do with a non-finite ``loss``: skip (training, ``skip``) or raise.  ``term_sums``: the loss
        terms summed over the batch, named in the message; ``logging_output``: the batch's normal one."""
        if self.on_nonfinite == "skip" and model.training:
            return self.skip_batch(model, sample, loss, term_sums, logging_output)
        update = self.current_update
        raise NonFiniteLossError(
            self.describe_nonfinite(model, sample, loss, term_sums) + ". Nothing was back-propagated: "
            + (f"the parameters are still those after update {update - 1}. " if model.training and update
               else "the parameters are unchanged. ")
            + "--on-nonfinite skip skips such training updates instead."
        )

    def describe_nonfinite(self, model, sample, loss, term_sums: dict) -> str:
        """'NAME: non-finite loss nan at update 7 on a batch of 12 samples (dataset ids ...); terms: a=nan, ...'."""
        update = self.current_update
        if model.training:
            where = f"at update {update}" if update is not None else "in training (update number unknown)"
        else:
            where = f"in validation after update {update}" if update is not None else "in validation"
        ids = sample["id"].tolist()
        shown = ", ".join(map(str, ids[:20])) + (", ..." if len(ids) > 20 else "")
        values = ", ".join(f"{name}={float(value.detach() if torch.is_tensor(value) else value):.4g}"
                           for name, value in term_sums.items())
        return (f"{self.nonfinite_name}: non-finite loss {loss.item()} {where} on a batch of {len(ids)} samples "
                f"(dataset ids {shown}); terms: {values}")

    def skip_batch(self, model, sample, loss, term_sums: dict, logging_output: dict):
        """--on-nonfinite skip: warn, and return an exactly-zero loss that reaches every trainable parameter (so
        backward runs as usual, also under DDP, and gives zero gradients, never NaN ones), sample size 0, and the
        logging output zeroed with nonfinite_skipped=1, which tells the summarization task to skip the optimizer
        step."""
        self.skipped_updates += 1
        self.nonfinite_logger.warning(
            "%s. Skipping the update: parameters and optimizer state unchanged (%d skipped so far in this "
            "process).", self.describe_nonfinite(model, sample, loss, term_sums), self.skipped_updates)
        zero = sum(p.sum() for p in model.parameters() if p.requires_grad) * 0.0
        skipped = zeroed(logging_output)
        skipped["nonfinite_skipped"] = 1
        return zero, 0, skipped

    @staticmethod
    def reduce_nonfinite(logging_outputs) -> None:
        skipped = sum(log.get("nonfinite_skipped", 0) for log in logging_outputs)
        if skipped:
            metrics.log_scalar_sum("nonfinite_skipped", skipped, priority=300, round=0)
