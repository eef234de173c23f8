"""summ-prepare: tokenize line-aligned raw pairs, build the joined dictionary, mark source OOV words.

Build mode::

    summ-prepare --raw-dir RAW --out-dir OUT [--lang en|zh] [--unit keep|word|char|jieba|sp] ...

RAW holds ``{split}.src`` and ``{split}.tgt`` for every split of ``--splits`` (a target is optional except
for ``train``).  OUT receives:

``tok/{split}.src``, ``tok/{split}.tgt``
    space-separated tokens, one document a line (same line count as the input), sources truncated to
    ``--max-source-len`` and targets to ``--max-target-len`` tokens; every OOV source word replaced by its
    marker ``<oov-K>`` (K = order of first appearance), the same marker for its copies in the target, other
    OOV target tokens replaced by ``<unk>``.
``tok/{split}.oov``
    the document's OOV source words, tab-separated, field K = the word of ``<oov-K>`` (empty line: none), as
    the source spells it where it first appears ("Smallville"), even when the text is lower-cased.
``dict.txt``
    fairseq dictionary (``word count``): the ``--vocab-size`` most frequent train tokens (source and
    target, after truncation; ties in code-point order), then ``<oov-0>`` ... ``<oov-{N-1}>`` with count 0.
``prep.json``
    every setting and the statistics; ``sp.model``/``sp.vocab`` when ``--unit sp``.

Apply mode (new raw text, for generation)::

    summ-prepare --apply OUT/prep.json --input FILE|- --out-prefix P      # writes P.src and P.oov

``--out-dir`` and ``--out-prefix`` are older spellings of ``--output-dir`` and ``--output-prefix``; ``-`` as
``--input`` is stdin.  Exit status: 0 success, 1 runtime failure, 2 usage or bad input.

Raw tokens that look like markers or fairseq symbols (``<oov-3>``, ``</s>``, ``<unk>``, ``madeupword0001``)
never enter the vocabulary: they are OOV words and get their own marker, so they are restored verbatim.
"""
import json
import math
import os
import sys
from collections import Counter

from . import markers
from .textio import AtomicWriter, UserError, count_lines, display_name, read_lines
from .tokenization import (DEFAULT_UNIT, SP_NORMALIZATION, Tokenizer, check_unit, invisible_count,
                           train_sentencepiece)

PROG = "summ-prepare"
UNK = "<unk>"
FORMAT_VERSION = 1
UNITS = ("keep", "word", "char", "jieba", "sp")


def say(message):
    print(f"{PROG}: {message}", file=sys.stderr)


PROGRESS_EVERY = 10000


def progress(name, count, done=False):
    """On a terminal, ``NAME: N documents`` on one line every PROGRESS_EVERY documents of a long corpus (and the
    line ended when ``done``); nothing in a pipe or a log file."""
    if count < PROGRESS_EVERY or not sys.stderr.isatty():
        return
    if done:
        print(file=sys.stderr)
    elif count % PROGRESS_EVERY == 0:
        print(f"\r    {name}: {count} documents", end="", file=sys.stderr, flush=True)


