"""How abstractive, how repetitive and how long summaries are, against their sources: the figures of
``summ-analyze`` (its command: ``cli/analyze.py``; its chart and page: ``viz/analysis_page.py``).

Inputs are line-aligned plain text, one document a line, as ``generate.sh`` writes summaries and ``summ-rouge``
reads them; the reference, when given, is one more system.  Pure Python (no fairseq, no torch).

Every text must be in the same units as the source, or "win," and "win" count as different words.  With
``--prep`` (the ``prep.json`` of the model's data folder) every text is first tokenized as the model's source
was (its units and lower-casing, and the source truncated as the model read it), so raw sources, raw references
and ``generate.sh``'s detokenized summaries give the figures of ``generate.sh --score``.  Without it, an English
file whose words carry attached punctuation far more often than the source's gets a warning.

Definitions (every figure is per system):

* **Tokens**: English: the whitespace tokens of the text as given (lower-cased with ``--lower``); Chinese
  (``--lang zh``): its characters, whitespace removed, as the project's Chinese ROUGE counts them.  The
  sentence separators ``<q>`` and ``##SENT##`` are not tokens: they only end sentences.  A summary and its
  source are each one token sequence (n-grams and fragments run across sentence ends).
* **Sentences**: as ``summ-rouge`` splits a line (:func:`rouge_python.split_sentences`): at ``<q>`` or
  ``##SENT##`` when the line has one, else (English) after each token made of ``.``, ``!`` or ``?``; a Chinese
  line without a separator is one sentence.
* **Novel n-grams**, n = 1..4 (See et al. 2017, Figure 6): the share of the summary's n-grams, counted with
  repeats, that occur nowhere in its source.  A summary shorter than n has no n-grams; a source shorter than n
  has none either, so then every n-gram of the summary is novel.
* **Copied sentences** (See et al. 2017, section 7.2): the share of the summary's sentences whose tokens occur
  verbatim as one contiguous token span of the source.
* **Extractive fragments** (Grusky, Naaman & Artzi 2018, Newsroom, section 4): the greedy matching F(A, S) of
  summary S against article A: from summary position i = 1, scan A left to right; at each A_j = S_i extend the
  match as far as it goes, keep it if strictly longer than the best so far (so the first longest wins) and go
  on scanning after its end; then take the best as a fragment and move i past it (or by one token if there was
  none).  **Coverage** = sum |f| / |S| (the share of summary tokens inside a fragment, 0-1), **density** =
  sum |f|^2 / |S| (the mean length of the fragment each summary token belongs to), **compression** = |A| / |S|.
* **Repeated trigrams** (the experiment tables' definition; ``scripts/experiments/lib.py`` uses this code): the
  share of the summary's trigrams equal to an earlier trigram of the same summary (a trigram occurring k times
  counts k - 1); **summaries with a repeat**: the share of summaries with at least one.
* **Immediate repeats** (the stutter of an undertrained decoder, "title title policy"): the share of the summary's
  tokens after the first that equal the token right before them and hold a letter or a digit (a word, a number, a
  Chinese character: a doubled quote mark, as PTB's ```` `` ```` becomes, is no stutter); **summaries with a
  stutter**: the share of summaries with at least one; **doubled first token**: the share of summaries whose first
  two tokens are the same word.
* **Lengths**: mean tokens and sentences per summary, and the share of empty summaries (no token); empty
  summaries are counted in every mean.

Pooling: a share is **pooled over the corpus** (sum of numerators / sum of denominators over all documents, so
a long summary weighs more); its **per-document mean** (the mean of each document's own share, over the
documents where it is defined: at least one n-gram, sentence or token) is given beside it.  Shares of
summaries and mean lengths are the same either way and have one number.  Compression of an empty summary is
undefined, so its document is left out of both compression figures.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence, Tuple

from fairseq_plugins.scoring.rouge_python import split_sentences
from fairseq_plugins.text.textio import display_name
from fairseq_plugins.text.tokenization import detokenize

PROG = "summ-analyze"
MAX_N = 4
REFERENCE = "reference"


@dataclass(frozen=True)
class Figure:
    key: str
    label: str
    scale: float  # 100: a share shown in percent
    per_summary: bool  # one value per summary (denominator 1): pooled and per-document mean are the same


FIGURES = (
    *(Figure(f"novel_{n}grams", f"novel {n}-grams %", 100, False) for n in range(1, MAX_N + 1)),
    Figure("copied_sentences", "copied sentences %", 100, False),
    Figure("coverage", "fragment coverage (0-1)", 1, False),
    Figure("density", "fragment density", 1, False),
    Figure("compression", "compression (source/summary)", 1, False),
    Figure("repeated_trigrams", "repeated trigrams %", 100, False),
    Figure("with_repeat", "summaries with a repeat %", 100, True),
    Figure("immediate_repeats", "immediate repeats %", 100, False),
    Figure("with_immediate_repeat", "summaries with a stutter %", 100, True),
    Figure("doubled_first", "doubled first token %", 100, True),
    Figure("tokens", "mean length, tokens", 1, True),
    Figure("sentences", "mean length, sentences", 1, True),
    Figure("empty", "empty summaries %", 100, True),
)
SOURCE_FREE = ("repeated_trigrams", "with_repeat", "immediate_repeats", "with_immediate_repeat", "doubled_first",
               "tokens", "sentences", "empty")  # need no source

Counts = Dict[str, Tuple[float, float]]  # figure -> (numerator, denominator) of one document


@dataclass(frozen=True)
class Fragment:
    """A copied span: ``length`` summary tokens from ``summary_start`` equal the source's from ``source_start``."""
    summary_start: int
    source_start: int
    length: int


