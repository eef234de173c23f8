"""``summarization``: fairseq's translation task (source document -> target summary) without lost inputs, with
the project's generator and validation by ROUGE.

Generation (fairseq-generate, fairseq-interactive, generate.sh, the hub API, validation) uses the project's
beam search (fairseq_plugins/generation/generator.py) with these task options:
  ``--block-ngram-repeat N``  no hypothesis produces an n-gram twice (Paulus et al.: N = 3); fairseq's own
                             ``--no-repeat-ngram-size N``, which blocks nothing on a CPU, means the same here;
  ``--block-immediate-repeat 1`` no token directly after itself (0: off);
  ``--block-ignore TOKENS``  n-grams containing these tokens may repeat (OpenNMT-py -ignore_when_blocking);
  ``--coverage-penalty B``   GNMT's coverage penalty with beta B, added to finished hypotheses' scores;
  ``--allow-unk``            let summaries hold ``<unk>``, which the search otherwise never produces.
A generation config that names one of these (``--eval-gen-args``, the hub's keyword arguments) overrides the
task's value.  ``--print-alignment`` keeps this search and adds fairseq's alignment (read in the order each
model attends: pgn_lstm's right-padded attention is not shifted by a batch's padding).  ``--score-reference``
scores the reference with fairseq's SequenceScorer: no search, so these options do not apply (it says so).

Validation by generation: ``--eval-accuracy`` and ``--eval-rouge`` summarize the validation set (or its first
``--eval-max-documents`` documents) at every validation with ``--eval-gen-args`` (greedy, up to 100 tokens, by
default):
  ``accuracy``: Shi eq 17 in percent (fairseq_plugins/scoring/accuracy.py);
  ``rouge_1``, ``rouge_2``, ``rouge_l``: F1 in percent, the mean over documents of what ``generate.sh --score``
  computes (OOV markers restored, detokenized, scored against DATA/ref/SPLIT.tgt with the exact Python ROUGE;
  fairseq_plugins/scoring/validation_rouge.py).  ``--eval-rouge-dir`` is the folder preprocess.sh wrote
  (default: the parent of the data directory).
Sums and counts are added over batches and workers before dividing, so several workers log the same figure
as one.  Keep the best summarizer with ``--best-checkpoint-metric rouge_l --maximize-best-checkpoint-metric``.

fairseq 0.12.x (``data_utils.batch_by_size``) silently drops the last batch of *every* split when its size is
not a multiple of ``--required-batch-size-multiple`` (default 8): validation loses samples and
``fairseq-generate`` writes fewer hypotheses than there are inputs.  This task always batches with a multiple
of 1, so every document is trained on, validated and summarized.  Everything else is
``--task translation``: ``-s src -t tgt``, a joined dictionary with the OOV markers of summ-prepare.

Fine-tuning (``--finetune-from-model``, or ``--reset-meters``): training time counts from 0, so
``--stop-time-hours`` is the fine-tuning run's own budget, not what is left of its parent's
(fairseq_plugins/runtime/training_time.py); the log says which time is counted.

Precision: ``--bf16-autocast`` trains and validates in bfloat16 through ``torch.autocast`` (float32 weights, no loss
scaler; tasks/precision.py).  fairseq's ``--bf16`` is a TPU option in 0.12.x: without torch_xla it is refused
when the model is built, with a message that names the working options (``--bf16-autocast``, ``--fp16``,
``--amp``).

Non-finite losses (``--criterion focal_copy_coverage --on-nonfinite``): ``train_step`` tells the criterion which
update it computes, so its error or warning names it.  When the criterion reports a skipped batch, this task
does not call the optimizer for that update (``optimizer_step``): the parameters and the optimizer state are
left exactly as they were.  With several workers the decision is all-reduced, so every worker skips together.
"""
import contextlib
import json
import logging
import os
from argparse import Namespace
from dataclasses import dataclass, field
from typing import Optional

import torch
from omegaconf import II, OmegaConf, open_dict

from fairseq import metrics, utils
from fairseq.distributed import utils as distributed_utils
from fairseq.tasks import register_task
from fairseq.tasks.translation import TranslationConfig, TranslationTask

from fairseq_plugins.generation.defaults import VALIDATION_GENERATION
from fairseq_plugins.generation.generator import SummarizationGenerator, SummarizationGeneratorWithAlignment
from fairseq_plugins.scoring.accuracy import summary_accuracy
from fairseq_plugins.scoring.validation_rouge import METRICS as ROUGE_METRICS, ValidationRouge
from fairseq_plugins.tasks.precision import autocast_train_step, bf16_autocast, check_precision_options

