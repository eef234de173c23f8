"""Reading a ``POST /summarize`` body: ``{"documents": ["raw text", ...], "options": {...}, "strict": false,
"details": false}``.

Every problem is an :class:`ApiError`: a 4xx status, a short ``reason`` (the label of the error counter in
/metrics) and a message that says what is wrong and where.  Nothing is ever truncated silently: a document longer
than ``Limits.max_document_chars`` characters is refused (413); a document longer than the model's
``max_source_len`` tokens is read up to that length, as ``generate.sh`` reads it, and the response says so per
document (``inputs[i].truncated_tokens`` and a warning); with ``"strict": true`` it is refused instead (422).

Decoding options default to the model's recorded ones (``Summarizer.generation``: the GEN_ARGS it was trained
with) and may be set per request within the limits of :data:`OPTION_RULES` and :class:`Limits`.
"""
import json
from dataclasses import dataclass
from typing import Dict, List, Optional

from fairseq_plugins.text.textio import closest_name


class ApiError(Exception):
    """A request the server refuses: HTTP ``status``, ``reason`` (a metrics label) and a message."""

    def __init__(self, status: int, reason: str, message: str, retry_after: Optional[int] = None):
        super().__init__(message)
        self.status = status
        self.reason = reason
        self.message = message
        self.retry_after = retry_after


@dataclass
class Limits:
    """What one request may ask for (the command line of summ-serve sets them)."""

    max_documents: int = 64  # documents per request
    max_document_chars: int = 100_000  # characters per document: longer ones are refused, never truncated
    max_body_bytes: int = 8 * 1024 * 1024  # a request body
    max_beam: int = 12
    max_len: int = 500  # largest max_len_b (and min_len)
    max_len_a: float = 2.0
    max_ngram: int = 10  # largest block_ngram_repeat


# name -> (type, lowest, highest, what): highest None = the Limits attribute of that name
OPTION_RULES = {
    "beam": (int, 1, "max_beam", "beam size"),
    "max_len_a": (float, 0.0, "max_len_a", "summary length: a * source length + b"),
    "max_len_b": (int, 1, "max_len", "summary length: a * source length + b"),
    "min_len": (int, 1, "max_len", "shortest summary in tokens"),
    "lenpen": (float, 0.0, 10.0, "length penalty"),
    "block_ngram_repeat": (int, 0, "max_ngram", "no repeated n-grams of this size (0: off)"),
    "block_immediate_repeat": (int, 0, 1, "1 bans a token directly after itself, 0 does not"),
    "block_ignore": (str, 0, 200, "tokens whose n-grams may repeat, separated by spaces"),
    "coverage_penalty": (float, 0.0, 10.0, "coverage penalty beta (Wu eq 14, GNMT)"),
}


@dataclass
class SummarizeRequest:
    documents: List[str]
    options: Dict  # every decoding option, the model's defaults filled in
    strict: bool = False  # refuse documents the model cannot read whole instead of truncating them
    details: bool = False  # add attention, p_gen and copy weights per document (the page uses them)


def decode_body(body: bytes):
    """The JSON value of a request body; ApiError 400 for an empty body, invalid UTF-8 or invalid JSON."""
    if not body.strip():
        raise ApiError(400, "empty_body", 'empty request body: send JSON {"documents": ["text", ...]}')
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as err:
        raise ApiError(400, "invalid_utf8", f"the body is not valid UTF-8: byte 0x{body[err.start]:02x} at "
                                            f"offset {err.start}") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as err:
        raise ApiError(400, "invalid_json", f"the body is not valid JSON: {err.msg} at line {err.lineno} "
                                            f"column {err.colno}") from None