# ---------------------------------------------------------------------------------------------- tokens
def sentence_tokens(text: str, lang: str = "en", lower: bool = False) -> List[List[str]]:
    """The text's sentences (as summ-rouge splits them), each as its tokens (words; Chinese: characters)."""
    out = []
    for sentence in split_sentences(text.lower() if lower else text, lang):
        units = [ch for ch in sentence if not ch.isspace()] if lang == "zh" else sentence.split()
        if units:
            out.append(units)
    return out


def tokens(text: str, lang: str = "en", lower: bool = False) -> List[str]:
    """The text as one token sequence, without sentence separators."""
    return [tok for sentence in sentence_tokens(text, lang, lower) for tok in sentence]


def ngrams(units: Sequence[str], n: int) -> List[tuple]:
    return [tuple(units[i:i + n]) for i in range(len(units) - n + 1)]


# ---------------------------------------------------------------------------------------------- figures of one pair
def novel_ngrams(summary: Sequence[str], source: Sequence[str], n: int) -> Tuple[int, int]:
    """(novel n-grams, all n-grams) of the summary, with repeats."""
    grams = ngrams(summary, n)
    seen = set(ngrams(source, n))
    return sum(gram not in seen for gram in grams), len(grams)


def copied_flags(sentences: Sequence[Sequence[str]], source: Sequence[str]) -> List[bool]:
    """Per sentence: does it occur verbatim as a contiguous token span of the source?"""
    # tokens hold no whitespace, so a space-padded join matches whole tokens only
    haystack = " " + " ".join(source) + " "
    return [f" {' '.join(s)} " in haystack for s in sentences]


def copied_sentences(sentences: Sequence[Sequence[str]], source: Sequence[str]) -> Tuple[int, int]:
    """(sentences found verbatim as a contiguous token span of the source, all sentences)."""
    flags = copied_flags(sentences, source)
    return sum(flags), len(flags)