# ----------------------------------------------------------------------------------------------- marking
class MarkStats:
    """Counters of one split (or one apply run), and the token length of every document before truncation
    (``lengths["src"]``, ``lengths["tgt"]``: lists of ints, in document order)."""

    def __init__(self):
        self.documents = 0
        self.src = {"tokens": 0, "truncated": 0, "longest": 0, "empty": 0, "oov_tokens": 0}
        self.tgt = {"tokens": 0, "truncated": 0, "longest": 0, "empty": 0, "oov_tokens": 0,
                    "copyable_tokens": 0, "unk_tokens": 0}
        self.has_target = False
        self.marker_overflow_documents = 0
        self.marker_overflow_words = 0
        self.max_markers_in_document = 0
        self.lengths = {"src": [], "tgt": []}
        self.invisible = {"characters": 0, "lines": 0}  # control and format characters normalised away

    def clean(self, text):
        """Count the control and format characters of one raw text that tokenization normalises away."""
        count = invisible_count(text)
        self.invisible["characters"] += count
        self.invisible["lines"] += count > 0

    def length(self, side, n_tokens, limit):
        counts = self.src if side == "src" else self.tgt
        self.lengths[side].append(n_tokens)
        counts["longest"] = max(counts["longest"], n_tokens)
        counts["empty"] += n_tokens == 0
        if limit and n_tokens > limit:
            counts["truncated"] += 1

    def as_dict(self):
        src = dict(self.src, oov_rate=_rate(self.src["oov_tokens"], self.src["tokens"]))
        out = {"documents": self.documents, "source": src}
        if self.has_target:
            out["target"] = dict(self.tgt, oov_rate=_rate(self.tgt["oov_tokens"], self.tgt["tokens"]),
                                 unk_rate=_rate(self.tgt["unk_tokens"], self.tgt["tokens"]))
        out["markers"] = {"overflow_documents": self.marker_overflow_documents,
                          "overflow_words": self.marker_overflow_words,
                          "max_in_document": self.max_markers_in_document}
        out["invisible_characters"] = dict(self.invisible)
        return out

    def target_lengths(self, limit):
        """Percentiles of the targets' lengths in tokens as the model learns them (cut at ``limit``; 0: none),
        for checking decoding lengths against the data (None without targets)."""
        lengths = [min(n, limit) if limit else n for n in self.lengths["tgt"]]
        if not lengths:
            return None
        return dict({f"p{q}": percentile(lengths, q) for q in LENGTH_PERCENTILES}, max=max(lengths))


def _rate(part, whole):
    return round(part / whole, 6) if whole else 0.0


def mark_side(tokens, vocab, oov, new_markers, counts):
    """One side of a document with its OOV words as markers.  ``oov`` (word -> k) holds the document's OOV words
    so far; an OOV word not in it gets the next marker while ``oov`` holds fewer than ``new_markers`` words (the
    source: num_markers; the target: 0, since a summary can copy only source words), else <unk>.  Adds to
    ``counts``' tokens and oov_tokens.  Returns (tokens, the OOV words left as <unk>, OOV tokens given a marker)."""
    out, unknown, copyable = [], [], 0
    for tok in tokens:
        if tok in vocab:
            out.append(tok)
            continue
        counts["oov_tokens"] += 1
        if tok not in oov and len(oov) < new_markers:
            oov[tok] = len(oov)
        if tok in oov:
            copyable += 1
            out.append(markers.marker(oov[tok]))
        else:
            unknown.append(tok)
            out.append(UNK)
    counts["tokens"] += len(tokens)
    return out, unknown, copyable


def spelled_as(words, src_tokens, src_surface):
    """``words`` (source tokens) as the source spells them where each first appears; ``src_surface`` holds the
    spelling of every source token (Tokenizer.surface), or is None (the tokens are the spelling)."""
    if src_surface is None:
        return list(words)
    first = {}
    for token, spelling in zip(src_tokens, src_surface):
        first.setdefault(token, spelling)
    return [first[word] for word in words]


def mark_document(src_tokens, tgt_tokens, vocab, num_markers, stats, src_surface=None):
    """Replace OOV words by markers.  Returns (source tokens, target tokens or None, OOV words in marker order,
    spelled as in ``src_surface`` when given: see spelled_as)."""
    oov = {}
    out_src, overflow, _ = mark_side(src_tokens, vocab, oov, num_markers, stats.src)
    if overflow:
        stats.marker_overflow_documents += 1
        stats.marker_overflow_words += len(set(overflow))
    stats.max_markers_in_document = max(stats.max_markers_in_document, len(oov))
    out_tgt = None
    if tgt_tokens is not None:
        out_tgt, unknown, copyable = mark_side(tgt_tokens, vocab, oov, 0, stats.tgt)
        stats.tgt["unk_tokens"] += len(unknown)
        stats.tgt["copyable_tokens"] += copyable
    return out_src, out_tgt, spelled_as(oov, src_tokens, src_surface)


