"""Reading pretrained word vectors (word2vec binary/text, GloVe text) for the words of a fairseq dictionary.

    weights, found, report = read_vectors("w2v.bin", dictionary, embed_dim)   # numpy rows, a mask, the counts

``modules/pretrained_embeddings.py`` copies them into a model's embedding.  Only the *regular* words of the
dictionary are filled.  Specials (``<s> <pad> </s> <unk>`` and any other symbol below ``dictionary.nspecial``), the per-document markers ``<oov-K>`` and fairseq's padding symbols
(``madeupwordNNNN``; see ``text/markers.is_reserved``) keep the initialization the model gave them, even when
the file has a vector for the same string; the padding row therefore stays zero.  Words the file does not
have also keep their initialization.

Formats
-------
``word2vec-text``    header line ``COUNT DIM``, then COUNT lines ``word v1 ... vDIM`` (gensim, fastText ``.vec``).
``word2vec-binary``  header line ``COUNT DIM``, then COUNT records ``word<space>`` + DIM little-endian float32
                     (4*DIM bytes), optionally followed by ``\\n`` (word2vec.c writes one, gensim does not).
``glove``            no header; every line is ``word v1 ... vDIM``; DIM is read from the first line.

A path ending in ``.gz`` is read through gzip (byte offsets in messages then count uncompressed bytes).

``fmt="auto"`` decides from the content, never from the file name:

1. if the first line is exactly two non-negative decimal integers, the file has a word2vec header
   (otherwise it is ``glove``; a GloVe file of dimension 1 whose first word is a number is ambiguous:
   give ``fmt`` explicitly);
2. with a header, the file is ``word2vec-text`` if the line after the header splits (on ASCII whitespace)
   into a word followed by at least DIM fields whose last DIM fields are all numbers, else
   ``word2vec-binary`` (4*DIM bytes of raw float32 essentially never form DIM space-separated numbers).

Parsing
-------
The file is streamed: text line by line, binary record by record through a 1 MiB read buffer.  Only the
vectors of dictionary words are kept (one row each), so memory is O(dictionary x DIM) whatever the file size.
This is why the parser is our own rather than gensim's ``KeyedVectors.load_word2vec_format``, which loads every
vector (several GB for the GoogleNews or Common Crawl files; its ``limit`` would drop the rare words a
summarization vocabulary needs).  Words are compared as UTF-8 bytes, so a file word that is not valid UTF-8
(some truncated word2vec files have them) simply matches nothing.

Checks (all raise :class:`EmbeddingFileError` naming the file, and the line or the byte offset):

* missing file, bad header, dimension of the file != ``embed_dim``;
* text: an empty line, a line with fewer than DIM + 1 fields, a value that is not a number or not finite
  (values are parsed on the lines of dictionary words only, which keeps a 2M-line file fast; the number of
  fields is checked on every line), a header COUNT different from the number of vector lines;
* binary: a record cut short by the end of the file (truncated file or COUNT too large), no space-terminated
  word where a record should start, data left after COUNT records, a non-finite value in a used vector.

A text line with *more* than DIM + 1 fields whose last DIM fields are numbers is a word containing spaces
(GloVe 840B has a few, such as ``. . .``).  No dictionary token contains whitespace, so it is skipped and
counted in the report.  The first occurrence of a duplicated word wins.

Case: a dictionary word is first looked up exactly.  With ``lowercase_fallback=True`` a word still missing
takes the vector of the first file word whose lower-case form equals its lower-case form (files are usually
sorted by frequency, so this is the commonest casing).
"""
import dataclasses
import gzip
import os
from typing import List, Optional, Tuple

import numpy as np

from fairseq_plugins.text.markers import is_reserved
from fairseq_plugins.text.textio import UserError


FORMATS = ("word2vec-binary", "word2vec-text", "glove")
_CHUNK = 1 << 20
_MAX_WORD_BYTES = 1 << 16
_MAX_EXAMPLES = 10