def fragments(article: Sequence[str], summary: Sequence[str]) -> List[Fragment]:
    """Grusky et al. (2018) greedy F(A, S): the fragments, in summary order (see the module docstring).

    Only positions where A_j = S_i matter to the scan, so it visits those (in order) instead of every j."""
    where: Dict[str, List[int]] = {}
    for j, tok in enumerate(article):
        where.setdefault(tok, []).append(j)
    out, i = [], 0
    while i < len(summary):
        best, scan = None, 0
        for j in where.get(summary[i], ()):
            if j < scan:  # inside the match found last: the scan went on after its end
                continue
            length = 1
            while i + length < len(summary) and j + length < len(article) \
                    and summary[i + length] == article[j + length]:
                length += 1
            if best is None or length > best.length:
                best = Fragment(i, j, length)
            scan = j + length
        if best is not None:
            out.append(best)
        i += best.length if best is not None else 1
    return out


def repeated_trigrams(units: Sequence[str]) -> Tuple[int, int]:
    """(trigrams equal to an earlier trigram of the same sequence, all trigrams)."""
    grams = ngrams(units, 3)
    return len(grams) - len(set(grams)), len(grams)


def immediate_repeats(units: Sequence[str]) -> Tuple[int, int]:
    """(words equal to the token right before them, tokens that have one before them); a word holds a letter or
    a digit, so repeated punctuation is not counted."""
    return sum(a == b and is_word(b) for a, b in zip(units, units[1:])), max(len(units) - 1, 0)


def is_word(unit: str) -> bool:
    return any(char.isalnum() for char in unit)


def summary_counts(summary: str, lang: str = "en", lower: bool = False) -> Counts:
    """The figures that need no source (repetition and length) of one summary, as (numerator, denominator)."""
    return _summary_figures(sentence_tokens(summary, lang, lower))


def _summary_figures(sentences: Sequence[Sequence[str]]) -> Counts:
    units = [tok for s in sentences for tok in s]
    repeats, trigrams = repeated_trigrams(units)
    stutters, followers = immediate_repeats(units)
    return {"repeated_trigrams": (repeats, trigrams), "with_repeat": (float(repeats > 0), 1),
            "immediate_repeats": (stutters, followers), "with_immediate_repeat": (float(stutters > 0), 1),
            "doubled_first": (float(len(units) > 1 and units[0] == units[1] and is_word(units[0])), 1),
            "tokens": (len(units), 1), "sentences": (len(sentences), 1), "empty": (float(not units), 1)}


def document_counts(source: str, summary: str, lang: str = "en", lower: bool = False) -> Counts:
    """Every figure of one (source, summary) pair as (numerator, denominator)."""
    sentences = sentence_tokens(summary, lang, lower)
    units = [tok for s in sentences for tok in s]
    article = tokens(source, lang, lower)
    counts = _summary_figures(sentences)
    for n in range(1, MAX_N + 1):
        counts[f"novel_{n}grams"] = novel_ngrams(units, article, n)
    counts["copied_sentences"] = copied_sentences(sentences, article)
    lengths = [f.length for f in fragments(article, units)]
    counts["coverage"] = (sum(lengths), len(units))  # Grusky et al. 2018, section 4
    counts["density"] = (sum(x * x for x in lengths), len(units))
    counts["compression"] = (len(article) if units else 0, len(units))
    return counts


# ---------------------------------------------------------------------------------------------- corpus figures
def aggregate(documents: Sequence[Counts]) -> Dict[str, Dict[str, Optional[float]]]:
    """Figure -> {"pooled": sum num / sum den, "doc_mean": mean of num / den where den > 0}, scaled (percent
    for shares); None where no document defines the figure.  Only the figures present in the counts."""
    out = {}
    for fig in FIGURES:
        if not documents or fig.key not in documents[0]:
            continue
        pairs = [doc[fig.key] for doc in documents]
        total = sum(den for _, den in pairs)
        defined = [num / den for num, den in pairs if den > 0]
        out[fig.key] = {
            "pooled": fig.scale * sum(num for num, _ in pairs) / total if total else None,
            "doc_mean": fig.scale * sum(defined) / len(defined) if defined else None,
        }
    return out