# ----------------------------------------------------------------------------------------------- dictionary
def build_vocab(counts: Counter, vocab_size: int, min_count: int):
    """The regular vocabulary: most frequent non-reserved tokens, ties broken by code-point order."""
    items = [(tok, n) for tok, n in counts.items() if n >= min_count and not markers.is_reserved(tok)]
    items.sort(key=lambda item: (-item[1], item[0]))
    return items[:vocab_size]


def write_dict(path, vocab_items, num_markers):
    with AtomicWriter() as atomic:
        out = atomic.open(path)
        for tok, n in vocab_items:
            out.write(f"{tok} {n}\n")
        for k in range(num_markers):
            out.write(f"{markers.marker(k)} 0\n")


def read_dict(path):
    """(regular vocabulary as a set, number of marker entries) of a dict.txt written by summ-prepare."""
    vocab, n_markers = set(), 0
    for lineno, line in read_lines(path):
        word, sep, count = line.rstrip().rpartition(" ")
        if not sep or not count.lstrip("-").isdigit():
            raise UserError(f"{path}:{lineno}: not a dictionary line ('word count')")
        if markers.marker_index(word) is not None:
            if markers.marker_index(word) != n_markers:
                raise UserError(f"{path}:{lineno}: marker {word} out of order (expected {markers.marker(n_markers)})")
            n_markers += 1
        else:
            vocab.add(word)
    return vocab, n_markers


# ----------------------------------------------------------------------------------------------- reporting
LENGTH_PERCENTILES = (1, 5, 25, 50, 75, 95, 99)  # recorded for the training targets (prep.json's target_lengths)
TRUNCATION_WARNING_SHARE = 0.05  # a split with a larger share of truncated sources (or targets) gets a warning


def _pct(part, whole):
    return f"{100.0 * part / whole:.2f}%" if whole else "n/a"


def percentile(lengths, q):
    """The ``q``-th percentile of ``lengths`` by nearest rank: the smallest length that at least ``q`` % of them do
    not exceed, i.e. the truncation limit that keeps ``q`` % of the documents whole (0 for no lengths)."""
    if not lengths:
        return 0
    ordered = sorted(lengths)
    return ordered[max(1, math.ceil(q / 100 * len(ordered))) - 1]


def too_many_truncated(truncated, documents):
    """Whether ``truncated`` of ``documents`` is more than TRUNCATION_WARNING_SHARE of them."""
    return documents > 0 and truncated > TRUNCATION_WARNING_SHARE * documents


def warn_truncation(name, stats, max_src, max_tgt):
    """Build mode: for each side of a split whose share of truncated documents is too large (too_many_truncated),
    a warning with that share, the lengths that would keep 95 % and 99 % of the documents whole (percentiles of
    the lengths before truncation) and the option to raise."""
    sides = [("sources", "src", stats.src, max_src, "--max-source-len")]
    if stats.has_target:
        sides.append(("targets", "tgt", stats.tgt, max_tgt, "--max-target-len"))
    for label, side, counts, limit, option in sides:
        if not limit or not too_many_truncated(counts["truncated"], stats.documents):
            continue
        lengths = stats.lengths[side]
        say(f"{name}: warning: {counts['truncated']} of {stats.documents} {label} "
            f"({_pct(counts['truncated'], stats.documents)}) are cut at {limit} tokens; "
            f"{percentile(lengths, 95)} tokens would keep 95% of them whole, {percentile(lengths, 99)} tokens 99% "
            f"(longest {counts['longest']}): raise {option} (preprocess.sh: in the config's PREP_ARGS)")


def warn_apply_truncation(name, stats, max_src):
    """Apply mode: a warning when too many documents (too_many_truncated) are longer than the model's
    max_source_len, of which the model reads only the beginning."""
    truncated = stats.src["truncated"]
    if max_src and too_many_truncated(truncated, stats.documents):
        say(f"{name}: warning: {truncated} of {stats.documents} documents ({_pct(truncated, stats.documents)}) "
            f"are longer than the model's max_source_len ({max_src} tokens): it reads only their first "
            f"{max_src} tokens")


