"""fairseq scorer ``rouge``: ``fairseq-generate DATA/bin --user-dir fairseq_plugins --gen-subset SPLIT
--scoring rouge`` on data that preprocess.sh wrote.

The figure is what ``generate.sh --split SPLIT --score`` prints as "F1 mean over documents (exact)" for the
same summaries, or the scorer refuses with an error that says what to run instead.  For each pair that
fairseq-generate passes (``add_string(target, hypothesis)``):
  1. the document is found: the pair's target string is the ``T-`` string of one document of DATA/bin's
     SPLIT (scoring/document_match.py);
  2. the hypothesis becomes the text summ-restore writes: ``<oov-K>`` markers replaced by that document's
     OOV words (DATA/tok/SPLIT.oov), detokenized for DATA/prep.json's language and unit;
  3. it is scored against the document's raw reference DATA/ref/SPLIT.tgt with the exact Python ROUGE
     (ROUGE-1.5.5's tokenizer and Porter stemmer for English, characters for Chinese), split into sentences
     as summ-rouge splits them; steps 2-3 are scoring/validation_rouge.py, the code of ``--eval-rouge``.
The corpus figure is the arithmetic mean over documents (not ROUGE-1.5.5's bootstrap ``Average_F``).
``result_string()`` gives R-1 / R-2 / R-L F1 in percent; ``score()`` one of them (``--rouge-metric``,
default ROUGE-L).  DATA is ``--rouge-data-dir``, by default the parent of fairseq's data directory.

It never scores fairseq's tokenized strings themselves: there a target ``<<unk>>`` matches a hypothesis
``<unk>`` (both "unk" to ROUGE's tokenizer) and the markers ``<oov-0>`` and ``<oov-7>`` share "oov", which
inflates the scores.  It refuses (UserError) where it cannot know generate.sh's figure:
  * outside fairseq-generate, or without prep.json, ref/SPLIT.tgt and tok/SPLIT.oov (at start);
  * with ``--tokenizer`` or ``--bpe``: fairseq then passes a decoded hypothesis, generate.sh restores the tokens
    of the ``H-`` lines (at start);
  * when a target is no document's, or not every document got exactly one hypothesis (generate.sh
    --score needs them all);
  * when documents with the same target string differ in reference or OOV words and their hypotheses score
    differently against them (which hypothesis is whose is unknown; identical duplicates are fine).
"""
import contextlib
import os
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Tuple

from fairseq import utils
from fairseq.dataclass import ChoiceEnum, FairseqDataclass
from fairseq.scoring import BaseScorer, register_scorer
from omegaconf import II
from omegaconf.errors import OmegaConfBaseException

from fairseq_plugins.scoring.document_match import Group, fairseq_targets, match_documents, shorten
from fairseq_plugins.scoring.validation_rouge import METRICS, ValidationRouge
from fairseq_plugins.text.textio import UserError

ROUGE_METRICS = ChoiceEnum(["rouge1", "rouge2", "rougeL"])
NAMES = {"rouge1": "rouge_1", "rouge2": "rouge_2", "rougeL": "rouge_l"}  # --rouge-metric -> METRICS key
Scores = Tuple[float, float, float]  # R-L F1 of one document (fractions)


@dataclass
class RougeScorerConfig(FairseqDataclass):
    rouge_data_dir: Optional[str] = field(
        default=None, metadata={"help": "the folder preprocess.sh wrote (prep.json, tok/SPLIT.oov, ref/SPLIT.tgt); "
                                        "default: the parent of the data directory"})
    rouge_metric: ROUGE_METRICS = field(default="rougeL", metadata={"help": "what score() returns (F1, percent)"})
    # fairseq-generate's own settings (no options of their own)
    data: Optional[str] = II("task.data")
    gen_subset: Optional[str] = II("dataset.gen_subset")
    source_lang: Optional[str] = II("task.source_lang")
    target_lang: Optional[str] = II("task.target_lang")
    post_process: Optional[str] = II("common_eval.post_process")
    tokenizer: Any = II("tokenizer")
    bpe: Any = II("bpe")


def generate_settings(cfg) -> Dict[str, Any]:
    """fairseq-generate's settings the scorer reads; a UserError outside fairseq-generate."""
    names = ("data", "gen_subset", "source_lang", "target_lang", "post_process", "tokenizer", "bpe")
    try:
        settings = {name: getattr(cfg, name) for name in names}
    except OmegaConfBaseException:  # an interpolation into a config without that key (another task)
        settings = {}
    if not settings or not isinstance(settings["data"], str) or settings["data"].startswith("${"):
        raise UserError("--scoring rouge works inside fairseq-generate with a translation-like task (it reads the "
                        "data directory, --gen-subset and -s/-t of the run)")
    for option in ("tokenizer", "bpe"):
        if settings[option] is not None:
            raise UserError(f"--scoring rouge: leave out --{option}: fairseq passes the scorer the decoded "
                            f"hypothesis, while generate.sh --score restores the tokens of the H- lines (run "
                            f"generate.sh --split {settings['gen_subset']} --score instead)")
    return settings