class EmbeddingFileError(UserError, ValueError):
    """A missing, malformed or incompatible embedding file (the message names the file and the place)."""


@dataclasses.dataclass
class CoverageReport:
    """What :func:`load_pretrained` found.  ``str(report)`` is a one-paragraph summary for the log."""

    path: str
    fmt: str
    file_vectors: int  # vectors read from the file (lines or records; words with spaces included)
    file_dim: int
    regular: int  # dictionary entries that could be filled (not specials, markers or reserved symbols)
    found_exact: int
    found_lowercase: int  # found only through the lower-case fallback
    missing_examples: List[str]  # the first missing words, in dictionary order (most frequent first)
    not_filled_reserved: int  # specials, markers and other reserved symbols: never filled
    count_coverage: Optional[float]  # share of the regular words' dictionary counts that is found (None: no counts)
    skipped_spaced_words: int = 0
    spaced_word_examples: List[str] = dataclasses.field(default_factory=list)
    duplicates: int = 0  # repeated file words that matched the dictionary (the first occurrence is used)

    @property
    def found(self) -> int:
        return self.found_exact + self.found_lowercase

    @property
    def missing(self) -> int:
        return self.regular - self.found

    @property
    def coverage(self) -> float:
        """Found regular words / regular words (0.0 for a dictionary without regular words)."""
        return self.found / self.regular if self.regular else 0.0

    def __str__(self) -> str:
        parts = [f"pretrained embeddings {self.path} ({self.fmt}, {self.file_vectors} vectors of dimension "
                 f"{self.file_dim}): found {self.found} of {self.regular} dictionary words "
                 f"({100.0 * self.coverage:.2f}%"
                 + (f"; {self.found_lowercase} by lower-case fallback" if self.found_lowercase else "") + ")"]
        if self.count_coverage is not None:
            parts.append(f"covering {100.0 * self.count_coverage:.2f}% of their dictionary counts")
        if self.missing:
            parts.append(f"{self.missing} missing (kept at their initialization), e.g. "
                         + " ".join(self.missing_examples))
        parts.append(f"{self.not_filled_reserved} specials/markers/reserved symbols not filled")
        if self.skipped_spaced_words:
            parts.append(f"{self.skipped_spaced_words} file words containing spaces skipped, e.g. "
                         + " | ".join(self.spaced_word_examples))
        if self.duplicates:
            parts.append(f"{self.duplicates} duplicate file words ignored (first occurrence used)")
        return "; ".join(parts)


# ----------------------------------------------------------------------------------------------- public API
def read_vectors(path, dictionary, embed_dim: int, fmt: str = "auto",
                 lowercase_fallback: bool = False) -> Tuple[np.ndarray, np.ndarray, CoverageReport]:
    """Read the vectors of ``dictionary``'s regular words from an embedding file.

    Args:
        path: word2vec binary/text or GloVe text file (``.gz`` allowed).
        dictionary: a fairseq ``Dictionary`` (anything with ``symbols``, ``nspecial`` and optionally ``count``).
        embed_dim: the model's embedding dimension; the file's must be equal.
        fmt: ``"auto"`` (see the module docstring for the rule), ``"word2vec-binary"``, ``"word2vec-text"``
            or ``"glove"``.
        lowercase_fallback: look missing words up by their lower-case form too.

    Returns:
        ``(weights, found, report)``: ``weights`` is a float32 array ``len(dictionary) x embed_dim`` holding
        the file's vector in the row of every found word and zeros elsewhere; ``found`` is the boolean mask of
        the filled rows; ``report`` a :class:`CoverageReport`.

    Raises:
        EmbeddingFileError: missing/malformed file or dimension mismatch (see the module docstring).
    """
    path = str(path)
    if not os.path.exists(path):
        raise EmbeddingFileError(f"{path}: no such file (pretrained embeddings)")
    if os.path.isdir(path):
        raise EmbeddingFileError(f"{path}: is a directory, expected an embedding file")
    if fmt == "auto":
        fmt = detect_format(path)
    elif fmt not in FORMATS:
        raise ValueError(f"unknown embedding format {fmt!r} (choose from auto, {', '.join(FORMATS)})")
    targets = _Targets(dictionary, lowercase_fallback)
    weights = np.zeros((len(dictionary.symbols), embed_dim), dtype=np.float32)
    if fmt == "word2vec-binary":
        stats = _read_binary(path, embed_dim, targets, weights)
    else:
        stats = _read_text(path, embed_dim, fmt == "glove", targets, weights)
    found = targets.found_exact | targets.found_lower
    report = _report(path, fmt, stats, targets, dictionary)
    return weights, found, report