def analyze(sources: Sequence[str], systems: Dict[str, Sequence[str]], lang: str = "en",
            lower: bool = False) -> Dict[str, Dict[str, Dict[str, Optional[float]]]]:
    """System name -> its corpus figures (``aggregate``); every system has one summary per source."""
    return {name: aggregate([document_counts(src, summ, lang, lower) for src, summ in zip(sources, summaries)])
            for name, summaries in systems.items()}


# ---------------------------------------------------------------------------------------------- text report
def _cell(value: Optional[float]) -> str:
    return "n/a" if value is None else f"{value:.2f}"


def format_report(results: Dict, n_docs: int, lang: str) -> str:
    """A table, one row per figure and one column per system: the pooled value, the per-document mean in
    brackets where the two can differ."""
    names = list(results)
    width = max(14, *(len(name) + 2 for name in names))
    lines = [f"{PROG} | {n_docs} documents | lang={lang} | pooled over the corpus, per-document mean in brackets",
             f"{'':<30}" + "".join(f"{name:>{width + 10}}" for name in names)]
    for fig in FIGURES:
        cells = []
        for name in names:
            value = results[name].get(fig.key)
            if value is None:
                cells.append("")
            elif fig.per_summary:
                cells.append(_cell(value["pooled"]))
            else:
                cells.append(f"{_cell(value['pooled'])} ({_cell(value['doc_mean'])})")
        lines.append(f"{fig.label:<30}" + "".join(f"{cell:>{width + 10}}" for cell in cells))
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------- units
ATTACHED = re.compile(r"^\w.*[,;:!?)\"']$|^[(\"']\w")  # a word with punctuation attached: "win," "(a" "end)"


def attached_share(lines: Sequence[str]) -> float:
    """The share of whitespace tokens that carry punctuation attached to a word (detokenized English)."""
    words = [word for line in lines for word in line.split()]
    return sum(bool(ATTACHED.match(word)) for word in words) / len(words) if words else 0.0


def unit_warnings(sources: Sequence[str], systems: Dict[str, Sequence[str]], paths: Sequence[str]) -> List[str]:
    """A warning per English file that looks detokenized against a tokenized source (attached punctuation on 2 %
    of its words or more, three times the source's share)."""
    source_share = attached_share(sources)
    warnings = []
    for path, texts in zip(paths, systems.values()):
        share = attached_share(texts)
        if share >= 0.02 and share >= 3 * source_share:
            warnings.append(f"{display_name(path)} looks detokenized ({100 * share:.1f}% of its words carry "
                            f"punctuation, the source's {100 * source_share:.1f}%): \"win,\" and \"win\" count as "
                            f"different words; give --prep DATA/prep.json to tokenize every text as the model's "
                            f"source, or analyse generate.sh --no-detok output")
    return warnings


def prepared(prep_path: str, sources: Sequence[str], systems: Dict[str, Sequence[str]]):
    """(sources, systems, lang) tokenized as the model's source was: prep.json's units and lower-casing, the
    source truncated to its --max-source-len, each text then joined as ``summ-restore --no-detok`` writes it
    (sentence separators such as ``<q>`` kept)."""
    from fairseq_plugins.text.prepare import load_prep, tokenizer_from_prep

    prep, prep_dir = load_prep(prep_path)
    settings = prep["settings"]
    tokenizer = tokenizer_from_prep(prep, prep_dir, prep_path)
    lang, unit, limit = settings["lang"], settings["unit"], settings["max_source_len"] or None

    def form(text: str, most: Optional[int] = None) -> str:
        """The text's tokens (the first ``most`` of them, as summ-prepare truncates a source) detokenized."""
        return detokenize(tokenizer(text)[:most], lang, unit)

    return [form(text, limit) for text in sources], {name: [form(text) for text in texts]
                                                     for name, texts in systems.items()}, lang