def parse_request(body: bytes, defaults: Dict, limits: Limits) -> SummarizeRequest:
    """The checked request of a body; ``defaults``: the model's decoding options."""
    value = decode_body(body)
    if not isinstance(value, dict):
        raise ApiError(400, "bad_request", f'the body must be a JSON object {{"documents": [...]}}, '
                                           f"not a JSON {type(value).__name__}")
    unknown = sorted(set(value) - {"documents", "options", "strict", "details"})
    if unknown:
        raise ApiError(400, "bad_request", f"unknown field {unknown[0]!r}: a request has documents, options, "
                                           f"strict and details")
    documents = check_documents(value.get("documents"), limits)
    options = value.get("options")
    options = check_options({} if options is None else options, defaults, limits)
    flags = {name: value.get(name, False) for name in ("strict", "details")}
    for name, flag in flags.items():
        if not isinstance(flag, bool):
            raise ApiError(400, "bad_request", f"{name!r} must be true or false, not {json.dumps(flag)}")
    return SummarizeRequest(documents, options, **flags)


def check_documents(documents, limits: Limits) -> List[str]:
    if documents is None:
        raise ApiError(400, "bad_request", 'missing field "documents": a list of raw texts')
    if not isinstance(documents, list):
        raise ApiError(400, "bad_request", f'"documents" must be a list of strings, not a JSON '
                                           f"{type(documents).__name__}")
    if not documents:
        raise ApiError(400, "no_documents", '"documents" is empty: send at least one raw text, '
                                            '{"documents": ["text", ...]}')
    if len(documents) > limits.max_documents:
        raise ApiError(413, "too_many_documents", f"{len(documents)} documents in one request, over this "
                                                  f"server's limit of {limits.max_documents} (--max-documents): "
                                                  f"send them in several requests")
    for i, document in enumerate(documents):
        if not isinstance(document, str):
            raise ApiError(400, "bad_request", f"documents[{i}] must be a string, not {json.dumps(document)[:40]}")
        if len(document) > limits.max_document_chars:
            raise ApiError(413, "document_too_long",
                           f"documents[{i}] has {len(document)} characters, over this server's limit of "
                           f"{limits.max_document_chars} (--max-document-chars): refused, not truncated")
    return documents


def check_options(options, defaults: Dict, limits: Limits) -> Dict:
    """The model's ``defaults`` overridden by the request's ``options``, each checked against its rule."""
    if not isinstance(options, dict):
        raise ApiError(400, "bad_option", f'"options" must be a JSON object, not a JSON {type(options).__name__}')
    checked = {name: defaults[name] for name in OPTION_RULES if name in defaults}
    for name, value in options.items():
        if name not in OPTION_RULES:
            close = closest_name(name, OPTION_RULES)
            hint = f"did you mean {close!r}? " if close else ""
            raise ApiError(400, "bad_option", f"unknown option {name!r}; {hint}the options are "
                                              f"{', '.join(OPTION_RULES)}")
        checked[name] = check_option(name, value, limits)
    if checked.get("min_len", 1) > checked.get("max_len_b", limits.max_len) and checked.get("max_len_a", 0) == 0:
        raise ApiError(400, "bad_option", f"min_len {checked['min_len']} is over max_len_b {checked['max_len_b']}")
    return checked


def check_option(name: str, value, limits: Limits):
    kind, low, high, what = OPTION_RULES[name]
    high = getattr(limits, high) if isinstance(high, str) else high
    if kind is str:
        if not isinstance(value, str) or len(value) > high:
            raise ApiError(400, "bad_option", f"option {name} ({what}) must be a string of at most {high} "
                                              f"characters, not {json.dumps(value)[:60]}")
        return value
    numeric = isinstance(value, (int, float)) and not isinstance(value, bool)
    if not numeric or (kind is int and not float(value).is_integer()):
        kind_name = "an integer" if kind is int else "a number"
        raise ApiError(400, "bad_option", f"option {name} ({what}) must be {kind_name}"
                                          f", not {json.dumps(value)[:60]}")
    if not low <= value <= high:
        raise ApiError(422, "option_out_of_range", f"option {name} ({what}) = {value} is outside this server's "
                                                   f"limits [{low}, {high}]")
    return kind(value)
