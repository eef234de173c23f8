"""summ-convert: raw summarization corpora -> line-aligned ``PREFIX.src`` / ``PREFIX.tgt``.

Output: UTF-8, one document a line, the ``i``-th line of ``.src`` and ``.tgt`` form a pair.  All whitespace
inside a document (newlines, tabs, U+2028, NBSP, ...) is collapsed to single spaces.  A target made of several
sentences is joined with a space, or with `` TOKEN `` when ``--sent-sep TOKEN`` is given (e.g. ``<q>``).
Nothing is dropped: empty documents are written as empty lines and counted in the report on stderr (the one
filter, ``lcsts --min-score``, is asked for and its count reported).

Formats (subcommands): ``story`` (CNN/DailyMail .story files), ``jsonl`` (JSON lines; ``--src-field``,
``--tgt-field`` and ``--id-field`` take a key or a dotted path such as ``sentences.abstract`` into nested
objects, a key that itself has dots being taken as it is where it exists), ``tsv``, ``lcsts`` (the LCSTS
release's ``<doc>`` records), ``parallel`` (two line files), and ``split`` (deterministic train/valid/test
split of converted pairs, near-duplicates kept together).
Run ``summ-convert FORMAT --help`` for the options of each.  ``-`` as an input file is stdin; the outputs are
named by ``--output-prefix`` (``--output-dir`` for ``split``; ``--out-prefix`` and ``--out-dir`` are older
spellings).  Exit status: 0 success, 1 runtime failure, 2 usage or bad input.
"""
import hashlib
import json
import os
import re
import sys

from .textio import AtomicWriter, UserError, count_lines, display_name, no_stdout, normalize_space, read_lines

PROG = "summ-convert"
# Line endings after which See et al. (2017) do not add a period.
_END_MARKS = (".", "!", "?", "...", "'", "`", '"', ")", "\u2019", "\u201d")


class PairWriter:
    """Writes PREFIX.src / PREFIX.tgt (+ optional extra files) atomically and counts empty documents."""

    def __init__(self, prefix, with_target=True, extra=()):
        no_stdout("--output-prefix", prefix)
        self.prefix = str(prefix)
        self.with_target = with_target
        self._atomic = AtomicWriter()
        self._src = self._atomic.open(self.prefix + ".src")
        self._tgt = self._atomic.open(self.prefix + ".tgt") if with_target else None
        self._extra = {name: self._atomic.open(f"{self.prefix}.{name}") for name in extra}
        self.count = self.empty_src = self.empty_tgt = 0

    def write(self, src, tgt=None, **extra):
        self.count += 1
        self._src.write(src + "\n")
        self.empty_src += not src
        if self._tgt is not None:
            self._tgt.write(tgt + "\n")
            self.empty_tgt += not tgt
        for name, value in extra.items():
            self._extra[name].write(value + "\n")

    def __enter__(self):
        self._atomic.__enter__()
        return self

    def __exit__(self, *exc):
        self._atomic.__exit__(*exc)
        if exc[0] is None:
            self.report()
        return False

    def report(self):
        files = [self.prefix + ".src"] + ([self.prefix + ".tgt"] if self.with_target else [])
        files += [f"{self.prefix}.{name}" for name in self._extra]
        print(f"{PROG}: wrote {self.count} documents to {', '.join(files)}", file=sys.stderr)
        if self.empty_src:
            print(f"{PROG}: warning: {self.empty_src} empty source documents (kept as empty lines)", file=sys.stderr)
        if self.empty_tgt:
            print(f"{PROG}: warning: {self.empty_tgt} empty targets (kept as empty lines)", file=sys.stderr)


def join_sentences(sentences, sent_sep=None):
    sentences = [s for s in (normalize_space(x) for x in sentences) if s]
    return (f" {sent_sep} " if sent_sep else " ").join(sentences)


def _fix_period(line):
    return line if not line or line.endswith(_END_MARKS) else line + "."


# ----------------------------------------------------------------------------------------------- story
def story_files(inputs, url_list=None):
    """The .story files to convert, in order: sorted by name, or in the order of a URL list."""
    files = []
    for path in inputs:
        if os.path.isdir(path):
            files.extend(sorted(os.path.join(path, n) for n in os.listdir(path) if n.endswith(".story")))
        elif os.path.isfile(path):
            files.append(path)
        else:
            raise UserError(f"{path}: no such file or directory")
    if url_list is None:
        if not files:
            raise UserError(f"no .story files in {', '.join(inputs)}")
        return files
    by_name = {}
    for path in files:
        by_name.setdefault(os.path.basename(path), path)
    ordered, missing = [], []
    for lineno, url in read_lines(url_list):
        url = url.strip()
        if not url:
            continue
        name = hashlib.sha1(url.encode("utf-8")).hexdigest() + ".story"
        if name in by_name:
            ordered.append(by_name[name])
        else:
            missing.append(f"line {lineno} ({name})")
    if missing:
        shown = ", ".join(missing[:10]) + (f" and {len(missing) - 10} more" if len(missing) > 10 else "")
        raise UserError(f"{url_list}: {len(missing)} URLs have no story file in the inputs: {shown}")
    return ordered