logger = logging.getLogger(__name__)

GENERATOR_OPTIONS = ("block_ngram_repeat", "block_immediate_repeat", "block_ignore", "coverage_penalty",
                     "fairseq_beam_search", "allow_unk")


@dataclass
class SummarizationConfig(TranslationConfig):
    block_ngram_repeat: int = field(
        default=0, metadata={"help": "beam search: no hypothesis repeats an n-gram of this size (0 = off; Paulus "
                                     "et al. use 3); works on CPU and GPU, unlike --no-repeat-ngram-size"})
    block_immediate_repeat: int = field(
        default=0, metadata={"help": "beam search: 1 = no token directly after itself ('w w'), except the tokens of "
                                     "--block-ignore; 0 = off"})
    block_ignore: str = field(
        default="", metadata={"help": "space-separated tokens whose n-grams are never blocked, e.g. '. ,' "
                                      "(<unk> always is)"})
    coverage_penalty: float = field(
        default=0.0, metadata={"help": "beta of GNMT's coverage penalty beta * sum_i log(min(sum_t a_i^t, 1)), "
                                       "added to finished hypotheses' scores (0 = off)"})
    allow_unk: bool = field(
        default=False, metadata={"help": "let summaries hold <unk> (by default the search never produces it and the "
                                         "model writes its next-best word; source OOV words are copied as before)"})
    fairseq_beam_search: bool = field(
        default=False, metadata={"help": "beam search: run fairseq's own loop, not the project's (same output, more "
                                         "operations per step; for comparisons)"})
    eval_accuracy: bool = field(
        default=False, metadata={"help": "summarize the validation set and log accuracy (Shi eq 17)"}
    )
    eval_rouge: bool = field(
        default=False, metadata={"help": "summarize the validation set and log rouge_1, rouge_2, rouge_l (F1, "
                                         "percent), as generate.sh --score computes them"})
    eval_rouge_dir: Optional[str] = field(
        default=None, metadata={"help": "--eval-rouge: the folder preprocess.sh wrote (prep.json, tok/, ref/); "
                                        "default: the parent of the data directory"})
    eval_gen_args: str = field(
        default=json.dumps(VALIDATION_GENERATION),
        metadata={"help": "generation settings for --eval-accuracy/--eval-rouge, as JSON (keys as in "
                          "fairseq-generate, plus block_ngram_repeat, block_immediate_repeat, block_ignore, "
                          "coverage_penalty, fairseq_beam_search)"},
    )
    eval_max_documents: int = field(
        default=0, metadata={"help": "--eval-rouge/--eval-accuracy decode only the first N documents of each "
                                     "validation split (by line; the loss still covers all): a cheap validation "
                                     "of a large split (0 = all)"})
    bf16_autocast: bool = field(
        default=False, metadata={"help": "train and validate in bfloat16 through torch.autocast (float32 weights, "
                                         "no loss scaler): the working bfloat16 route on a GPU (fairseq's --bf16 "
                                         "is a TPU option)"})
    valid_subset: str = II("dataset.valid_subset")


