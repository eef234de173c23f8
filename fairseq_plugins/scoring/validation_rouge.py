"""ROUGE of generated validation summaries, computed as ``generate.sh --score`` computes it.

``--task summarization --eval-rouge`` summarizes each validation batch and scores it here:
  1. the hypothesis tokens become text as ``summ-restore`` makes it: ``<oov-K>`` markers are replaced by the
     document's K-th OOV word (DATA/tok/SPLIT.oov), then the tokens are detokenized for the language and
     unit of DATA/prep.json (text/restore.py);
  2. the text is scored against the document's raw reference (DATA/ref/SPLIT.tgt, the file ``generate.sh
     --score`` uses), both split into sentences as ``summ-rouge`` splits them, with the exact Python ROUGE
     (scoring/rouge_python.py: ROUGE-1.5.5's tokenizer and stemmer for English, characters for Chinese).
The batch contributes the sums of the per-document F1s and the number of documents; the task sums these over
batches and workers and logs their quotient, the arithmetic mean over documents, which is what ``summ-rouge``
prints as "mean over documents".  DATA is the folder preprocess.sh wrote (the parent of DATA/bin).
"""
import os
from typing import Dict, List, Sequence, Tuple

from fairseq_plugins.scoring.rouge155 import read_lines as read_references
from fairseq_plugins.scoring.rouge_python import RougeScorer, split_sentences
from fairseq_plugins.text.prepare import load_prep
from fairseq_plugins.text.restore import restore_summary
from fairseq_plugins.text.textio import UserError, read_lines

METRICS = {"rouge_1": "rouge1", "rouge_2": "rouge2", "rouge_l": "rougeL"}  # logged name -> RougeScorer name


class ValidationRouge:
    """References and OOV words of the splits of one preprocessed data folder, and the scorer.

    Args:
        data_dir: the folder ``preprocess.sh`` wrote (prep.json, tok/SPLIT.oov, ref/SPLIT.tgt).
    """

    def __init__(self, data_dir: str):
        self.data_dir = data_dir
        prep_path = os.path.join(data_dir, "prep.json")
        if not os.path.isfile(prep_path):
            raise UserError(f"--eval-rouge: {prep_path} not found (give --eval-rouge-dir, the folder "
                            f"preprocess.sh wrote)")
        settings = load_prep(prep_path)[0]["settings"]
        self.lang, self.unit = settings["lang"], settings["unit"]
        self.scorer = RougeScorer(lang=self.lang, stem=True)
        self.splits: Dict[str, Tuple[List[str], List[List[str]]]] = {}

    def split(self, name: str) -> Tuple[List[str], List[List[str]]]:
        """(references, OOV words per document) of split ``name``, read once."""
        if name not in self.splits:
            refs = read_references(self._path("ref", f"{name}.tgt"))  # as summ-rouge reads them
            oov = [line.split("\t") if line else []  # as summ-restore reads them
                   for _, line in read_lines(self._path("tok", f"{name}.oov"))]
            if len(refs) != len(oov):
                raise UserError(f"--eval-rouge: {self.data_dir}/ref/{name}.tgt has {len(refs)} lines but "
                                f"tok/{name}.oov has {len(oov)}")
            self.splits[name] = (refs, oov)
        return self.splits[name]

    def _path(self, *parts: str) -> str:
        path = os.path.join(self.data_dir, *parts)
        if not os.path.isfile(path):
            raise UserError(f"--eval-rouge: {path} not found (written by preprocess.sh)")
        return path

    def summary_text(self, tokens: Sequence[str], oov_words: Sequence[str]) -> str:
        """Generated tokens -> the text summ-restore writes."""
        counts = {"restored": 0, "unmatched": 0, "unk": 0}
        return restore_summary(list(tokens), list(oov_words), self.lang, self.unit, False, counts)[1]

    def score(self, split: str, ids: Sequence[int], hypotheses: Sequence[Sequence[str]]) -> Dict[str, float]:
        """Sums of the F1s (fractions) of documents ``ids`` of ``split`` and their count ``n``."""
        refs, oov = self.split(split)
        sums = dict.fromkeys(METRICS, 0.0)
        for doc, tokens in zip(ids, hypotheses):
            if doc >= len(refs):
                raise UserError(f"--eval-rouge: document {doc} of split {split!r} is beyond the {len(refs)} "
                                f"lines of {self.data_dir}/ref/{split}.tgt (data and folder do not match)")
            text = self.summary_text(tokens, oov[doc])
            scores = self.scorer.score(split_sentences(refs[doc], self.lang), split_sentences(text, self.lang))
            for name, rouge_type in METRICS.items():
                sums[name] += scores[rouge_type].fmeasure
        sums["n"] = len(ids)
        return sums