def read_story(path, fix_missing_period=False):
    """(article paragraphs, highlight sentences) of a DMQA .story file."""
    article, highlights, in_highlights = [], [], False
    for _lineno, line in read_lines(path):
        line = normalize_space(line)
        if not line:
            continue
        if line == "@highlight":
            in_highlights = True
            continue
        if fix_missing_period:
            line = _fix_period(line)
        (highlights if in_highlights else article).append(line)
    return article, highlights


def cmd_story(args):
    files = story_files(args.inputs, args.url_list)
    with PairWriter(args.out_prefix) as out:
        for path in files:
            article, highlights = read_story(path, args.fix_missing_period)
            out.write(" ".join(article), join_sentences(highlights, args.sent_sep))


# ----------------------------------------------------------------------------------------------- jsonl
def _text_of(value, where, field, sent_sep=None):
    """A field that is a string, or a list of sentences (strings)."""
    if isinstance(value, str):
        return normalize_space(value)
    if isinstance(value, list) and all(isinstance(x, str) for x in value):
        return join_sentences(value, sent_sep)
    raise UserError(f"{where}: field {field!r} must be a string or a list of strings, not {_describe(value)}")


def _describe(value):
    text = json.dumps(value, ensure_ascii=False)
    return f"{type(value).__name__} {text[:60]}{'...' if len(text) > 60 else ''}"


def _field(obj, field, where):
    """The value of FIELD in the JSON object OBJ: a key, or a dotted path ``a.b.c`` through nested objects.
    A missing or null value, or a step through a value that is not an object, is an error naming WHERE."""
    parts = field.split(".")
    value, start = obj, 0
    while start < len(parts):
        if not isinstance(value, dict):
            if not start:
                raise UserError(f"{where}: expected a JSON object, got {_describe(value)}")
            raise UserError(f"{where}: field {field!r} goes through {'.'.join(parts[:start])!r}, which is "
                            f"{_describe(value)}, not a JSON object")
        end = _key_end(value, parts, start)
        key = ".".join(parts[start:end])
        if value.get(key) is None:
            raise UserError(_missing(field, key, ".".join(parts[:start]), value, where))
        value, start = value[key], end
    return value


def _key_end(obj, parts, start):
    """Where the key of OBJ that begins at PARTS[START] ends: the longest run of parts joined by dots that OBJ
    has as a key (so a key with dots in it is taken as it is), else the one part START."""
    for end in range(len(parts), start, -1):
        if ".".join(parts[start:end]) in obj:
            return end
    return start + 1


def _missing(field, key, parent, obj, where):
    """The error message for FIELD whose step KEY is absent or null in OBJ, the object at the path PARENT."""
    fields = ", ".join(map(str, obj)) or "none"
    if key == field:
        return f"{where}: missing field {field!r} (fields: {fields})"
    what = "is null" if key in obj else "not"
    place = f"in {parent!r}" if parent else "at the top level"
    return f"{where}: missing field {field!r} ({key!r} {what} {place}; fields there: {fields})"


def cmd_jsonl(args):
    multi = args.target_index is not None or args.all_targets
    target_index = args.target_index or 0
    if args.no_target and (multi or args.tgt_field):
        raise UserError("--no-target cannot be combined with --tgt-field/--target-index/--all-targets")
    if not args.no_target and not args.tgt_field:
        raise UserError("give --tgt-field (or --no-target)")
    extra = (["tgt.all"] if args.all_targets else []) + (["ids"] if args.id_field else [])
    name = display_name(args.input)
    with PairWriter(args.out_prefix, with_target=not args.no_target, extra=extra) as out:
        for lineno, line in read_lines(args.input):
            where = f"{name}:{lineno}"
            if not line.strip():
                raise UserError(f"{where}: empty line (expected one JSON object per line)")
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as err:
                raise UserError(f"{where}: bad JSON: {err.msg} at column {err.colno}") from None
            src = _text_of(_field(obj, args.src_field, where), where, args.src_field)
            values = {}
            if args.id_field:
                values["ids"] = normalize_space(str(_field(obj, args.id_field, where)))
            if args.no_target:
                out.write(src, **values)
                continue
            value = _field(obj, args.tgt_field, where)
            if not multi:
                out.write(src, _text_of(value, where, args.tgt_field, args.sent_sep), **values)
                continue
            if not isinstance(value, list) or not value:
                raise UserError(f"{where}: field {args.tgt_field!r} must be a non-empty list of references, "
                                f"not {_describe(value)}")
            refs = [_text_of(ref, where, f"{args.tgt_field}[{k}]", args.sent_sep) for k, ref in enumerate(value)]
            if target_index >= len(refs):
                raise UserError(f"{where}: --target-index {target_index} but only {len(refs)} references")
            if args.all_targets:
                values["tgt.all"] = json.dumps(refs, ensure_ascii=False)
            out.write(src, refs[target_index], **values)


