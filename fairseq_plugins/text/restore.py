"""summ-restore: fairseq generation output -> one detokenized summary per input document, in input order.

    summ-restore --prep OUT/prep.json --oov P.oov --generate-output GEN.txt --output HYP.txt [--num-docs N]
                 [--tokens-output TOKENS.txt] [--drop-unk] [--no-detok]

Reads the ``H-<id>\\t<score>\\t<tokens>`` lines of fairseq-generate or fairseq-interactive output (all other
lines are ignored; with ``--nbest`` > 1 the first hypothesis of an id is used).  The ids must be exactly
0..N-1, N = the number of lines of the .oov file (fairseq can drop inputs: missing ids are an error).
Each ``<oov-K>`` becomes field K of the document's .oov line (a marker beyond the line's fields becomes
``<unk>``, counted in a warning); fairseq's own symbols (``<s>``, ``</s>``, ``<pad>``, ``<mask>``,
``madeupwordNNNN``, and ``<unk>`` with ``--drop-unk``) are dropped before that, so OOV words that merely look
like them come back verbatim.  The tokens are then detokenized for the language/unit of prep.json and written,
exactly N lines (an empty line for an empty hypothesis): English as text ("the model (a gru) didn't win,
sadly", sacremoses), or with ``--no-detok`` as ROUGE scores it (the tokens separated by spaces: "the model
( a gru ) didn't win , sadly"; Chinese and sentencepiece units are the same text either way).  ``-`` is stdin
for --generate-output and stdout for --output and --tokens-output (--out and --tokens-out are older spellings).
Exit status: 0 success, 1 runtime failure, 2 usage or bad input.
"""
import re
import sys

from . import markers
from .prepare import load_prep
from .textio import AtomicWriter, UserError, count_lines, read_lines
from .tokenization import detokenize, display_text

PROG = "summ-restore"
UNK = "<unk>"
_SPECIAL = re.compile(r"(<s>|</s>|<pad>|<mask>|madeupword\d+)\Z")
_HYPO = re.compile(r"H-(\d+)\Z")


def read_hypotheses(path):
    """{id: token list} from fairseq-generate/-interactive output; the first H line of an id wins."""
    hypos = {}
    for lineno, line in read_lines(path):
        if not line.startswith("H-"):
            continue
        fields = line.rstrip("\r").split("\t")
        match = _HYPO.match(fields[0])
        if match is None or len(fields) not in (2, 3):
            raise UserError(f"{path}:{lineno}: malformed hypothesis line (expected 'H-<id>\\t<score>\\t<tokens>')")
        try:
            float(fields[1])
        except ValueError:
            raise UserError(f"{path}:{lineno}: malformed hypothesis line "
                            f"(score {fields[1]!r} is not a number)") from None
        hypo_id = int(match.group(1))
        if hypo_id not in hypos:
            hypos[hypo_id] = fields[2].split() if len(fields) == 3 else []
    return hypos


def id_ranges(ids):
    """Compact text for a sorted id list: 3-5, 9, 12-13."""
    parts, start, prev = [], None, None
    for i in ids:
        if start is None:
            start = prev = i
        elif i == prev + 1:
            prev = i
        else:
            parts.append(f"{start}-{prev}" if prev > start else f"{start}")
            start = prev = i
    if start is not None:
        parts.append(f"{start}-{prev}" if prev > start else f"{start}")
    return ", ".join(parts)


def restore_tokens(tokens, oov_words, drop_unk, counts):
    out = []
    for tok in tokens:
        if _SPECIAL.match(tok) or (drop_unk and tok == UNK):
            continue
        k = markers.marker_index(tok)
        if k is None:
            out.append(tok)
            counts["unk"] += tok == UNK
        elif k < len(oov_words):
            out.append(oov_words[k])
            counts["restored"] += 1
        else:
            counts["unmatched"] += 1
            if not drop_unk:
                out.append(UNK)
    return out


def restore_summary(tokens, oov_words, lang, unit, drop_unk, counts, display=False):
    """Generated tokens -> (restored tokens, text) for one document: the text ROUGE scores (``detokenize``), or
    with ``display`` the text users read (``display_text``: English detokenized by sacremoses)."""
    restored = restore_tokens(tokens, oov_words, drop_unk, counts)
    return restored, (display_text if display else detokenize)(restored, lang, unit)


def restore(args):
    prep, _ = load_prep(args.prep)
    lang, unit = prep["settings"]["lang"], prep["settings"]["unit"]
    if args.oov is None and args.num_docs is None:
        raise UserError("give --oov (the .oov file of the generated inputs) or --num-docs")
    n_docs = count_lines(args.oov) if args.oov is not None else args.num_docs
    if args.oov is not None and args.num_docs is not None and args.num_docs != n_docs:
        raise UserError(f"--num-docs {args.num_docs} but {args.oov} has {n_docs} lines")
    hypos = read_hypotheses(args.generate_output)
    missing = [i for i in range(n_docs) if i not in hypos]
    extra = sorted(i for i in hypos if i >= n_docs)
    if missing or extra:
        msg = [f"{args.generate_output}: hypotheses must cover ids 0..{n_docs - 1} exactly ({n_docs} documents)"]
        if missing:
            msg.append(f"missing {len(missing)} ids: {id_ranges(missing)} (did fairseq skip or drop inputs? "
                       f"e.g. --required-batch-size-multiple, --skip-invalid-size-inputs-valid-test, --max-len-a/b)")
        if extra:
            msg.append(f"{len(extra)} ids beyond the inputs: {id_ranges(extra)}")
        raise UserError("; ".join(msg))
    oov_lines = read_lines(args.oov) if args.oov is not None else None
    counts = {"restored": 0, "unmatched": 0, "empty": 0, "unk": 0}
    with AtomicWriter() as atomic:
        out = atomic.open(args.output)
        tok_out = atomic.open(args.tokens_output) if args.tokens_output else None
        for i in range(n_docs):
            oov_words = []
            if oov_lines is not None:
                _, line = next(oov_lines)
                oov_words = line.split("\t") if line else []
            tokens, text = restore_summary(hypos[i], oov_words, lang, unit, args.drop_unk, counts,
                                           display=not args.no_detok)
            counts["empty"] += not text
            out.write(text + "\n")
            if tok_out is not None:
                tok_out.write(" ".join(tokens) + "\n")
    print(f"{PROG}: wrote {n_docs} summaries to {'stdout' if args.output == '-' else args.output}"
          + (f" and their tokens to {args.tokens_output}" if args.tokens_output else "")
          + f"; {counts['restored']} markers restored to source words", file=sys.stderr)
    if counts["unmatched"]:
        print(f"{PROG}: warning: {counts['unmatched']} markers had no OOV word in their document "
              f"({'dropped' if args.drop_unk else 'written as <unk>'})", file=sys.stderr)
    if counts["unk"]:
        print(f"{PROG}: warning: the summaries hold {counts['unk']} <unk> tokens, the model's unknown word "
              f"(decoded with --allow-unk, or by a search without the summarization task)", file=sys.stderr)
    if counts["empty"]:
        print(f"{PROG}: warning: {counts['empty']} empty summaries (kept as empty lines)", file=sys.stderr)
