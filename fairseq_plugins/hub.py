"""Summarize raw text with a trained model from Python, in the manner of fairseq's hub interface.

    from fairseq_plugins.hub import Summarizer

    summarizer = Summarizer.from_pretrained("work/model")          # a train.sh SAVE_DIR
    summarizer.summarize(["first document ...", "second document ..."], beam=5)   # -> list of str
    details = summarizer.summarize_with_details(["a document ..."])[0]          # attention, p_gen, coverage

A model directory is what ``train.sh`` writes: the checkpoints plus ``prep.json`` (tokenization settings),
``dict.txt`` (the joined dictionary, OOV markers last) and ``sp.model`` (sentencepiece units only).  When one of
these is missing there, it is looked up in ``data_dir`` (the output of ``preprocess.sh``: ``prep.json``,
``sp.model``, and ``bin/dict.src.txt`` for the dictionary).

``summarize`` does what ``generate.sh --input`` does, with the same functions:
  1. tokenize, truncate and mark OOV words as ``summ-prepare --apply`` does (``text.tokenization.Tokenizer``,
     ``text.prepare.mark_source``);
  2. batch as ``fairseq-interactive --buffer-size 64 --batch-size B`` does (same task batch iterator, same order)
     and run the beam search built by ``task.build_generator`` (for ``--task summarization`` the project's
     generator: ``summarize(texts, block_ngram_repeat=3)`` is ``generate.sh --input ... --block-ngram-repeat 3``);
  3. map markers back to the document's words and detokenize as ``summ-restore`` does
     (``text.restore.restore_summary``).
So for the same checkpoint and generation options its output equals ``generate.sh --input``'s, line for line.
The default options are those of ``configs/scitldr_small.conf`` (beam 5, max_len_a 0, max_len_b 60,
min_len 5, batch size 32).  Every input gets exactly one summary, in order, an empty document included.
A text is one document: line breaks inside it are read as spaces (``generate.sh`` would split there).

``summarize_with_details`` also teacher-forces each generated summary through the model to read, per output
token, the attention over the source, ``p_gen`` (eq 8) and the coverage vector (eq 10): the input of the
attention visualiser (``fairseq_plugins/visualize.py``, ``scripts/visualize_attention.py``).

Checkpoints are read with torch's safe loading left on (``fairseq_plugins.register()`` allow-lists the classes
a fairseq checkpoint holds).
"""
import argparse
import os
import warnings
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence

import numpy as np
import torch

import fairseq_plugins
from fairseq_plugins.text import markers
from fairseq_plugins.text.prepare import MarkStats, load_prep, mark_source, read_dict
from fairseq_plugins.text.restore import restore_summary
from fairseq_plugins.text.tokenization import Tokenizer

# generate.sh runs fairseq-interactive with --buffer-size 64: inputs are batched 64 at a time.
INTERACTIVE_BUFFER_SIZE = 64
DEFAULT_BATCH_SIZE = 32