# ----------------------------------------------------------------------------------------------- tsv
def cmd_tsv(args):
    if args.no_target == (args.tgt_col is not None):
        raise UserError("give exactly one of --tgt-col and --no-target")
    cols = [args.src_col] + ([] if args.no_target else [args.tgt_col])
    if min(cols) < 0:
        raise UserError("column numbers are 0-based and cannot be negative")
    expected = args.num_cols
    name = display_name(args.input)
    longer = LongerTargets()
    with PairWriter(args.out_prefix, with_target=not args.no_target) as out:
        for lineno, line in read_lines(args.input):
            if args.header and lineno == 1:
                continue
            fields = line.split("\t")
            if expected is None:
                expected = len(fields)
                if max(cols) >= expected:
                    raise UserError(f"{name}:{lineno}: {expected} columns, but --src-col/--tgt-col ask for "
                                    f"column {max(cols)} (0-based)")
            if len(fields) != expected:
                raise UserError(f"{name}:{lineno}: wrong column count: {len(fields)} tab-separated columns, "
                                f"expected {expected}")
            src = normalize_space(fields[args.src_col])
            if args.no_target:
                out.write(src)
            else:
                tgt = normalize_space(fields[args.tgt_col])
                longer.add(src, tgt)
                out.write(src, tgt)
    longer.warn(name, args.src_col, args.tgt_col)


class LongerTargets:
    """Counts the pairs whose target is longer (in characters) than their source: on most lines, the sign of
    swapped --src-col and --tgt-col, which would otherwise show only as "targets truncated 100 %" much later."""

    def __init__(self):
        self.longer = self.pairs = 0

    def add(self, src, tgt):
        if src or tgt:
            self.pairs += 1
            self.longer += len(tgt) > len(src)

    def warn(self, name, src_col, tgt_col):
        if self.pairs and 2 * self.longer > self.pairs:
            print(f"{PROG}: warning: {name}: the target column {tgt_col} is longer than the source column "
                  f"{src_col} on {self.longer} of {self.pairs} lines: are --src-col and --tgt-col swapped?",
                  file=sys.stderr)


# ----------------------------------------------------------------------------------------------- lcsts
LCSTS_TAG = re.compile(r"^<(/?)(doc|human_label|summary|short_text)\b[^>]*>(.*?)(?:</(\2)>)?$")


def read_lcsts(path):
    """Yield ``(lineno, {"summary", "short_text", "human_label"})`` for each ``<doc>`` record of an LCSTS release
    file (PART_I: summary and short_text; PART_II/III also ``<human_label>N</human_label>``, the 1-5 score).
    A field's lines are joined with spaces; a record missing a field, an unclosed or nested tag, or text outside
    a field is an error naming the file and line."""
    name, record, field, start = display_name(path), None, None, 0
    for lineno, line in read_lines(path):
        line = line.strip()
        tag = LCSTS_TAG.match(line)
        if tag is None:
            if field is None and line:
                raise UserError(f"{name}:{lineno}: text outside <summary> or <short_text>: {line[:40]!r}")
            if field is not None:
                record[field].append(line)
            continue
        closing, what, inline, closed = tag.groups()
        if what == "doc":
            if closing:
                if record is None or field is not None:
                    raise UserError(f"{name}:{lineno}: </doc> without an open <doc> or with <{field}> still open")
                missing = [key for key in ("summary", "short_text") if key not in record]
                if missing:
                    raise UserError(f"{name}:{start}: the <doc> record has no <{missing[0]}>")
                yield start, {key: normalize_space(" ".join(value)) for key, value in record.items()}
                record = None
            elif record is not None:
                raise UserError(f"{name}:{lineno}: <doc> inside the <doc> opened at line {start}")
            else:
                record, start = {}, lineno
        elif record is None or (field is not None and not closing):
            raise UserError(f"{name}:{lineno}: <{what}> outside a <doc> record or inside <{field}>")
        elif closing:
            if field != what:
                raise UserError(f"{name}:{lineno}: </{what}> closes <{field}>")
            field = None
        else:
            record[what] = [inline] if inline else []
            field = None if closed else what
    if record is not None:
        raise UserError(f"{name}: the <doc> record opened at line {start} is not closed at the end of the file")