def detect_format(path) -> str:
    """The format of an embedding file by the rule of the module docstring (reads at most two lines)."""
    path = str(path)
    with _open(path) as handle:
        first = handle.readline(_MAX_WORD_BYTES)
        header = _parse_header(first)
        if header is None:
            return "glove"
        dim = header[1]
        second = handle.readline(_MAX_WORD_BYTES + 32 * dim)
    fields = second.split()
    if not second or (len(fields) > dim and dim > 0 and _all_numbers(fields[-dim:])):
        return "word2vec-text"
    return "word2vec-binary"


# ----------------------------------------------------------------------------------------------- internals
class _Targets:
    """Which file words are wanted, and which rows are filled so far."""

    def __init__(self, dictionary, lowercase_fallback):
        symbols = dictionary.symbols
        n = len(symbols)
        specials = set(range(getattr(dictionary, "nspecial", 0)))
        for name in ("bos_index", "pad_index", "eos_index", "unk_index"):
            if getattr(dictionary, name, None) is not None:
                specials.add(getattr(dictionary, name))
        self.regular = np.zeros(n, dtype=bool)
        self.exact = {}  # UTF-8 bytes -> row
        self.lower = {} if lowercase_fallback else None  # lower-cased UTF-8 bytes -> rows
        for idx, word in enumerate(symbols):
            if idx in specials or is_reserved(word):
                continue
            self.regular[idx] = True
            self.exact.setdefault(word.encode("utf-8"), idx)
            if self.lower is not None:
                self.lower.setdefault(word.lower().encode("utf-8"), []).append(idx)
        self.found_exact = np.zeros(n, dtype=bool)
        self.found_lower = np.zeros(n, dtype=bool)
        self.duplicates = 0

    def rows_for(self, word: bytes):
        """(exact row or None, fallback rows still missing): the rows this file word should fill."""
        row = self.exact.get(word)
        if row is not None and self.found_exact[row]:
            self.duplicates += 1
            row = None
        fallback = ()
        if self.lower is not None:
            try:
                key = word.decode("utf-8").lower().encode("utf-8")
            except UnicodeDecodeError:
                key = None
            rows = self.lower.get(key)
            if rows:
                fallback = [r for r in rows if not self.found_exact[r] and not self.found_lower[r] and r != row]
        return row, fallback

    def store(self, weights, vector, row, fallback):
        if row is not None:
            weights[row] = vector
            self.found_exact[row] = True
            self.found_lower[row] = False  # an exact match replaces an earlier fallback
        for r in fallback:
            weights[r] = vector
            self.found_lower[r] = True


def _open(path):
    if path.endswith(".gz"):
        return gzip.open(path, "rb")
    return open(path, "rb")


def _parse_header(line: bytes):
    """(count, dim) if ``line`` is exactly two non-negative decimal integers, else None."""
    fields = line.split()
    if len(fields) == 2 and all(f.isdigit() for f in fields):
        return int(fields[0]), int(fields[1])
    return None


def _all_numbers(fields) -> bool:
    try:
        np.array(fields, dtype=np.float32)
    except ValueError:
        return False
    return True


def _show(word: bytes) -> str:
    return repr(word.decode("utf-8", errors="backslashreplace"))


