"""fairseq scorer ``rouge``: ``fairseq-generate ... --user-dir fairseq_plugins --scoring rouge``.

Scores each (target, hypothesis) string pair fairseq-generate passes (after ``--post-process`` / detokenization)
with :mod:`fairseq_plugins.scoring.rouge_python`, which reproduces ROUGE-1.5.5 (``-n 2 -m``) per document;
the corpus figure is the arithmetic mean over documents.  ``result_string()`` (printed by fairseq-generate)
gives R-1 / R-2 / R-L F1 in percent; ``score()`` returns one number in percent, by default the ROUGE-L F1
(``--rouge-metric rouge1|rouge2|rougeL`` picks another).  Note this is the exact mean, not ROUGE-1.5.5's
bootstrap ``Average_F``; use ``summ-rouge`` for the official run.

A line is split into sentences (they matter for the summary-level ROUGE-L) on the token ``<q>`` (or
``##SENT##``, or ``--rouge-sent-sep TOKEN``) when present, else, in English, after each token ``.``, ``!``,
``?`` (see :func:`~fairseq_plugins.scoring.rouge_python.split_sentences`).

Options: ``--rouge-lang en|zh`` (zh: one token per character), ``--rouge-no-stem`` (English: no ``-m``).
"""
from dataclasses import dataclass, field

from fairseq.dataclass import ChoiceEnum, FairseqDataclass
from fairseq.scoring import BaseScorer, register_scorer

from fairseq_plugins.scoring.rouge_python import RougeScorer, split_sentences

ROUGE_LANGS = ChoiceEnum(["en", "zh"])
ROUGE_METRICS = ChoiceEnum(["rouge1", "rouge2", "rougeL"])


@dataclass
class RougeScorerConfig(FairseqDataclass):
    rouge_lang: ROUGE_LANGS = field(default="en", metadata={"help": "en: ROUGE-1.5.5 tokens; zh: characters"})
    rouge_no_stem: bool = field(default=False, metadata={"help": "English: no Porter stemming (ROUGE -m off)"})
    rouge_sent_sep: str = field(
        default="auto", metadata={"help": "sentence separator token; auto: <q> or ##SENT## if present, else "
                                          "sentence-final punctuation (English)"})
    rouge_metric: ROUGE_METRICS = field(default="rougeL", metadata={"help": "what score() returns (F1, percent)"})


@register_scorer("rouge", dataclass=RougeScorerConfig)
class RougeFairseqScorer(BaseScorer):
    def __init__(self, cfg):
        super().__init__(cfg)
        self.lang = str(getattr(cfg, "rouge_lang", "en"))
        sep = getattr(cfg, "rouge_sent_sep", "auto")
        self.sent_sep = None if sep in (None, "", "auto") else sep
        self.metric = str(getattr(cfg, "rouge_metric", "rougeL"))
        self.scorer = RougeScorer(lang=self.lang, stem=not getattr(cfg, "rouge_no_stem", False))

    def add_string(self, ref, pred):
        self.ref.append(ref)
        self.pred.append(pred)

    def corpus(self):
        """Mean (precision, recall, F1) per ROUGE type, as fractions."""
        refs = [split_sentences(r, self.lang, self.sent_sep) for r in self.ref]
        hyps = [split_sentences(p, self.lang, self.sent_sep) for p in self.pred]
        return self.scorer.corpus_scores(refs, hyps)

    def score(self) -> float:
        return 100.0 * self.corpus()[self.metric].fmeasure

    def result_string(self) -> str:
        c = self.corpus()
        return (f"ROUGE F1 (ROUGE-1.5.5 tokenization, {len(self.ref)} documents): "
                f"R-1 {100 * c['rouge1'].fmeasure:.2f} R-2 {100 * c['rouge2'].fmeasure:.2f} "
                f"R-L {100 * c['rougeL'].fmeasure:.2f}")
