"""Summarize raw text with a trained model from Python, in the manner of fairseq's hub interface.

    from fairseq_plugins.inference.hub import Summarizer

    summarizer = Summarizer.from_pretrained("work/model")          # a train.sh SAVE_DIR (device: CUDA if any)
    summarizer.summarize(["first document ...", "second document ..."], beam=5)   # -> list of str
    details = summarizer.summarize_with_details(["a document ..."])[0]          # attention, p_gen, coverage

A model directory is what ``train.sh`` writes: the checkpoints plus ``prep.json`` (tokenization settings),
``dict.txt`` (the joined dictionary, OOV markers last) and ``sp.model`` (sentencepiece units only).  When one of
these is missing there, it is looked up in ``data_dir`` (the output of ``preprocess.sh``: ``prep.json``,
``sp.model``, and ``bin/dict.src.txt`` for the dictionary).

``summarize`` does what ``generate.sh --input`` does, with the same functions:
  1. tokenize, truncate and mark OOV words as ``summ-prepare --apply`` does (``text.tokenization.Tokenizer``,
     ``text.prepare.mark_source``);
  2. batch as ``fairseq-interactive --buffer-size 64 --batch-size B`` does (the task's batch iterator's batches,
     same order, same collater) and run the beam search built by ``task.build_generator`` (for ``--task
     summarization`` the project's generator: ``summarize(texts, block_ngram_repeat=3)`` is ``generate.sh
     --input ... --block-ngram-repeat 3``);
  3. map markers back to the document's words and detokenize as ``summ-restore`` does
     (``text.restore.restore_summary``: English as text, by sacremoses; ``detok=False`` gives the tokens ROUGE
     scores, as ``generate.sh --no-detok``).
So for the same checkpoint and generation options its output equals ``generate.sh --input``'s, line for line.
The default generation options are the model's own: the GEN_ARGS its config had when ``train.sh`` trained it
(``model_dir/config.json``, fairseq_plugins/runtime/run_config.py; ``summarizer.generation``), which ``generate.sh``
decodes it with too; fairseq's defaults fill what they leave out (max_len_b 200, min_len 1, batch size 32).
A model directory without config.json (trained before it existed) gets ``configs/scitldr_small.conf``'s
(beam 5, max_len_a 0, max_len_b 60, min_len 5, batch size 32), with a warning.  Keyword arguments override.
Every input gets exactly one summary, in order, an empty document included.
A text is one document: line breaks inside it are read as spaces (``generate.sh`` would split there).  A text is
read as ``generate.sh --input`` reads a line of a file: a byte-order mark at its start is dropped (an encoding
artifact, as at the start of a file), a ``\r`` (of a ``\r\n`` line end) is white space.

The API checks its input as the command does: an unknown or misspelled option (``beam_size=1``,
``block_ngram_repat=3``) is a ``TypeError`` naming it (with the closest known name), as are ``None`` or any
document that is not a ``str``.  A call logs nothing at INFO level (only a warning per document the model cannot
read whole, below).

What the model cannot read is never lost silently: a document longer than prep.json's ``max_source_len`` loses
its tail, and OOV words beyond its ``num_markers`` markers are read as ``<unk>`` (they cannot be copied), as
``summ-prepare --apply`` reports for a file.  Each such document gets a warning through ``logging`` (logger
``fairseq_plugins.inference.hub``), its counts are in ``SummaryDetails.input_report``, and ``strict=True`` refuses the
call instead (``LossyInputError``, a ValueError, before anything is generated).

The model runs on ``from_pretrained``'s ``device`` (default: CUDA when available, else the CPU); every input
goes to the device the model's parameters are on, so ``summarizer.model.cuda()`` later works too.  Calls from
several threads are safe: a call touches no process-wide state (no ``warnings.catch_warnings``, no DataLoader).
``from_pretrained(..., quantize="int8")`` decodes on the CPU with the decoder's large matrices in int8
(fairseq_plugins/inference/quantize.py: which modules, which library; docs/results/quantize_int8.md: speed and ROUGE).

``summarize_with_details`` also teacher-forces each generated summary through the model to read, per output
token, the attention over the source, ``p_gen`` (See eq 8) and the coverage vector (See eq 10): the input of the
attention visualiser (``fairseq_plugins/viz/visualize.py``, ``scripts/visualize_attention.py``).

Checkpoints are read with torch's safe loading left on (``fairseq_plugins.register()`` allow-lists the classes
a fairseq checkpoint holds).
"""
import argparse
import logging
import os
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np
import torch