def report_split(name, stats, max_src, max_tgt):
    d = stats.as_dict()
    src = d["source"]
    parts = [f"{stats.documents} documents"]
    if max_src:
        parts.append(f"sources truncated to {max_src} tokens: {src['truncated']} "
                     f"({_pct(src['truncated'], stats.documents)}; longest {src['longest']})")
    else:
        parts.append(f"sources not truncated (longest {src['longest']})")
    if stats.has_target:
        tgt = d["target"]
        if max_tgt:
            parts.append(f"targets truncated to {max_tgt} tokens: {tgt['truncated']} "
                         f"({_pct(tgt['truncated'], stats.documents)}; longest {tgt['longest']})")
        parts.append(f"empty lines: {src['empty']} sources, {tgt['empty']} targets")
        parts.append(f"OOV: {_pct(src['oov_tokens'], src['tokens'])} of source tokens, "
                     f"{_pct(tgt['oov_tokens'], tgt['tokens'])} of target tokens "
                     f"({_pct(tgt['copyable_tokens'], tgt['tokens'])} copyable by marker, "
                     f"{_pct(tgt['unk_tokens'], tgt['tokens'])} -> <unk>)")
    else:
        parts.append(f"no target; empty lines: {src['empty']} sources")
        parts.append(f"OOV: {_pct(src['oov_tokens'], src['tokens'])} of source tokens")
    markers_d = d["markers"]
    parts.append(f"marker overflow: {markers_d['overflow_documents']} documents "
                 f"({markers_d['overflow_words']} OOV words -> <unk>)")
    say(f"{name}: " + "; ".join(parts))
    if stats.has_target and (src["empty"] or d["target"]["empty"]):
        say(f"{name}: warning: empty documents are kept as empty lines")
    elif src["empty"]:
        say(f"{name}: warning: {src['empty']} empty documents: each gets an empty summary")
    if stats.invisible["characters"]:
        say(f"{name}: warning: {stats.invisible['characters']} control or invisible characters (NUL, zero-width, "
            f"bidirectional marks...) in {stats.invisible['lines']} lines were replaced by spaces or removed")
    if markers_d["overflow_documents"]:
        say(f"{name}: warning: {markers_d['overflow_documents']} documents have more distinct OOV words than "
            f"markers; raise --num-markers or --vocab-size")


# ----------------------------------------------------------------------------------------------- build mode
def raw_files(raw_dir, splits):
    """{split: (RAW_DIR/split.src, RAW_DIR/split.tgt or None)} for ``splits``; a UserError naming the file when
    a source (or the training target) is missing or a source and its target differ in line count.  Also read
    by scripts/train_word2vec.py, so that it trains on exactly the files summ-prepare reads."""
    if not os.path.isdir(raw_dir):
        raise UserError(f"{raw_dir}: no such directory")
    files = {}
    for split in splits:
        src = os.path.join(raw_dir, f"{split}.src")
        tgt = os.path.join(raw_dir, f"{split}.tgt")
        if not os.path.isfile(src):
            raise UserError(f"missing file {src} (split {split!r} of --splits)")
        if not os.path.isfile(tgt):
            if split == "train":
                raise UserError(f"missing file {tgt} (the training split needs targets)")
            tgt = None
        files[split] = (src, tgt)
    for split, (src, tgt) in files.items():
        if tgt is not None:
            n_src, n_tgt = count_lines(src), count_lines(tgt)
            if n_src != n_tgt:
                raise UserError(f"line counts differ: {src} has {n_src} lines, {tgt} has {n_tgt} lines")
    return files


def _sp_training_texts(src, tgt, lowercase):
    for path in (src, tgt):
        for _, line in read_lines(path):
            yield line.lower() if lowercase else line