def _header(path, handle, what):
    raw = handle.readline(_MAX_WORD_BYTES)
    header = _parse_header(raw)
    if header is None or header[1] == 0:
        shown = raw[:80].decode("utf-8", errors="backslashreplace").rstrip("\n")
        raise EmbeddingFileError(
            f"{path}:1: bad {what} header {shown!r}: expected 'COUNT DIM' (two integers, DIM > 0)"
            + ("; a file without header is fmt='glove'" if header is None else ""))
    return header, len(raw)


def _check_dim(path, file_dim, embed_dim, hint=""):
    if file_dim != embed_dim:
        raise EmbeddingFileError(f"{path}: the vectors have dimension {file_dim} but the embedding has dimension "
                                 f"{embed_dim} (set the embedding dimension to {file_dim}, or use another file)"
                                 + hint)


def _text_vector(path, lineno, fields, word):
    try:
        vector = np.array(fields, dtype=np.float32)
    except ValueError:
        bad = next(f for f in fields if not _all_numbers([f]))
        raise EmbeddingFileError(f"{path}:{lineno}: value {_show(bad)} of word {_show(word)} is not a number") from None
    if not np.isfinite(vector).all():
        raise EmbeddingFileError(f"{path}:{lineno}: word {_show(word)} has a non-finite value (nan or inf)")
    return vector


def _read_text(path, embed_dim, glove, targets, weights):
    stats = {"vectors": 0, "spaced": 0, "spaced_examples": []}
    with _open(path) as handle:
        lineno = 0
        count = None
        if not glove:
            (count, dim), _ = _header(path, handle, "word2vec-text")
            _check_dim(path, dim, embed_dim)
            lineno = 1
        else:
            dim = None
        try:
            for raw in handle:
                lineno += 1
                fields = raw.split()
                if not fields:
                    raise EmbeddingFileError(f"{path}:{lineno}: empty line")
                if dim is None:  # GloVe: the first line gives the dimension
                    dim = len(fields) - 1
                    hint = ""
                    if _parse_header(raw) is not None:
                        hint = " (the first line looks like a word2vec header 'COUNT DIM': use fmt='word2vec-text')"
                    if dim == 0:
                        raise EmbeddingFileError(f"{path}:1: a word without values: not a GloVe file" + hint)
                    _check_dim(path, dim, embed_dim, hint)
                n = len(fields)
                stats["vectors"] += 1
                if n != dim + 1:
                    if n > dim + 1 and _all_numbers(fields[-dim:]):
                        stats["spaced"] += 1
                        if len(stats["spaced_examples"]) < 3:
                            stats["spaced_examples"].append(b" ".join(fields[:-dim]).decode("utf-8", "replace"))
                        continue
                    raise EmbeddingFileError(f"{path}:{lineno}: {n} fields, expected {dim + 1} (a word and "
                                             f"{dim} values)")
                row, fallback = targets.rows_for(fields[0])
                if row is None and not fallback:
                    continue
                vector = _text_vector(path, lineno, fields[1:], fields[0])
                targets.store(weights, vector, row, fallback)
        except (OSError, EOFError) as err:  # e.g. a truncated gzip stream
            raise EmbeddingFileError(f"{path}: cannot read after line {lineno}: {err}") from None
    if dim is None:
        raise EmbeddingFileError(f"{path}: empty file, no vectors")
    if count is not None and count != stats["vectors"]:
        raise EmbeddingFileError(f"{path}: the header announces {count} vectors but the file has "
                                 f"{stats['vectors']} vector lines")
    stats["dim"] = dim
    return stats