@register_task("summarization", dataclass=SummarizationConfig)
class SummarizationTask(TranslationTask):
    skips_nonfinite_updates = True  # focal_copy_coverage --on-nonfinite skip relies on optimizer_step below
    counts_own_training_time = True  # a fine-tuning run's --stop-time-hours starts at 0 (runtime/training_time.py)
    _skip_update = None  # update_num (as fairseq passes it) whose optimizer step must not run
    _may_skip = False  # the criterion skips non-finite batches (then workers agree on every update)
    _current_split = None  # the split whose batches are being iterated (set by get_batch_iterator)
    validation_rouge = None

    @property
    def uses_bf16_autocast(self) -> bool:
        return bool(getattr(self.cfg, "bf16_autocast", False))  # a task config of an older checkpoint lacks it

    def train_step(self, sample, model, criterion, optimizer, update_num, ignore_grad=False, **kwargs):
        # fairseq's update_num counts the updates already done; the one computed now is logged as update_num + 1.
        if hasattr(criterion, "current_update"):
            criterion.current_update = update_num + 1
        self._may_skip = getattr(criterion, "on_nonfinite", None) == "skip"
        if self.uses_bf16_autocast:
            loss, sample_size, logging_output = autocast_train_step(
                sample, model, criterion, optimizer, update_num, ignore_grad=ignore_grad)
        else:
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
        self._current_split = next((name for name, data in self.datasets.items() if data is dataset), None)
        return super().get_batch_iterator(dataset, **kwargs)

    # ------------------------------------------------------------------ generation
    def build_generator(self, models, args, seq_gen_cls=None, extra_gen_cls_kwargs=None, **kwargs):
        """fairseq's generator choice, except that its SequenceGenerator (beam search, sampling, diverse beam...)
        is the project's SummarizationGenerator (n-gram blocking, coverage penalty), and with --print-alignment
        SummarizationGeneratorWithAlignment, which adds fairseq's alignment to the same search.  Its options
        come from ``args`` when it names them (a generation config of the hub or --eval-gen-args), else from
        this task's options.  --score-reference keeps fairseq's SequenceScorer: it scores the given reference
        and searches nothing, so there is nothing to block, and no finished hypotheses for the coverage
        penalty to re-rank (it says so when one of them is set)."""
        if getattr(args, "score_reference", False):
            self.say_search_options_do_not_apply(args)
        elif seq_gen_cls is None:
            alignment = getattr(args, "print_alignment", None)
            seq_gen_cls = SummarizationGeneratorWithAlignment if alignment else SummarizationGenerator
            extra_gen_cls_kwargs = dict(extra_gen_cls_kwargs or {}, **self.generator_options(args))
            if alignment:
                extra_gen_cls_kwargs["print_alignment"] = alignment
        return super().build_generator(models, args, seq_gen_cls=seq_gen_cls,
                                       extra_gen_cls_kwargs=extra_gen_cls_kwargs, **kwargs)

    def say_search_options_do_not_apply(self, args):
        ignored = ["--" + name.replace("_", "-") for name, value in self.generator_options(args).items() if value]
        if ignored:
            logger.info("--score-reference scores the reference as it is, without a search: %s do not apply",
                        ", ".join(ignored))

    def generator_options(self, args):
        defaults = SummarizationConfig()  # a task config of an older checkpoint may lack the options
        options = {name: getattr(args, name, getattr(self.cfg, name, getattr(defaults, name)))
                   for name in GENERATOR_OPTIONS}
        fairseq_n = getattr(args, "no_repeat_ngram_size", 0) or 0
        if fairseq_n > 0:  # fairseq's NGramRepeatBlock blocks nothing on a CPU (0.12.x): ours does the work
            if options["block_ngram_repeat"] not in (0, fairseq_n):
                raise ValueError(f"--no-repeat-ngram-size {fairseq_n} and --block-ngram-repeat "
                                 f"{options['block_ngram_repeat']} disagree: give one of them")
            options["block_ngram_repeat"] = fairseq_n
        return options

    # ------------------------------------------------------------------ validation by generation
    def build_model(self, cfg, from_checkpoint=False):
        if from_checkpoint:
            # The checkpoint's weights replace pretrained embeddings: don't read (possibly moved) files again.
            with open_dict(cfg) if OmegaConf.is_config(cfg) else contextlib.nullcontext():
                for key in ("encoder_embed_path", "decoder_embed_path"):
                    if getattr(cfg, key, None):
                        setattr(cfg, key, None)
        else:
            check_precision_options(cfg, self.uses_bf16_autocast)  # before fairseq's trainer asks for a TPU
        model = super().build_model(cfg, from_checkpoint)
        if from_checkpoint:  # loaded for generation (fairseq-generate, the hub): no validation
            return model
        if self.cfg.eval_accuracy or self.cfg.eval_rouge:
            self.eval_generator = self.build_generator([model], Namespace(**json.loads(self.cfg.eval_gen_args)))
        if self.cfg.eval_rouge:
            self.validation_rouge = ValidationRouge(self.rouge_dir())
            for split in self.validation_splits():  # fail now on a missing file, not after the first epoch
                self.validation_rouge.split(split)
        return model

    def rouge_dir(self) -> str:
        if self.cfg.eval_rouge_dir:
            return self.cfg.eval_rouge_dir
        return os.path.dirname(os.path.abspath(utils.split_paths(self.cfg.data)[0]))

    def validation_splits(self):
        return [name for name in self.cfg.valid_subset.split(",") if name]

    def valid_step(self, sample, model, criterion):
        with bf16_autocast(model, self.uses_bf16_autocast):
            return self.validate_batch(sample, model, criterion)

    def validate_batch(self, sample, model, criterion):
        loss, sample_size, logging_output = super().valid_step(sample, model, criterion)
        if not (self.cfg.eval_accuracy or self.cfg.eval_rouge):
            return loss, sample_size, logging_output
        if not hasattr(self, "eval_generator"):  # a model loaded from a checkpoint (fairseq-validate): loss only
            if not getattr(self, "_said_loss_only", False):
                logger.info("validation of a loaded checkpoint reports the loss only (--eval-rouge and "
                            "--eval-accuracy generate during fairseq-train)")
                self._said_loss_only = True
            return loss, sample_size, logging_output
        sample = self.documents_to_decode(sample)
        hypotheses = self.inference_step(self.eval_generator, [model], sample, prefix_tokens=None) \
            if len(sample["id"]) else []
        best = [hypos[0]["tokens"] for hypos in hypotheses]  # one per document, in batch order
        if self.cfg.eval_accuracy:
            logging_output["_accuracy_sum"], logging_output["_accuracy_count"] = self.accuracy_sum(best, sample)
        if self.cfg.eval_rouge:
            logging_output.update(self.rouge_sums(best, sample))
        return loss, sample_size, logging_output

    def documents_to_decode(self, sample):
        """The batch's documents that validation decodes: those among the first --eval-max-documents of the split
        (dataset index below the limit), or all (possibly none: every worker still logs the same keys)."""
        limit = getattr(self.cfg, "eval_max_documents", 0)
        if limit <= 0 or bool((sample["id"] < limit).all()):
            return sample
        keep = (sample["id"] < limit).nonzero().flatten()  # B'
        net_input = {key: value.index_select(0, keep) if torch.is_tensor(value) else value
                     for key, value in sample["net_input"].items()}
        return dict(sample, id=sample["id"].index_select(0, keep), net_input=net_input,
                    target=sample["target"].index_select(0, keep))

    def accuracy_sum(self, best, sample):
        """Sum of Shi eq 17's per-summary accuracies over the batch, and how many summaries it covers."""
        pad, eos, unk = self.tgt_dict.pad(), self.tgt_dict.eos(), self.tgt_dict.unk()
        total, count = 0.0, 0
        for tokens, target in zip(best, sample["target"]):
            target = [t for t in utils.strip_pad(target, pad).tolist() if t != eos]
            predicted = [t for t in tokens.tolist() if t != eos]
            accuracy = summary_accuracy(predicted, target, unk=unk)
            if accuracy is not None:
                total, count = total + accuracy, count + 1
        return total, count

    def rouge_sums(self, best, sample):
        """``_rouge_1_sum``... (sums of per-document F1 fractions) and ``_rouge_count`` of one batch."""
        split = self._current_split
        if split is None:
            raise RuntimeError("--eval-rouge: cannot tell which split this validation batch comes from")
        tokens = [self.tgt_dict.string(t.int().cpu(), None, extra_symbols_to_ignore={self.tgt_dict.eos()}).split()
                  for t in best]
        sums = self.validation_rouge.score(split, sample["id"].tolist(), tokens)
        out = {f"_{name}_sum": sums[name] for name in ROUGE_METRICS}
        out["_rouge_count"] = sums["n"]
        return out

    def reduce_metrics(self, logging_outputs, criterion):
        super().reduce_metrics(logging_outputs, criterion)
        if self.cfg.eval_accuracy:
            log_means(["accuracy"], "_accuracy_count", logging_outputs)
        if self.cfg.eval_rouge:
            log_means(list(ROUGE_METRICS), "_rouge_count", logging_outputs)


def log_means(names, count_key, logging_outputs, sum_key="_{}_sum") -> None:
    """Logs each ``name`` = 100 * (sum of its sums) / (sum of the counts).  Sums and counts are added over
    batches and workers first, so the figure is the mean over all documents, not a mean of means."""
    count = total(logging_outputs, count_key)
    if count == 0:
        return
    metrics.log_scalar(count_key, count)
    for name in names:
        key = sum_key.format(name)
        metrics.log_scalar(key, total(logging_outputs, key))
        metrics.log_derived(name, lambda meters, key=key: round(100 * meters[key].sum / meters[count_key].sum, 2))


def total(logging_outputs, key) -> float:
    """The sum of ``key`` over logging outputs, as a Python float: one worker hands reduce_metrics its numbers,
    several hand it fairseq's all-reduced sums, 0-d tensors, on which the meters' ``round`` would fail."""
    return float(sum(utils.item(log.get(key, 0)) for log in logging_outputs))