def _tokenize_side(tokenizer, line, side, limit, stats, out, counts, surface_out=None):
    """One side ("src" or "tgt") of one document: tokenized, its length counted in ``stats``, truncated to
    ``limit`` (0: no limit), written to ``out`` (and as the text spells them to ``surface_out`` when given) and
    its tokens counted in ``counts`` when given."""
    stats.clean(line)
    toks = tokenizer(line)
    stats.length(side, len(toks), limit)
    surface = tokenizer.surface(line, toks) if surface_out is not None else None
    if limit:
        toks = toks[:limit]
    out.write(" ".join(toks) + "\n")
    if surface_out is not None:
        surface_out.write(" ".join(surface[:len(toks)]) + "\n")
    if counts is not None:
        counts.update(toks)


def _tokenize_split(tokenizer, src, tgt, max_src, max_tgt, plain_src, plain_tgt, stats, counts, surface_src):
    """Pass 1: tokenize and truncate, write plain token files (and the sources' spelling to ``surface_src``),
    count tokens when ``counts`` is given."""
    tgt_lines = read_lines(tgt) if tgt is not None else None
    for _, line in read_lines(src):
        stats.documents += 1
        _tokenize_side(tokenizer, line, "src", max_src, stats, plain_src, counts, surface_src)
        if tgt_lines is not None:
            _tokenize_side(tokenizer, next(tgt_lines)[1], "tgt", max_tgt, stats, plain_tgt, counts)
        progress(f"tokenizing {src}", stats.documents)
    progress(src, stats.documents, done=True)