import fairseq_plugins
from fairseq_plugins.generation.defaults import DEFAULT_GENERATION, FAIRSEQ_GENERATION
from fairseq_plugins.inference import package
from fairseq_plugins.inference.inputs import (InputReport, LossyInputError, Prepared, SummaryDetails, as_line,
                                              check_options, check_texts)
from fairseq_plugins.inference.options import (INTERACTIVE_BUFFER_SIZE, model_device,
                                               recorded_generation, resolve_device)
from fairseq_plugins.runtime.length_fit import length_warnings
from fairseq_plugins.text import markers
from fairseq_plugins.text.prepare import UNK, MarkStats, load_prep, mark_source, read_dict
from fairseq_plugins.text.restore import restore_summary
from fairseq_plugins.text.tokenization import Tokenizer

logger = logging.getLogger(__name__)


def _first_existing(*paths):
    for path in paths:
        if path is not None and os.path.isfile(path):
            return path
    return None


class Summarizer:
    """A trained summarization model plus the preprocessing it was trained with.

    Build it with :meth:`from_pretrained`; the constructor takes already loaded parts (``model``: a
    FairseqEncoderDecoderModel such as pgn_lstm; ``task``: a translation-like task whose dictionaries are the
    model's; ``settings``: the ``settings`` of a prep.json; ``sp_model_path``: the sentencepiece model for unit
    ``sp``).  The regular vocabulary used to mark OOV words is read from the task's dictionary, or given as
    ``vocab`` (the words of dict.txt without markers, as ``summ-prepare --apply`` reads them).  ``device``
    moves the model there (None: it stays where it is).
    """

    def __init__(self, model, task, settings: Dict, sp_model_path=None, vocab=None, device=None,
                 generation: Optional[Dict] = None, target_lengths: Optional[Dict] = None):
        fairseq_plugins.register()
        self.generation = dict(generation or DEFAULT_GENERATION)  # summarize's defaults
        self.target_lengths = target_lengths  # prep.json's lengths of the training targets (None: not recorded)
        self._checked_lengths = set()  # the (min_len, max_len_a, max_len_b) already checked against them
        if device is not None:
            model = model.to(resolve_device(device))
        self.model = model.eval()
        self.task = task
        self.settings = dict(settings)
        self.src_dict = task.source_dictionary
        self.tgt_dict = task.target_dictionary
        first_marker = markers.first_marker_index(self.src_dict)
        if vocab is None:
            vocab = set(self.src_dict.symbols[self.src_dict.nspecial:first_marker])
        self.vocab = set(vocab)
        self.num_markers = sum(markers.marker_index(sym) is not None for sym in self.src_dict.symbols[first_marker:])
        expected = self.settings.get("num_markers")
        if expected is not None and expected != self.num_markers:
            raise ValueError(f"the dictionary has {self.num_markers} OOV markers, the preprocessing settings say "
                             f"{expected}: dictionary and prep.json do not belong together")
        self.tokenizer = Tokenizer(self.settings["lang"], self.settings["unit"],
                                   self.settings.get("lowercase", False), sp_model_path)

    @property
    def device(self) -> torch.device:
        """Where inputs go: the device of the model's parameters (so it follows ``summarizer.model.cuda()``)."""
        return model_device(self.model)

    # ------------------------------------------------------------------ loading
    @classmethod
    def from_pretrained(cls, model_dir, checkpoint_file: str = "checkpoint_best.pt", data_dir=None, device=None,
                        quantize: Optional[str] = None):
        """Load ``model_dir/checkpoint_file`` with the preprocessing settings and dictionary it was trained with,
        onto ``device`` (None: CUDA when available, else the CPU; see :func:`resolve_device`).

        ``quantize="int8"`` stores the decoder's recurrent cells, readout and output matrices as int8 for a
        faster CPU decoder (fairseq_plugins/inference/quantize.py, ``generate.sh --quantize int8``); it needs the CPU
        (None: the device defaults to the CPU; another device is a ``quantize.QuantizeError``, a ValueError).

        ``prep.json``, the dictionary and ``sp.model`` come from ``model_dir`` (where ``train.sh`` copies them),
        else from ``data_dir`` (``prep.json``, ``bin/dict.src.txt``, ``sp.model``).  ``model_dir`` may be a
        ``summ-package`` directory: it is checked against its manifest first, and a corrupted or incomplete
        package is refused (``package.PackageError``, a ValueError)."""
        fairseq_plugins.register()
        from fairseq_plugins.inference import quantize as quantization

        quantization.check_quantize(quantize, device)  # a bad scheme or device fails before the checkpoint is read
        device = resolve_device("cpu" if quantize is not None and device is None else device)
        package.check_if_package(model_dir)
        from fairseq import checkpoint_utils
        from fairseq.data import Dictionary
        from fairseq.dataclass.utils import merge_with_parent
        from fairseq.tasks import TASK_DATACLASS_REGISTRY, TASK_REGISTRY

        model_dir = os.fspath(model_dir)
        data_dir = os.fspath(data_dir) if data_dir is not None else None
        where = f"{model_dir}" + (f" or {data_dir}" if data_dir else "")

        def in_data(*parts):
            return os.path.join(data_dir, *parts) if data_dir else None

        checkpoint = os.path.join(model_dir, checkpoint_file)
        if not os.path.isfile(checkpoint):
            raise FileNotFoundError(f"checkpoint not found: {checkpoint}")
        prep_path = _first_existing(os.path.join(model_dir, "prep.json"), in_data("prep.json"))
        if prep_path is None:
            raise FileNotFoundError(f"prep.json not found in {where} (written by preprocess.sh, copied by train.sh)")
        prep, _ = load_prep(prep_path)
        dict_path = _first_existing(os.path.join(model_dir, "dict.txt"), in_data("bin", "dict.src.txt"))
        if dict_path is None:
            raise FileNotFoundError(f"dictionary not found: neither {model_dir}/dict.txt"
                                    + (f" nor {data_dir}/bin/dict.src.txt" if data_dir else " (give data_dir)"))
        vocab, _ = read_dict(dict_path)  # the regular vocabulary, read as summ-prepare --apply reads it
        sp_model_path = None
        sp_name = prep.get("files", {}).get("sp_model")
        if sp_name:
            sp_model_path = _first_existing(os.path.join(model_dir, sp_name), in_data(sp_name))
            if sp_model_path is None:
                raise FileNotFoundError(f"sentencepiece model {sp_name} not found in {where}")

        dictionary = Dictionary.load(dict_path)
        state = checkpoint_utils.load_checkpoint_to_cpu(checkpoint)
        if state.get("cfg") is not None:
            cfg = state["cfg"]
        else:
            from fairseq.dataclass.utils import convert_namespace_to_omegaconf

            cfg = convert_namespace_to_omegaconf(state["args"])
        task_name = cfg.task._name
        task_cfg = cfg.task
        if task_name in TASK_DATACLASS_REGISTRY:  # options added since the checkpoint get their defaults
            task_cfg = merge_with_parent(TASK_DATACLASS_REGISTRY[task_name](), task_cfg, remove_missing=True)
        # A translation-like task (translation, summarization) over the model's joined dictionary; unlike
        # tasks.setup_task it does not need the training data directory.
        task = TASK_REGISTRY[task_name](task_cfg, dictionary, dictionary)
        try:
            models, _ = checkpoint_utils.load_model_ensemble([checkpoint], task=task, state=state)
        except RuntimeError as err:
            if "size mismatch" in str(err):
                raise ValueError(f"{checkpoint} does not fit the dictionary {dict_path} ({len(dictionary)} "
                                 f"entries): {str(err)[:300]}") from None
            raise
        if quantize is not None:
            quantization.quantize_model(models[0], quantize)
        return cls(models[0], task, prep["settings"], sp_model_path=sp_model_path, vocab=vocab, device=device,
                   generation=recorded_generation(model_dir), target_lengths=prep.get("target_lengths"))

    # ------------------------------------------------------------------ preprocessing (summ-prepare --apply)
    def prepare(self, text: str):
        """(token ids with </s>, marked tokens, OOV words) of one raw document."""
        prepared = self._prepare(text)
        return prepared.ids, prepared.marked, prepared.oov_words

    def _prepare(self, text: str) -> Prepared:
        """One raw document prepared, with the counts of what truncation and marking lost (its InputReport)."""
        max_source_len = self.settings.get("max_source_len")
        stats = MarkStats()  # one document's counts
        marked, oov_words = mark_source(as_line(text), self.tokenizer, self.vocab, self.num_markers,
                                        max_source_len, stats)
        ids = self.src_dict.encode_line(" ".join(marked), add_if_not_exist=False, append_eos=True).long()
        tokens = stats.src["longest"]  # before truncation
        report = InputReport(tokens=tokens, truncated_tokens=tokens - len(marked),
                             overflow_words=stats.marker_overflow_words, unk_tokens=marked.count(UNK),
                             max_source_len=max_source_len, num_markers=self.num_markers,
                             invisible_characters=stats.invisible["characters"])
        return Prepared(ids, marked, oov_words, report)

    def input_reports(self, texts: Sequence[str]) -> List[InputReport]:
        """What the model would not read of each document (truncation, OOV words beyond the markers), without
        generating anything."""
        return [self._prepare(text).report for text in check_texts(texts, "input_reports")]

    def _prepare_all(self, texts: List[str], strict: bool) -> List[Prepared]:
        """Every document prepared; the lossy ones logged, or refused all at once with ``strict``."""
        prepared = [self._prepare(text) for text in texts]
        lossy = {i: p.report for i, p in enumerate(prepared) if p.report.lossy}
        if lossy and strict:
            raise LossyInputError(lossy, len(texts))
        for i, p in enumerate(prepared):
            if p.report.worth_a_warning:
                logger.warning("document %d of %d: %s", i, len(texts), p.report.describe())
        return prepared

    # ------------------------------------------------------------------ generation
    def build_generator(self, **options):
        """The task's generator (for ``--task summarization`` the project's beam search, with n-gram blocking and
        the coverage penalty as ``generate.sh`` passes them: ``block_ngram_repeat=3`` is
        ``--block-ngram-repeat 3``); ``options`` are fairseq generation options (``beam``, ``min_len``,
        ``unkpen``, ``sampling``...) named as attributes of fairseq's GenerationConfig, and the summarization
        task's search options (``block_ngram_repeat``, ``block_immediate_repeat``, ``block_ignore``,
        ``coverage_penalty``, ``allow_unk``).
        What ``options`` leave out is fairseq's default (``FAIRSEQ_GENERATION``) or the task's own option.
        ``summarize`` passes the model's own options (``self.generation``)."""
        project = [name for name in self.task_search_options if options.get(name)]
        if not hasattr(self.task, "generator_options") and project:
            raise ValueError(f"{', '.join(project)} need a model trained with --task summarization (this one has "
                             f"{type(self.task).__name__})")
        settings = {key: value for key, value in FAIRSEQ_GENERATION.items() if key != "batch_size"}
        return self.task.build_generator([self.model], argparse.Namespace(**dict(settings, **options)))

    task_search_options = ("block_ngram_repeat", "block_immediate_repeat", "block_ignore", "coverage_penalty")

    def _batches(self, tokens: List[torch.Tensor], batch_size: int, max_positions):
        """fairseq-interactive's batches of ``tokens``: the index batches its batch iterator makes (fairseq's
        ``get_batch_iterator``: the dataset's length order under seed 1 + epoch 1, the size filter, ``batch_by_size``
        with a multiple of 1 as the summarization task sets it), in order, each collated by the dataset as its
        DataLoader would (with ``num_workers`` 0) but in this thread.  Built here rather than by
        ``get_batch_iterator``, which logs four INFO lines per call, and touching no process-wide state: the
        DataLoader warns about pinned memory on a CPU, and silencing that with ``warnings.catch_warnings`` (or
        a logger's level) would garble the state of concurrent calls."""
        from fairseq.data import data_utils

        dataset = self.task.build_dataset_for_inference(tokens, [t.numel() for t in tokens])
        dataset.set_epoch(1)
        with data_utils.numpy_seed(1 + 1):  # get_batch_iterator's seed + epoch
            indices = dataset.ordered_indices()
        indices = self.task.filter_indices_by_size(indices, dataset, max_positions, ignore_invalid_inputs=False)
        batches = dataset.batch_by_size(indices, max_tokens=None, max_sentences=batch_size,
                                        required_batch_size_multiple=1)
        return [dataset.collater([dataset[i] for i in indices]) for indices in batches]

    def _check_lengths(self, options: Dict) -> None:
        """Logs, once for each set of bounds, where they contradict the training targets' lengths (length_fit)."""
        bounds = (options.get("min_len", 1), options.get("max_len_a", 0), options.get("max_len_b", 200))
        if bounds in self._checked_lengths:
            return
        self._checked_lengths.add(bounds)
        for warning in length_warnings(self.target_lengths, *bounds):
            logger.warning("%s", warning)

    def _generate(self, texts: Sequence[str], options: Dict, strict: bool = False):
        """[(Prepared, best hypothesis, generator)], one per text, in input order; ``options`` over
        ``self.generation``."""
        from fairseq import utils

        texts = check_texts(texts)
        check_options(options)
        generator_options = dict(self.generation, **options)
        batch_size = generator_options.pop("batch_size")
        self._check_lengths(generator_options)
        generator = self.build_generator(**generator_options)
        prepared = self._prepare_all(texts, strict)
        max_positions = utils.resolve_max_positions(self.task.max_positions(), self.model.max_positions())
        device = self.device
        results = [None] * len(texts)
        for start in range(0, len(texts), INTERACTIVE_BUFFER_SIZE):
            chunk = prepared[start:start + INTERACTIVE_BUFFER_SIZE]
            for batch in self._batches([p.ids for p in chunk], batch_size, max_positions):
                sample = {"net_input": {"src_tokens": batch["net_input"]["src_tokens"].to(device),  # B x S
                                        "src_lengths": batch["net_input"]["src_lengths"].to(device)}}  # B
                with torch.no_grad():
                    hypos = self.task.inference_step(generator, [self.model], sample)
                for local_id, nbest in zip(batch["id"].tolist(), hypos):
                    results[start + local_id] = (chunk[local_id], nbest[0], generator)
        missing = [i for i, result in enumerate(results) if result is None]
        if missing:  # fairseq dropped an input (it should not with ignore_invalid_inputs=False)
            raise RuntimeError(f"no summary was generated for inputs {missing}")
        return results

    def _hypothesis_tokens(self, hypo, generator) -> List[str]:
        """The hypothesis as fairseq-interactive prints it (H- line), split into tokens."""
        strip = getattr(generator, "symbols_to_strip_from_output", None) or {generator.eos}
        return self.tgt_dict.string(hypo["tokens"].int().cpu(), None, extra_symbols_to_ignore=strip).split()

    def _restore(self, tokens, oov_words, detok: bool) -> str:
        counts = {"restored": 0, "unmatched": 0, "unk": 0}
        return restore_summary(tokens, oov_words, self.settings["lang"], self.settings["unit"], False, counts,
                               display=detok)[1]

    def summarize(self, texts: Sequence[str], strict: bool = False, detok: bool = True, **options) -> List[str]:
        """One detokenized summary per raw document, in order (``generate.sh --input``'s output; ``detok=False``:
        the tokens ROUGE scores, ``generate.sh --no-detok``'s).  ``options``:
        beam, max_len_a, max_len_b, min_len, lenpen, batch_size, block_ngram_repeat, block_immediate_repeat,
        block_ignore, coverage_penalty and other fairseq generation options (:func:`known_options`; another name is
        a TypeError); the default of each is the model's own (``self.generation``).  A document the model cannot
        read whole is summarized from what it reads, with a logged warning; ``strict=True`` raises
        :class:`LossyInputError` instead, before generating anything."""
        return [text for text, _ in self.summarize_with_reports(texts, strict, detok, **options)]

    def summarize_with_reports(self, texts: Sequence[str], strict: bool = False, detok: bool = True,
                               **options) -> List[Tuple[str, InputReport]]:
        """Like :meth:`summarize`, each summary with its document's :class:`InputReport` (what the model did not
        read of it), without :meth:`summarize_with_details`'s extra forward pass."""
        return [(self._restore(self._hypothesis_tokens(hypo, generator), prepared.oov_words, detok), prepared.report)
                for prepared, hypo, generator in self._generate(texts, options, strict)]

    def summarize_with_details(self, texts: Sequence[str], strict: bool = False, detok: bool = True,
                               **options) -> List[SummaryDetails]:
        """Like :meth:`summarize`, with each summary's per-token attention, p_gen and coverage, and the counts
        of what the model did not read of its document (``input_report``)."""
        details = []
        for prepared, hypo, generator in self._generate(texts, options, strict):
            marked, oov_words = prepared.marked, prepared.oov_words
            text = self._restore(self._hypothesis_tokens(hypo, generator), oov_words, detok)
            forced = teacher_force(self.model, prepared.ids, hypo["tokens"])
            source_markers = marked + [self.src_dict[self.src_dict.eos()]]
            summary_markers = [self.tgt_dict[i] for i in hypo["tokens"].tolist()]
            details.append(SummaryDetails(
                text=text,
                source_tokens=[_as_word(tok, oov_words) for tok in source_markers],
                source_oov=[markers.marker_index(tok) is not None for tok in source_markers],
                summary_tokens=[_as_word(tok, oov_words) for tok in summary_markers],
                summary_copied_oov=[markers.marker_index(tok) is not None for tok in summary_markers],
                attention=forced["attention"], p_gen=forced["p_gen"], coverage=forced["coverage"],
                positional_scores=hypo["positional_scores"].float().cpu().numpy(), score=float(hypo["score"]),
                source_markers=source_markers, summary_markers=summary_markers, oov_words=list(oov_words),
                input_report=prepared.report,
            ))
        return details