def rouge_data_dir(cfg, data: str) -> str:
    if cfg.rouge_data_dir:
        return cfg.rouge_data_dir
    return os.path.dirname(os.path.abspath(utils.split_paths(data)[0]))


@register_scorer("rouge", dataclass=RougeScorerConfig)
class RougeFairseqScorer(BaseScorer):
    def __init__(self, cfg):
        super().__init__(cfg)
        settings = generate_settings(cfg)
        self.split = settings["gen_subset"]
        self.data_dir = rouge_data_dir(cfg, settings["data"])
        self.metric = NAMES[str(cfg.rouge_metric)]
        if not os.path.isfile(os.path.join(self.data_dir, "prep.json")):
            raise UserError(f"--scoring rouge: {self.data_dir}/prep.json not found: the scorer restores OOV markers "
                            f"and scores against the raw references of the folder preprocess.sh wrote; give that "
                            f"folder with --rouge-data-dir")
        with scorer_errors():
            self.rouge = ValidationRouge(self.data_dir)
            self.refs, self.oov = self.rouge.split(self.split)  # read now: a missing file fails at start
        self.targets = fairseq_targets(utils.split_paths(settings["data"])[0], self.split, settings["source_lang"],
                                       settings["target_lang"], settings["post_process"])
        if len(self.targets) != len(self.refs):
            raise UserError(f"--scoring rouge: split {self.split!r} has {len(self.targets)} documents but "
                            f"{self.data_dir}/ref/{self.split}.tgt has {len(self.refs)} lines (give the folder of "
                            f"this data with --rouge-data-dir)")
        self.means: Optional[Dict[str, float]] = None

    def add_string(self, ref, pred):
        super().add_string(ref, pred)
        self.means = None

    def corpus(self) -> Dict[str, float]:
        """Mean F1 (fraction) over the split's documents per ``METRICS`` name, and their number ``n``."""
        if self.means is None:
            groups = match_documents(self.targets, list(zip(self.ref, self.pred)), self.split)
            rows = [row for group in groups for row in self.group_scores(group)]
            if not rows:
                raise UserError(f"--scoring rouge: split {self.split!r} has no documents")
            self.means = {name: sum(row[i] for row in rows) / len(rows) for i, name in enumerate(METRICS)}
            self.means["n"] = len(rows)
        return self.means

    def group_scores(self, group: Group) -> List[Scores]:
        """Scores of the hypotheses of documents that share a target string.  Which hypothesis is whose is
        unknown, so every hypothesis must score the same against each of the documents (true of identical
        documents); else the figure is unknown and this refuses."""
        docs, hyps = group
        if len({(self.refs[d], tuple(self.oov[d])) for d in docs}) == 1:  # one document, or identical ones
            return [self.doc_scores(docs[0], h) for h in hyps]
        rows = []
        for hyp in hyps:
            against = {self.doc_scores(d, hyp) for d in docs}
            if len(against) > 1:
                raise UserError(
                    f"--scoring rouge: documents {', '.join(map(str, docs))} of {self.split!r} have the same target "
                    f"in fairseq's output ({shorten(self.targets[docs[0]])!r}) but different references or OOV "
                    f"words, and fairseq does not tell the scorer which hypothesis is whose: run generate.sh "
                    f"--split {self.split} --score")
            rows.append(against.pop())
        return rows

    def doc_scores(self, doc: int, hypothesis: str) -> Scores:
        sums = self.rouge.score(self.split, [doc], [hypothesis.split()])
        return tuple(sums[name] for name in METRICS)

    def score(self) -> float:
        return 100.0 * self.corpus()[self.metric]

    def result_string(self) -> str:
        c = self.corpus()
        return (f"ROUGE F1 (mean over the {c['n']} documents, OOV markers restored, against "
                f"{self.data_dir}/ref/{self.split}.tgt, as generate.sh --score): R-1 {100 * c['rouge_1']:.2f} "
                f"R-2 {100 * c['rouge_2']:.2f} R-L {100 * c['rouge_l']:.2f}")


@contextlib.contextmanager
def scorer_errors():
    """validation_rouge.py's errors, named after this scorer's option instead of --eval-rouge."""
    try:
        yield
    except UserError as error:
        raise UserError(str(error).replace("--eval-rouge", "--scoring rouge", 1)) from None