def build(args):
    lang = args.lang
    unit = args.unit or DEFAULT_UNIT[lang]
    try:
        check_unit(lang, unit)
    except ValueError as err:
        raise UserError(str(err)) from None
    splits = [s for s in args.splits.split(",") if s]
    if "train" not in splits:
        raise UserError("--splits must include 'train' (the vocabulary is built from it)")
    if len(set(splits)) != len(splits):
        raise UserError(f"--splits lists a split twice: {args.splits}")
    for name in ("max_source_len", "max_target_len", "vocab_size", "sp_vocab_size", "min_count"):
        if getattr(args, name) < 0:
            raise UserError(f"--{name.replace('_', '-')} cannot be negative")
    num_markers = args.num_markers
    if num_markers is None:
        if not args.max_source_len:
            raise UserError("--max-source-len 0 (no truncation) needs an explicit --num-markers")
        num_markers = args.max_source_len
    if num_markers < 0:
        raise UserError("--num-markers cannot be negative")
    files = raw_files(args.raw_dir, splits)
    out_dir = args.out_dir
    tok_dir = os.path.join(out_dir, "tok")
    os.makedirs(tok_dir, exist_ok=True)
    lowercase = args.lowercase or unit == "word"  # word units are always lower-cased (word_tokenize)
    settings = {
        "raw_dir": os.path.abspath(args.raw_dir), "lang": lang, "unit": unit, "lowercase": lowercase,
        "sp_vocab_size": args.sp_vocab_size if unit == "sp" else None,
        "sp_model_type": args.sp_model_type if unit == "sp" else None,
        "max_source_len": args.max_source_len, "max_target_len": args.max_target_len,
        "vocab_size": args.vocab_size, "num_markers": num_markers, "splits": splits, "min_count": args.min_count,
    }
    say("settings: " + ", ".join(f"{k}={v}" for k, v in settings.items() if k != "raw_dir"))
    sp_info = None
    sp_path = None
    if unit == "sp":
        src, tgt = files["train"]
        sp_prefix = os.path.join(out_dir, "sp")
        say(f"training a sentencepiece {args.sp_model_type} model ({args.sp_vocab_size} pieces) on {src} + {tgt}")
        try:
            pieces = train_sentencepiece(_sp_training_texts(src, tgt, args.lowercase), sp_prefix,
                                         args.sp_vocab_size, args.sp_model_type, lang,
                                         num_threads=max(1, os.cpu_count() or 1))
        except RuntimeError as err:
            raise UserError(f"sentencepiece training failed: {err}") from None
        sp_path = sp_prefix + ".model"
        # normalization: absent from the prep.json of older runs, whose models used NFKC
        sp_info = {"requested_pieces": args.sp_vocab_size, "pieces": pieces, "normalization": SP_NORMALIZATION}
        say(f"sentencepiece model {sp_path}: {pieces} pieces"
            + (f" (fewer than the {args.sp_vocab_size} requested: small corpus)" if pieces < args.sp_vocab_size
               else ""))
    tokenizer = Tokenizer(lang, unit, lowercase, sp_path)  # as tokenizer_from_prep makes it from prep.json

    stats = {split: MarkStats() for split in splits}
    counts = Counter()
    plain = {split: (os.path.join(tok_dir, f".{split}.src.plain{os.getpid()}"),
                     os.path.join(tok_dir, f".{split}.tgt.plain{os.getpid()}"),
                     os.path.join(tok_dir, f".{split}.src.spelling{os.getpid()}")) for split in splits}
    try:
        # Pass 1: tokenize + truncate every split (train first so that its errors come first), count train.
        for split in splits:
            src, tgt = files[split]
            stats[split].has_target = tgt is not None
            with open(plain[split][0], "w", encoding="utf-8") as psrc, \
                    open(plain[split][1], "w", encoding="utf-8") as ptgt, \
                    open(plain[split][2], "w", encoding="utf-8") as pspelling:
                _tokenize_split(tokenizer, src, tgt, args.max_source_len, args.max_target_len, psrc, ptgt,
                                stats[split], counts if split == "train" else None, pspelling)
        vocab_items = build_vocab(counts, args.vocab_size, args.min_count)
        vocab = {tok for tok, _ in vocab_items}
        write_dict(os.path.join(out_dir, "dict.txt"), vocab_items, num_markers)
        n_train = sum(counts.values())
        covered = sum(n for _, n in vocab_items)
        reserved = sum(n for tok, n in counts.items() if markers.is_reserved(tok))
        vocab_info = {"regular": len(vocab_items), "markers": num_markers, "train_token_types": len(counts),
                      "train_tokens": n_train, "train_coverage": _rate(covered, n_train),
                      "train_reserved_lookalike_tokens": reserved}
        say(f"dictionary {os.path.join(out_dir, 'dict.txt')}: {len(vocab_items)} of {len(counts)} train token "
            f"types (min count {args.min_count}) covering {_pct(covered, n_train)} of {n_train} train tokens, "
            f"then {num_markers} markers <oov-0>..<oov-{num_markers - 1}>"
            + (f"; {reserved} train tokens look like markers/fairseq symbols and stay OOV" if reserved else ""))
        # Pass 2: mark OOV words.
        for split in splits:
            has_tgt = stats[split].has_target
            # the length counters were filled in pass 1; mark_document adds token and OOV counts
            with AtomicWriter() as atomic:
                osrc = atomic.open(os.path.join(tok_dir, f"{split}.src"))
                otgt = atomic.open(os.path.join(tok_dir, f"{split}.tgt")) if has_tgt else None
                ooov = atomic.open(os.path.join(tok_dir, f"{split}.oov"))
                tgt_lines = read_lines(plain[split][1]) if has_tgt else None
                spellings = read_lines(plain[split][2])
                for _, line in read_lines(plain[split][0]):
                    ttoks = next(tgt_lines)[1].split() if has_tgt else None
                    msrc, mtgt, oov_words = mark_document(line.split(), ttoks, vocab, num_markers, stats[split],
                                                          next(spellings)[1].split())
                    osrc.write(" ".join(msrc) + "\n")
                    if has_tgt:
                        otgt.write(" ".join(mtgt) + "\n")
                    ooov.write("\t".join(oov_words) + "\n")
            report_split(split, stats[split], args.max_source_len, args.max_target_len)
            warn_truncation(split, stats[split], args.max_source_len, args.max_target_len)
    finally:
        for pair in plain.values():
            for path in pair:
                if os.path.exists(path):
                    os.remove(path)
    stale = [s for s in splits if not stats[s].has_target and os.path.exists(os.path.join(tok_dir, f"{s}.tgt"))]
    for split in stale:  # a target file from an earlier run would no longer match
        os.remove(os.path.join(tok_dir, f"{split}.tgt"))
    prep = {
        "tool": PROG, "format_version": FORMAT_VERSION, "settings": settings,
        "files": {"dict": "dict.txt", "sp_model": "sp.model" if unit == "sp" else None, "tok_dir": "tok"},
        "vocab": vocab_info, "sentencepiece": sp_info,
        "stats": {split: stats[split].as_dict() for split in splits},
        "target_lengths": stats["train"].target_lengths(args.max_target_len) if "train" in stats else None,
    }
    with AtomicWriter() as atomic:
        json.dump(prep, atomic.open(os.path.join(out_dir, "prep.json")), indent=2, ensure_ascii=False)
    names = splits[0] if len(splits) == 1 else "{" + ",".join(splits) + "}"
    say(f"wrote {tok_dir}/{names}.{{src,tgt,oov}}, {out_dir}/dict.txt, {out_dir}/prep.json")


