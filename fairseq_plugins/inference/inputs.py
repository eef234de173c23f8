"""What the hub checks and reports about its input: the documents and options a call takes, and how much of each
document the model reads (``InputReport``; ``LossyInputError`` refuses a document that would be read in part)."""
import dataclasses
from dataclasses import dataclass, field
from typing import Dict, List, Optional

import numpy as np
import torch

from fairseq_plugins.text.textio import closest_name

MAX_LISTED_DOCUMENTS = 5  # LossyInputError names this many documents, then counts the rest
BYTE_ORDER_MARK = "\ufeff"


@dataclass
class InputReport:
    """How much of one document the model reads: the counts ``summ-prepare --apply`` reports for a file.

    The model reads ``tokens - truncated_tokens`` tokens (prep.json's ``max_source_len`` cuts the rest) and
    cannot copy the ``overflow_words`` OOV words that found no marker (prep.json's ``num_markers``): their
    ``unk_tokens`` occurrences are read as ``<unk>``."""

    tokens: int = 0  # the document's tokens before truncation
    truncated_tokens: int = 0  # tokens cut off its end
    overflow_words: int = 0  # distinct OOV words beyond the markers
    unk_tokens: int = 0  # source tokens read as <unk> (occurrences of the overflow words)
    max_source_len: Optional[int] = None  # the limits of prep.json, for the message
    num_markers: int = 0
    invisible_characters: int = 0  # control and format characters normalised away before tokenization

    @property
    def lossy(self) -> bool:
        return bool(self.truncated_tokens or self.overflow_words)

    @property
    def empty(self) -> bool:
        """No token to read (an empty or blank document): its summary is empty, nothing is generated."""
        return self.tokens == 0

    @property
    def worth_a_warning(self) -> bool:
        return self.lossy or self.empty or self.invisible_characters > 0

    def describe(self) -> str:
        if self.empty:
            return "empty: its summary is empty"
        parts = []
        if self.truncated_tokens:
            parts.append(f"truncated to {self.max_source_len} of its {self.tokens} tokens "
                         f"({self.truncated_tokens} not read; max_source_len of prep.json)")
        if self.overflow_words:
            parts.append(f"{self.overflow_words} OOV words ({self.unk_tokens} tokens) beyond the {self.num_markers} "
                         f"OOV markers read as <unk>, not copyable")
        if self.invisible_characters:
            parts.append(f"{self.invisible_characters} control or invisible characters replaced by spaces or "
                         f"removed")
        return "; ".join(parts) if parts else "read whole"


class LossyInputError(ValueError):
    """``strict=True`` and some documents cannot be read whole; ``reports`` maps their input index to the
    :class:`InputReport`."""

    def __init__(self, reports: Dict[int, InputReport], total: int):
        self.reports = reports
        listed = [f"document {i}: {report.describe()}" for i, report in list(reports.items())[:MAX_LISTED_DOCUMENTS]]
        more = len(reports) - len(listed)
        super().__init__(f"{len(reports)} of {total} documents cannot be read whole (strict=True): "
                         + "; ".join(listed) + (f"; and {more} more" if more else ""))


@dataclass
class Prepared:
    """One raw document as the model reads it."""

    ids: torch.Tensor  # S: token ids, </s> last
    marked: List[str]  # S - 1 tokens, OOV words as markers
    oov_words: List[str]  # the K-th is the word of <oov-K>
    report: InputReport


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
    input_report: InputReport = field(default_factory=InputReport)  # what of the document the model did not read


def known_options() -> List[str]:
    """The option names ``summarize`` takes: fairseq's generation options (its GenerationConfig), the project's
    search options (n-gram blocking, coverage penalty) and ``batch_size``."""
    from fairseq.dataclass.configs import GenerationConfig

    from fairseq_plugins.tasks.summarization import GENERATOR_OPTIONS

    fairseq_names = [f.name for f in dataclasses.fields(GenerationConfig) if not f.name.startswith("_")]
    return sorted(set(fairseq_names) | set(GENERATOR_OPTIONS) | {"batch_size"})


def check_options(options: Dict, caller: str = "summarize") -> None:
    """A TypeError naming an option ``summarize`` does not know (and the closest known name), as Python does for
    an unexpected keyword argument: a misspelled option must not be ignored silently."""
    names = known_options()
    for name in options:
        if name not in names:
            close = closest_name(name, names)
            hint = f"; did you mean {close!r}?" if close else f"; known options: {', '.join(names)}"
            raise TypeError(f"{caller}() got an unexpected keyword argument {name!r}{hint}")


def check_texts(texts, caller: str = "summarize") -> List[str]:
    """``texts`` as a list of documents; a TypeError for None, a single string, or a document that is not a str."""
    if texts is None:
        raise TypeError(f"{caller}() takes a list of documents (str), got None")
    if isinstance(texts, (str, bytes)):
        raise TypeError(f"{caller}() takes a list of documents, not a single {type(texts).__name__}")
    try:
        texts = list(texts)
    except TypeError:
        raise TypeError(f"{caller}() takes a list of documents (str), got {type(texts).__name__}") from None
    for i, text in enumerate(texts):
        if not isinstance(text, str):
            raise TypeError(f"{caller}(): document {i} is {type(text).__name__}, not a str")
    return texts


def as_line(text: str) -> str:
    """One document as ``generate.sh --input`` reads a line of a file (``text.textio.read_lines``): without a
    leading byte-order mark, line breaks read as spaces."""
    if text.startswith(BYTE_ORDER_MARK):
        text = text[len(BYTE_ORDER_MARK):]
    return text.replace("\n", " ")