@dataclass
class SummaryDetails:
    """One document's summary with what the model did at each output step (for the visualiser).

    T = number of generated tokens (the final ``</s>`` included), S = number of source tokens the model read
    (after truncation, ``</s>`` included).  Tokens are shown as words: a marker ``<oov-K>`` appears as the
    document's K-th OOV word (``<unk>`` if the document has no such word).
    """

    text: str  # the summary, exactly as summarize() returns it
    source_tokens: List[str]  # S source tokens as words
    source_oov: List[bool]  # S: True where the model read an OOV marker
    summary_tokens: List[str]  # T generated tokens as words
    summary_copied_oov: List[bool]  # T: True where the model produced an OOV marker (necessarily by copying)
    attention: np.ndarray  # T x S: attention over the source at each output step (rows sum to 1)
    p_gen: Optional[np.ndarray]  # T: probability of generating from the vocabulary (None: model without copy)
    coverage: Optional[np.ndarray]  # T x S: coverage c^t before step t (None: model without coverage)
    positional_scores: np.ndarray  # T: log P of each generated token, from the beam search
    score: float  # the beam's score (length-normalised log probability)
    source_markers: List[str] = field(default_factory=list)  # S source tokens as the model read them
    summary_markers: List[str] = field(default_factory=list)  # T generated tokens as the model wrote them
    oov_words: List[str] = field(default_factory=list)  # the document's OOV words, K-th = word of <oov-K>


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
    ``vocab`` (the words of dict.txt without markers, as ``summ-prepare --apply`` reads them).
    """

    def __init__(self, model, task, settings: Dict, sp_model_path=None, vocab=None):
        fairseq_plugins.register()
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

    # ------------------------------------------------------------------ loading
    @classmethod
    def from_pretrained(cls, model_dir, checkpoint_file: str = "checkpoint_best.pt", data_dir=None):
        """Load ``model_dir/checkpoint_file`` with the preprocessing settings and dictionary it was trained with.

        ``prep.json``, the dictionary and ``sp.model`` come from ``model_dir`` (where ``train.sh`` copies them),
        else from ``data_dir`` (``prep.json``, ``bin/dict.src.txt``, ``sp.model``)."""
        fairseq_plugins.register()
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
        return cls(models[0], task, prep["settings"], sp_model_path=sp_model_path, vocab=vocab)

    # ------------------------------------------------------------------ preprocessing (summ-prepare --apply)
    def prepare(self, text: str):
        """(token ids with </s>, marked tokens, OOV words) of one raw document."""
        marked, oov_words = mark_source(text.replace("\n", " "), self.tokenizer, self.vocab, self.num_markers,
                                        self.settings.get("max_source_len"), MarkStats())
        ids = self.src_dict.encode_line(" ".join(marked), add_if_not_exist=False, append_eos=True).long()
        return ids, marked, oov_words

    # ------------------------------------------------------------------ generation
    def build_generator(self, beam=5, max_len_a=0, max_len_b=60, min_len=5, lenpen=1.0, block_ngram_repeat=0,
                        block_ignore="", coverage_penalty=0.0, **options):
        """The task's generator (for ``--task summarization`` the project's beam search, with n-gram blocking and
        the coverage penalty as ``generate.sh`` passes them: ``block_ngram_repeat=3`` is
        ``--block-ngram-repeat 3``); ``options`` are other fairseq generation options (``unkpen``,
        ``sampling``...), named as attributes of fairseq's GenerationConfig.  Defaults are those of
        generate.sh, never the options the model was trained with."""
        project = dict(block_ngram_repeat=block_ngram_repeat, block_ignore=block_ignore,
                       coverage_penalty=coverage_penalty)
        if not hasattr(self.task, "generator_options") and any(project.values()):
            raise ValueError(f"{', '.join(k for k, v in project.items() if v)} need a model trained with "
                             f"--task summarization (this one has {type(self.task).__name__})")
        args = argparse.Namespace(beam=beam, max_len_a=max_len_a, max_len_b=max_len_b, min_len=min_len,
                                  lenpen=lenpen, **project, **options)
        return self.task.build_generator([self.model], args)

    def _generate(self, texts: Sequence[str], batch_size: int, generator_options: Dict):
        """[(ids, marked tokens, OOV words, best hypothesis, generator)], one per text, in input order."""
        if isinstance(texts, str):
            raise TypeError("summarize() takes a list of documents, not a single string")
        from fairseq import utils

        texts = list(texts)
        generator = self.build_generator(**generator_options)
        prepared = [self.prepare(text) for text in texts]
        max_positions = utils.resolve_max_positions(self.task.max_positions(), self.model.max_positions())
        results = [None] * len(texts)
        for start in range(0, len(texts), INTERACTIVE_BUFFER_SIZE):
            chunk = prepared[start:start + INTERACTIVE_BUFFER_SIZE]
            tokens = [ids for ids, _, _ in chunk]
            dataset = self.task.build_dataset_for_inference(tokens, [t.numel() for t in tokens])
            with warnings.catch_warnings():  # fairseq asks the DataLoader for pinned memory, even on a CPU
                warnings.filterwarnings("ignore", message=".*pin_memory.*")
                batches = list(self.task.get_batch_iterator(
                    dataset=dataset, max_tokens=None, max_sentences=batch_size, max_positions=max_positions,
                    ignore_invalid_inputs=False, disable_iterator_cache=True,
                ).next_epoch_itr(shuffle=False))
            for batch in batches:
                sample = {"net_input": {"src_tokens": batch["net_input"]["src_tokens"],
                                        "src_lengths": batch["net_input"]["src_lengths"]}}
                with torch.no_grad():
                    hypos = self.task.inference_step(generator, [self.model], sample)
                for local_id, nbest in zip(batch["id"].tolist(), hypos):
                    results[start + local_id] = (*chunk[local_id], nbest[0], generator)
        missing = [i for i, result in enumerate(results) if result is None]
        if missing:  # fairseq dropped an input (it should not with ignore_invalid_inputs=False)
            raise RuntimeError(f"no summary was generated for inputs {missing}")
        return results

    def _hypothesis_tokens(self, hypo, generator) -> List[str]:
        """The hypothesis as fairseq-interactive prints it (H- line), split into tokens."""
        strip = getattr(generator, "symbols_to_strip_from_output", None) or {generator.eos}
        return self.tgt_dict.string(hypo["tokens"].int().cpu(), None, extra_symbols_to_ignore=strip).split()

    def _restore(self, tokens, oov_words) -> str:
        counts = {"restored": 0, "unmatched": 0}
        return restore_summary(tokens, oov_words, self.settings["lang"], self.settings["unit"], False, counts)[1]

    def summarize(self, texts: Sequence[str], beam: int = 5, max_len_a: float = 0, max_len_b: int = 60,
                  min_len: int = 5, lenpen: float = 1.0, batch_size: int = DEFAULT_BATCH_SIZE,
                  **generator_options) -> List[str]:
        """One detokenized summary per raw document, in order (``generate.sh --input``'s output)."""
        options = dict(beam=beam, max_len_a=max_len_a, max_len_b=max_len_b, min_len=min_len, lenpen=lenpen,
                       **generator_options)
        return [self._restore(self._hypothesis_tokens(hypo, generator), oov_words)
                for _ids, _marked, oov_words, hypo, generator in self._generate(texts, batch_size, options)]

    def summarize_with_details(self, texts: Sequence[str], beam: int = 5, max_len_a: float = 0,
                               max_len_b: int = 60, min_len: int = 5, lenpen: float = 1.0,
                               batch_size: int = DEFAULT_BATCH_SIZE, **generator_options) -> List[SummaryDetails]:
        """Like :meth:`summarize`, with each summary's per-token attention, p_gen and coverage."""
        options = dict(beam=beam, max_len_a=max_len_a, max_len_b=max_len_b, min_len=min_len, lenpen=lenpen,
                       **generator_options)
        details = []
        for ids, marked, oov_words, hypo, generator in self._generate(texts, batch_size, options):
            text = self._restore(self._hypothesis_tokens(hypo, generator), oov_words)
            forced = teacher_force(self.model, ids, hypo["tokens"].cpu())
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
            ))
        return details


def _as_word(token: str, oov_words: List[str]) -> str:
    k = markers.marker_index(token)
    if k is None:
        return token
    return oov_words[k] if k < len(oov_words) else "<unk>"


def teacher_force(model, src_ids: torch.Tensor, summary_ids: torch.Tensor) -> Dict[str, Optional[np.ndarray]]:
    """Run one document's source (1-D ids, ending in </s>) and summary (1-D ids, ending in </s>) through the model
    with teacher forcing; returns numpy arrays ``attention`` (T x S), ``p_gen`` (T, or None) and ``coverage``
    (T x S, or None), T = len(summary_ids), S = len(src_ids).  The decoder is fed </s> then the summary without
    its last token, as fairseq's beam search feeds it, so step t's values are those the beam saw."""
    eos = model.decoder.dictionary.eos()
    src = src_ids.long().view(1, -1)
    prev = torch.cat([torch.tensor([eos]), summary_ids.long()[:-1]]).view(1, -1)
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            _, extra = model(src, torch.tensor([src.size(1)]), prev)
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