def cmd_lcsts(args):
    name = display_name(args.input)
    dropped = 0
    with PairWriter(args.out_prefix, extra=("score",) if args.scores else ()) as out:
        for lineno, doc in read_lcsts(args.input):
            score = doc.get("human_label")
            if (args.min_score is not None or args.scores) and not (score or "").isdigit():
                raise UserError(f"{name}:{lineno}: --min-score/--scores need <human_label>N</human_label> "
                                f"(PART_II and PART_III), this record has {score!r}")
            if args.min_score is not None and int(score) < args.min_score:
                dropped += 1
                continue
            out.write(doc["short_text"], doc["summary"], **({"score": score} if args.scores else {}))
    if dropped:
        print(f"{PROG}: {name}: left out {dropped} documents with a human score below {args.min_score} "
              f"(--min-score)", file=sys.stderr)


# ----------------------------------------------------------------------------------------------- parallel
def cmd_parallel(args):
    n_src = count_lines(args.src)
    if args.tgt is not None:
        n_tgt = count_lines(args.tgt)
        if n_src != n_tgt:
            raise UserError(f"line counts differ: {args.src} has {n_src} lines, {args.tgt} has {n_tgt} lines")
    with PairWriter(args.out_prefix, with_target=args.tgt is not None) as out:
        src_lines = read_lines(args.src)
        tgt_lines = read_lines(args.tgt) if args.tgt is not None else None
        for _lineno, src in src_lines:
            if tgt_lines is None:
                out.write(normalize_space(src))
                continue
            _, tgt = next(tgt_lines)
            if args.split_target_on:
                tgt = join_sentences(tgt.split(args.split_target_on), args.sent_sep)
            out.write(normalize_space(src), normalize_space(tgt))


# ----------------------------------------------------------------------------------------------- split
def _norm_key(text):
    return re.sub(r"[\W_]+", "", text.lower())


def cmd_split(args):
    sizes = []
    for item in args.sizes.split(","):
        name, _, num = item.partition("=")
        if not name or not num.isdigit():
            raise UserError(f"--sizes: expected NAME=COUNT[,NAME=COUNT...], got {args.sizes!r}")
        sizes.append((name, int(num)))
    names = [n for n, _ in sizes] + [args.rest]
    if len(set(names)) != len(names):
        raise UserError(f"split names must differ: {', '.join(names)}")
    docs = []  # (src, tgt)
    for prefix in args.in_prefix:
        src_path, tgt_path = prefix + ".src", prefix + ".tgt"
        n_src, n_tgt = count_lines(src_path), count_lines(tgt_path)
        if n_src != n_tgt:
            raise UserError(f"line counts differ: {src_path} has {n_src} lines, {tgt_path} has {n_tgt} lines")
        tgt_lines = read_lines(tgt_path)
        for _, src in read_lines(src_path):
            docs.append((src, next(tgt_lines)[1]))
    # Union-find: documents with the same normalized source or the same normalized target are one group.
    parent = list(range(len(docs)))

    def find(i):
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for side in (0, 1):
        first = {}
        for i, doc in enumerate(docs):
            key = _norm_key(doc[side])
            if not key:
                continue
            if key in first:
                a, b = find(first[key]), find(i)
                parent[max(a, b)] = min(a, b)
            else:
                first[key] = i
    groups = {}
    for i in range(len(docs)):
        groups.setdefault(find(i), []).append(i)

    def order(members):
        digest = hashlib.sha1(f"{args.seed}\0{docs[members[0]][0]}\0{docs[members[0]][1]}".encode()).hexdigest()
        return digest, members[0]

    remaining = sorted(groups.values(), key=order)
    assignment = {}
    for name, size in sizes:
        taken, left = 0, []
        for members in remaining:
            if taken + len(members) <= size:
                taken += len(members)
                for i in members:
                    assignment[i] = name
            else:
                left.append(members)
        if taken < size:
            raise UserError(f"not enough documents for split {name!r}: {taken} of {size}")
        remaining = left
    for members in remaining:
        for i in members:
            assignment[i] = args.rest
    multi = [g for g in groups.values() if len(g) > 1]
    print(f"{PROG}: {len(docs)} documents in {len(groups)} groups; {len(multi)} groups hold near-duplicates "
          f"({sum(len(g) for g in multi)} documents), each group kept within one split", file=sys.stderr)
    for name in names:
        with PairWriter(os.path.join(args.out_dir, name)) as out:
            for i, (src, tgt) in enumerate(docs):
                if assignment[i] == name:
                    out.write(src, tgt)
