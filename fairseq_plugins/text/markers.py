"""Per-document OOV markers: how source words outside the vocabulary stay copyable.

Each document's out-of-vocabulary words are numbered in order of first appearance in its source, and every
occurrence (in source and target) is replaced by the marker ``<oov-K>``.  The joined dictionary ends with
``num_markers`` marker entries, so a marker is an ordinary token id to fairseq: the model embeds it as
``<unk>`` and the copy distribution puts attention mass on it; after generation the marker is mapped back to
the K-th OOV word of that document (kept in a side file, one line per document).

Raw text that already looks like a marker (or like a fairseq special symbol) is never put in the vocabulary:
it is treated as an OOV word itself, so it is numbered, copied and restored like any other word.
"""
import re

MARKER_PREFIX = "<oov-"
_MARKER = re.compile(r"<oov-(\d+)>\Z")
# Symbols fairseq's Dictionary interprets itself, or adds as padding when finalizing a dictionary.
_RESERVED = re.compile(r"(<s>|<pad>|</s>|<unk>|<mask>|madeupword\d+)\Z")


def marker(k: int) -> str:
    """The marker token of a document's k-th OOV word (k from 0)."""
    return f"{MARKER_PREFIX}{k}>"


def marker_index(token: str):
    """K if ``token`` is the marker ``<oov-K>``, else None."""
    match = _MARKER.match(token)
    return int(match.group(1)) if match else None


def is_reserved(token: str) -> bool:
    """True for raw tokens that must never enter the vocabulary (markers and fairseq's own symbols)."""
    return _MARKER.match(token) is not None or _RESERVED.match(token) is not None


def first_marker_index(dictionary) -> int:
    """Index of ``<oov-0>`` in a fairseq Dictionary: the size of the regular vocabulary.

    Every index at or above it is a marker.  A dictionary without markers returns ``len(dictionary)``.
    """
    idx = dictionary.indices.get(marker(0))
    return len(dictionary) if idx is None else idx