class _Buffer:
    """Read-ahead over a binary stream that knows the absolute byte offset of its position."""

    def __init__(self, handle, offset):
        self.handle, self.buf, self.pos, self.base = handle, b"", 0, offset

    @property
    def offset(self):
        return self.base + self.pos

    def _more(self):
        chunk = self.handle.read(_CHUNK)
        if not chunk:
            return False
        self.base += self.pos
        self.buf = self.buf[self.pos:] + chunk
        self.pos = 0
        return True

    def skip_newlines(self):
        while True:
            while self.pos < len(self.buf) and self.buf[self.pos] == 0x0A:
                self.pos += 1
            if self.pos < len(self.buf) or not self._more():
                return

    def at_end(self):
        return self.pos >= len(self.buf) and not self._more()

    @property
    def left(self):
        return len(self.buf) - self.pos

    def word(self):
        """Bytes up to the next space (consumed); None at the end of the data, False for a runaway word."""
        scanned = 0  # bytes after pos already known to hold no space
        while True:
            i = self.buf.find(b" ", self.pos + scanned)
            if i >= 0:
                word = self.buf[self.pos:i]
                self.pos = i + 1
                return word
            scanned = self.left
            if scanned > _MAX_WORD_BYTES:
                return False
            if not self._more():
                return None

    def take(self, n):
        while len(self.buf) - self.pos < n and self._more():
            pass
        data = self.buf[self.pos:self.pos + n]
        self.pos += len(data)
        return data


def _read_binary(path, embed_dim, targets, weights):
    with _open(path) as handle:
        (count, dim), header_len = _header(path, handle, "word2vec-binary")
        _check_dim(path, dim, embed_dim)
        size = 4 * dim
        buf = _Buffer(handle, header_len)
        try:
            for i in range(count):
                buf.skip_newlines()
                start = buf.offset
                word = buf.word()
                if word is None:
                    remaining = buf.left
                    raise EmbeddingFileError(
                        f"{path}: truncated: the header announces {count} vectors but the data ends after {i} "
                        f"(at byte offset {start}" + (f", {remaining} stray bytes" if remaining else "") + ")")
                if word is False:
                    raise EmbeddingFileError(f"{path}: byte offset {start}: no space-terminated word within "
                                             f"{_MAX_WORD_BYTES} bytes (record {i + 1}; not word2vec binary, or a "
                                             f"wrong DIM in the header)")
                data = buf.take(size)
                if len(data) < size:
                    raise EmbeddingFileError(
                        f"{path}: truncated: vector {i + 1} of {count} ({_show(word)}, byte offset {start}) needs "
                        f"{size} bytes after the word, only {len(data)} left")
                row, fallback = targets.rows_for(word)
                if row is None and not fallback:
                    continue
                vector = np.frombuffer(data, dtype="<f4")
                if not np.isfinite(vector).all():
                    raise EmbeddingFileError(f"{path}: byte offset {start}: word {_show(word)} has a non-finite "
                                             f"value (nan or inf)")
                targets.store(weights, vector, row, fallback)
            buf.skip_newlines()
            if not buf.at_end():
                raise EmbeddingFileError(f"{path}: byte offset {buf.offset}: data continues after the {count} "
                                         f"vectors the header announces (wrong COUNT, or not word2vec binary)")
        except (OSError, EOFError) as err:  # e.g. a truncated gzip stream
            raise EmbeddingFileError(f"{path}: cannot read: {err}") from None
    return {"vectors": count, "dim": dim, "spaced": 0, "spaced_examples": []}


def _report(path, fmt, stats, targets, dictionary):
    regular = targets.regular
    found = targets.found_exact | targets.found_lower
    missing_rows = np.flatnonzero(regular & ~found)[:_MAX_EXAMPLES]
    counts = getattr(dictionary, "count", None)
    count_coverage = None
    if counts is not None and len(counts) == len(regular):
        counts = np.asarray(counts, dtype=np.float64)
        total = counts[regular].sum()
        if total > 0:
            count_coverage = float(counts[found].sum() / total)
    return CoverageReport(
        path=path, fmt=fmt, file_vectors=stats["vectors"], file_dim=stats["dim"], regular=int(regular.sum()),
        found_exact=int(targets.found_exact.sum()), found_lowercase=int(targets.found_lower.sum()),
        missing_examples=[dictionary.symbols[r] for r in missing_rows],
        not_filled_reserved=int((~regular).sum()), count_coverage=count_coverage,
        skipped_spaced_words=stats["spaced"], spaced_word_examples=stats["spaced_examples"],
        duplicates=targets.duplicates)
