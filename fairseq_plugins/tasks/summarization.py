"""``summarization``: fairseq's translation task (source document -> target summary) without lost inputs.

With ``--eval-accuracy`` the task also summarizes the validation set at every validation (generation settings
in ``--eval-gen-args``, greedy by default) and logs ``accuracy``, Shi et al.'s eq 17 in percent
(fairseq_plugins/scoring/accuracy.py); train with ``--best-checkpoint-metric accuracy
--maximize-best-checkpoint-metric`` to keep the checkpoint that summarizes best.

fairseq 0.12.x (``data_utils.batch_by_size``) silently drops the last batch of *every* split when its size is
not a multiple of ``--required-batch-size-multiple`` (default 8): validation loses samples and
``fairseq-generate`` writes fewer hypotheses than there are inputs.  This task always batches with a multiple
of 1, so every document is trained on, validated and summarized.  Everything else is
``--task translation``: ``-s src -t tgt``, a joined dictionary with the OOV markers of summ-prepare.

Non-finite losses (``--criterion focal_copy_coverage --on-nonfinite``): ``train_step`` tells the criterion which
update it computes, so its error or warning names it.  When the criterion reports a skipped batch, this task
does not call the optimizer for that update (``optimizer_step``): the parameters and the optimizer state are
left exactly as they were.  With several workers the decision is all-reduced, so every worker skips together.
"""
import contextlib
import json
import logging
from argparse import Namespace
from dataclasses import dataclass, field

import torch
from omegaconf import OmegaConf, open_dict

from fairseq import metrics, utils
from fairseq.distributed import utils as distributed_utils
from fairseq.tasks import register_task
from fairseq.tasks.translation import TranslationConfig, TranslationTask

from fairseq_plugins.scoring.accuracy import summary_accuracy

logger = logging.getLogger(__name__)


@dataclass
class SummarizationConfig(TranslationConfig):
    eval_accuracy: bool = field(
        default=False, metadata={"help": "summarize the validation set and log accuracy (Shi et al. eq 17)"}
    )
    eval_gen_args: str = field(
        default='{"beam": 1, "max_len_a": 0, "max_len_b": 100}',
        metadata={"help": "generation settings for --eval-accuracy, as JSON (keys as in fairseq-generate)"},
    )


@register_task("summarization", dataclass=SummarizationConfig)
class SummarizationTask(TranslationTask):
    skips_nonfinite_updates = True  # focal_copy_coverage --on-nonfinite skip relies on optimizer_step below
    _skip_update = None  # update_num (as fairseq passes it) whose optimizer step must not run
    _may_skip = False  # the criterion skips non-finite batches (then workers agree on every update)

    def train_step(self, sample, model, criterion, optimizer, update_num, ignore_grad=False, **kwargs):
        # fairseq's update_num counts the updates already done; the one computed now is logged as update_num + 1.
        if hasattr(criterion, "current_update"):
            criterion.current_update = update_num + 1
        self._may_skip = getattr(criterion, "on_nonfinite", None) == "skip"
        loss, sample_size, logging_output = super().train_step(
            sample, model, criterion, optimizer, update_num, ignore_grad=ignore_grad, **kwargs)
        if logging_output.get("nonfinite_skipped"):
            self._skip_update = update_num
        return loss, sample_size, logging_output

    def optimizer_step(self, optimizer, model, update_num):
        skip = self._skip_update == update_num
        if self._may_skip and distributed_utils.get_data_parallel_world_size() > 1:  # every worker skips, or none
            flag = torch.tensor([float(skip)], device=next(model.parameters()).device)
            flag = distributed_utils.all_reduce(flag, group=distributed_utils.get_data_parallel_group())
            if flag.item() > 0 and not skip:
                logger.warning("skipping update %d: a non-finite loss on another worker", update_num + 1)
            skip = flag.item() > 0
        self._skip_update = None
        if skip:
            optimizer.zero_grad()  # the batch's gradients are dropped, the optimizer is not called
            return
        super().optimizer_step(optimizer, model, update_num)

    def get_batch_iterator(self, dataset, **kwargs):
        multiple = kwargs.get("required_batch_size_multiple", 1)
        if multiple != 1:
            logger.info("summarization task: --required-batch-size-multiple %d -> 1 (keeps every input)", multiple)
        kwargs["required_batch_size_multiple"] = 1
        return super().get_batch_iterator(dataset, **kwargs)

    def build_model(self, cfg, from_checkpoint=False):
        if from_checkpoint:
            # The checkpoint's weights replace pretrained embeddings: don't read (possibly moved) files again.
            with open_dict(cfg) if OmegaConf.is_config(cfg) else contextlib.nullcontext():
                for key in ("encoder_embed_path", "decoder_embed_path"):
                    if getattr(cfg, key, None):
                        setattr(cfg, key, None)
        model = super().build_model(cfg, from_checkpoint)
        if self.cfg.eval_accuracy:
            self.accuracy_generator = self.build_generator([model], Namespace(**json.loads(self.cfg.eval_gen_args)))
        return model

    def valid_step(self, sample, model, criterion):
        loss, sample_size, logging_output = super().valid_step(sample, model, criterion)
        if self.cfg.eval_accuracy:
            total, count = self.accuracy_sum(model, sample)
            logging_output["_accuracy_sum"] = total
            logging_output["_accuracy_count"] = count
        return loss, sample_size, logging_output

    def accuracy_sum(self, model, sample):
        """Sum of eq 17's per-summary accuracies over the batch, and how many summaries it covers."""
        hypotheses = self.inference_step(self.accuracy_generator, [model], sample, prefix_tokens=None)
        pad, eos, unk = self.tgt_dict.pad(), self.tgt_dict.eos(), self.tgt_dict.unk()
        total, count = 0.0, 0
        for hypos, target in zip(hypotheses, sample["target"]):
            target = [t for t in utils.strip_pad(target, pad).tolist() if t != eos]
            predicted = [t for t in hypos[0]["tokens"].tolist() if t != eos]
            accuracy = summary_accuracy(predicted, target, unk=unk)
            if accuracy is not None:
                total, count = total + accuracy, count + 1
        return total, count

    def reduce_metrics(self, logging_outputs, criterion):
        super().reduce_metrics(logging_outputs, criterion)
        if not self.cfg.eval_accuracy:
            return
        total = sum(log.get("_accuracy_sum", 0.0) for log in logging_outputs)
        count = sum(log.get("_accuracy_count", 0) for log in logging_outputs)
        if count > 0:
            metrics.log_scalar("_accuracy_sum", total)
            metrics.log_scalar("_accuracy_count", count)
            metrics.log_derived(
                "accuracy", lambda meters: round(100 * meters["_accuracy_sum"].sum / meters["_accuracy_count"].sum, 2)
            )