def _as_word(token: str, oov_words: List[str]) -> str:
    k = markers.marker_index(token)
    if k is None:
        return token
    return oov_words[k] if k < len(oov_words) else "<unk>"


def forced_inputs(model, src_ids: torch.Tensor, summary_ids: torch.Tensor):
    """The model's inputs for teacher forcing one summary, on the model's device: the source (1 x S), its length (1)
    and the decoder's inputs, </s> then the summary without its last token (1 x T), as fairseq's beam search
    feeds them."""
    device = model_device(model)
    src = src_ids.long().view(1, -1).to(device)  # 1 x S
    summary = summary_ids.long().to(device)  # T
    prev = torch.cat([summary.new_tensor([model.decoder.dictionary.eos()]), summary[:-1]]).view(1, -1)  # 1 x T
    return src, torch.tensor([src.size(1)], device=device), prev


def teacher_force(model, src_ids: torch.Tensor, summary_ids: torch.Tensor) -> Dict[str, Optional[np.ndarray]]:
    """Run one document's source (1-D ids, ending in </s>) and summary (1-D ids, ending in </s>) through the model
    with teacher forcing; returns numpy arrays ``attention`` (T x S), ``p_gen`` (T, or None) and ``coverage``
    (T x S, or None), T = len(summary_ids), S = len(src_ids).  The decoder is fed </s> then the summary without
    its last token, as fairseq's beam search feeds it, so step t's values are those the beam saw.  The inputs go
    to the model's device, wherever they come from."""
    src, lengths, prev = forced_inputs(model, src_ids, summary_ids)
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            _, extra = model(src, lengths, prev)
    finally:
        model.train(was_training)
    attn = extra["attn"][0] if isinstance(extra["attn"], (list, tuple)) else extra["attn"]

    def numpy(x):
        return None if x is None else x[0].float().cpu().numpy()

    p_gen = extra.get("p_gen")
    return {
        "attention": numpy(attn),
        "p_gen": None if p_gen is None else numpy(p_gen)[:, 0],
        "coverage": numpy(extra.get("coverage")),
    }