# ----------------------------------------------------------------------------------------------- apply mode
def load_prep(path):
    """(prep dict, directory) of a prep.json written by summ-prepare."""
    try:
        with open(path, encoding="utf-8") as handle:
            prep = json.load(handle)
    except FileNotFoundError:
        raise UserError(f"{path}: no such file") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise UserError(f"{path}: not a valid prep.json: {err}") from None
    if not isinstance(prep, dict) or prep.get("tool") != PROG or "settings" not in prep:
        raise UserError(f"{path}: not a prep.json written by {PROG}")
    if prep.get("format_version") != FORMAT_VERSION:
        raise UserError(f"{path}: format version {prep.get('format_version')}, this {PROG} reads {FORMAT_VERSION}")
    return prep, os.path.dirname(os.path.abspath(path))


def tokenizer_from_prep(prep, prep_dir, prep_path):
    """The Tokenizer a summ-prepare run used (its sentencepiece model is looked up beside prep.json)."""
    settings = prep["settings"]
    sp_path = None
    if prep["files"].get("sp_model"):
        sp_path = os.path.join(prep_dir, prep["files"]["sp_model"])
        if not os.path.isfile(sp_path):
            raise UserError(f"missing file {sp_path} (the sentencepiece model of {prep_path})")
    return Tokenizer(settings["lang"], settings["unit"], settings["lowercase"], sp_path)


def mark_source(text, tokenizer, vocab, num_markers, max_src, stats):
    """One raw source document as generation sees it: tokenized, truncated to ``max_src`` tokens (counted in
    ``stats``), OOV words marked.  Returns (marked tokens, OOV words in marker order, as the text spells them)."""
    stats.clean(text)
    tokens = tokenizer(text)
    stats.length("src", len(tokens), max_src)
    surface = tokenizer.surface(text, tokens)
    if max_src:
        tokens = tokens[:max_src]
    marked, _, oov_words = mark_document(tokens, None, vocab, num_markers, stats, surface[:len(tokens)])
    return marked, oov_words


def apply(args):
    prep, prep_dir = load_prep(args.apply)
    settings = prep["settings"]
    vocab, n_markers = read_dict(os.path.join(prep_dir, prep["files"]["dict"]))
    if n_markers != settings["num_markers"]:
        raise UserError(f"{prep_dir}/dict.txt has {n_markers} markers, prep.json says {settings['num_markers']}")
    tokenizer = tokenizer_from_prep(prep, prep_dir, args.apply)
    max_src = 0 if args.whole else settings["max_source_len"]
    stats = MarkStats()
    with AtomicWriter() as atomic:
        osrc = atomic.open(args.out_prefix + ".src")
        ooov = atomic.open(args.out_prefix + ".oov")
        for _, line in read_lines(args.input):
            stats.documents += 1
            msrc, oov_words = mark_source(line, tokenizer, vocab, n_markers, max_src, stats)
            osrc.write(" ".join(msrc) + "\n")
            ooov.write("\t".join(oov_words) + "\n")
    report_split(display_name(args.input), stats, max_src, None)
    warn_apply_truncation(display_name(args.input), stats, max_src)
    say(f"wrote {args.out_prefix}.src and {args.out_prefix}.oov ({stats.documents} lines)")
