#!/usr/bin/env python
"""Train word2vec (gensim) on all the raw text of a corpus, in the project's own tokenization.

    python scripts/train_word2vec.py --prep DATA/prep.json --out DATA/w2v.bin
    python scripts/train_word2vec.py --raw-dir RAW --lang zh --unit jieba --extra unlabeled.txt --out w2v.bin

Text: the sources and targets of every split of ``--raw-dir`` (``{split}.src`` and, when present,
``{split}.tgt``; line-aligned raw text, one document a line, as ``summ-prepare`` reads it; the training split
needs both) and every ``--extra`` file (unlabeled text, one document a line; ``.gz`` allowed).  Each document
is one word2vec "sentence".

Tokenization: ``--prep DATA/prep.json`` tokenizes exactly as that ``summ-prepare`` run did (its language,
unit, lower-casing and sentencepiece model; ``--raw-dir`` and ``--splits`` default to the ones it used).
Without ``--prep``, give ``--lang`` (and ``--unit``, ``--lowercase``, ``--sp-model``) directly.  Documents are
not truncated (``--max-source-len`` only limits what the summarizer reads) and no word is replaced by a marker.

The text is tokenized once into a temporary file (in ``--tmp-dir``, default: the output's directory; deleted
at the end) and gensim trains from that file (``corpus_file`` mode): nothing is held in memory but the
vocabulary and the vectors, and the (possibly slow: jieba, sentencepiece) tokenizer runs once, not once per
epoch.

Defaults: 128 dimensions (the ``pgn_lstm`` and See et al. 2017 embedding size, so the file loads into the
default model as is), skip-gram with 5 negative samples, window 5, minimum count 5, 5 epochs (gensim's
defaults except skip-gram, which is better than CBOW for the rare words of a summarization vocabulary;
``--cbow`` trains faster).  A run is exactly reproducible only with ``--workers 1`` (gensim's threads
interleave updates).

Output: ``--format word2vec-binary`` (default) or ``word2vec-text``; both load with
``fairseq_plugins.text.word_vectors`` (and with gensim's ``KeyedVectors.load_word2vec_format``).
With ``--prep``, the coverage of the summ-prepare dictionary is reported at the end.  Progress goes to stderr
(gensim's log at INFO level, and one line per epoch).
"""
import argparse
import logging
import os
import sys
import time

from fairseq_plugins.text.prepare import load_prep, raw_files, tokenizer_from_prep
from fairseq_plugins.cli.common import run_cli
from fairseq_plugins.text.textio import UserError, read_lines
from fairseq_plugins.text.tokenization import DEFAULT_UNIT, LANGS, Tokenizer, check_unit

PROG = "train_word2vec"
FORMATS = ("word2vec-binary", "word2vec-text")
logger = logging.getLogger(PROG)


def build_parser():
    parser = argparse.ArgumentParser(prog=PROG, description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    data = parser.add_argument_group("text")
    data.add_argument("--raw-dir", help="directory with {split}.src and {split}.tgt (default with --prep: the raw "
                                        "directory of that summ-prepare run)")
    data.add_argument("--splits", help="comma-separated splits to read (default: those of --prep, else "
                                       "train,valid,test)")
    data.add_argument("--extra", nargs="+", default=[], metavar="FILE",
                      help="more raw text files (one document a line), e.g. unlabeled in-domain text")
    tok = parser.add_argument_group("tokenization (give --prep, or --lang and optionally --unit/--lowercase)")
    tok.add_argument("--prep", metavar="PREP_JSON", help="the prep.json of a summ-prepare run: tokenize as it did")
    tok.add_argument("--lang", choices=LANGS)
    tok.add_argument("--unit", choices=("keep", "word", "char", "jieba", "sp"),
                     help="tokenization unit (default: keep for en, char for zh)")
    tok.add_argument("--lowercase", action="store_true", help="lower-case the text first (unit word always does)")
    tok.add_argument("--sp-model", help="sentencepiece model for --unit sp")
    w2v = parser.add_argument_group("word2vec")
    w2v.add_argument("--dim", type=int, default=128, help="vector size (default 128)")
    w2v.add_argument("--window", type=int, default=5, help="context window (default 5)")
    w2v.add_argument("--min-count", type=int, default=5, help="ignore words rarer than this (default 5)")
    w2v.add_argument("--epochs", type=int, default=5, help="passes over the text (default 5)")
    arch = w2v.add_mutually_exclusive_group()
    arch.add_argument("--sg", dest="sg", action="store_true", default=True, help="skip-gram (default)")
    arch.add_argument("--cbow", dest="sg", action="store_false", help="continuous bag of words")
    w2v.add_argument("--negative", type=int, default=5,
                     help="negative samples (default 5; 0: hierarchical softmax instead)")
    w2v.add_argument("--workers", type=int, default=2, help="training threads (default 2)")
    w2v.add_argument("--seed", type=int, default=1, help="random seed (default 1)")
    out = parser.add_argument_group("output")
    out.add_argument("--out", required=True, help="output file (written atomically)")
    out.add_argument("--format", choices=FORMATS, default="word2vec-binary", help="default word2vec-binary")
    out.add_argument("--tmp-dir", help="where the tokenized text is kept while training (default: the output's "
                                       "directory)")
    return parser


def make_tokenizer(args):
    """(Tokenizer, description, prep dict or None, prep directory or None)."""
    if args.prep:
        if args.lang or args.unit or args.lowercase or args.sp_model:
            raise UserError("--prep sets the tokenization: do not combine it with "
                            "--lang/--unit/--lowercase/--sp-model")
        prep, prep_dir = load_prep(args.prep)
        return tokenizer_from_prep(prep, prep_dir, args.prep), prep, prep_dir
    if not args.lang:
        raise UserError("give --prep DATA/prep.json (the tokenization of a summ-prepare run) or --lang")
    unit = args.unit or DEFAULT_UNIT[args.lang]
    try:
        check_unit(args.lang, unit)
    except ValueError as err:
        raise UserError(str(err)) from None
    if unit == "sp":
        if not args.sp_model:
            raise UserError("--unit sp needs --sp-model (e.g. the sp.model of a summ-prepare run)")
        if not os.path.isfile(args.sp_model):
            raise UserError(f"{args.sp_model}: no such file (--sp-model)")
    elif args.sp_model:
        raise UserError("--sp-model is only used with --unit sp")
    return Tokenizer(args.lang, unit, args.lowercase, args.sp_model), None, None


def input_files(args, prep):
    raw_dir = args.raw_dir or (prep["settings"].get("raw_dir") if prep else None)
    if args.splits:
        splits = [s for s in args.splits.split(",") if s]
    else:
        splits = list(prep["settings"]["splits"]) if prep else ["train", "valid", "test"]
    files = []
    if raw_dir and not args.raw_dir and not os.path.isdir(raw_dir):
        raise UserError(f"{raw_dir}: no such directory (the raw directory recorded in {args.prep}; give --raw-dir)")
    if raw_dir:
        for split, (src, tgt) in raw_files(raw_dir, splits).items():
            files += [src] + ([tgt] if tgt else [])
    elif args.splits:
        raise UserError("--splits needs --raw-dir")
    for path in args.extra:
        if path != "-" and not os.path.isfile(path):
            raise UserError(f"{path}: no such file (--extra)")
        files.append(path)
    if not files:
        raise UserError("no text: give --raw-dir and/or --extra")
    return files


def tokenize_to(tokenizer, files, out):
    """Write every document of ``files`` as one line of space-separated tokens; returns (documents, tokens)."""
    documents = tokens = 0
    for path in files:
        start, n_docs, n_toks = time.time(), 0, 0
        for _, line in read_lines(path):
            toks = tokenizer(line)
            out.write(" ".join(toks) + "\n")
            n_docs += 1
            n_toks += len(toks)
        logger.info("tokenized %s: %d documents, %d tokens (%.1f s)", path, n_docs, n_toks, time.time() - start)
        documents += n_docs
        tokens += n_toks
    return documents, tokens


def check_options(args):
    for name, low in (("dim", 1), ("window", 1), ("min_count", 1), ("epochs", 1), ("workers", 1), ("negative", 0)):
        if getattr(args, name) < low:
            raise UserError(f"--{name.replace('_', '-')} must be at least {low}")
    out_dir = os.path.dirname(os.path.abspath(args.out))
    if not os.path.isdir(out_dir):
        raise UserError(f"{out_dir}: no such directory (for --out)")
    if args.tmp_dir and not os.path.isdir(args.tmp_dir):
        raise UserError(f"{args.tmp_dir}: no such directory (--tmp-dir)")


def train(args, corpus_file, tokens):
    from gensim.models import Word2Vec
    from gensim.models.callbacks import CallbackAny2Vec

    class EpochLine(CallbackAny2Vec):
        def __init__(self):
            self.epoch, self.start = 0, time.time()

        def on_epoch_end(self, model):
            self.epoch += 1
            logger.info("epoch %d/%d done (%.1f s elapsed)", self.epoch, args.epochs, time.time() - self.start)

    model = Word2Vec(vector_size=args.dim, window=args.window, min_count=args.min_count, sg=int(args.sg),
                     negative=args.negative, hs=0 if args.negative else 1, workers=args.workers, seed=args.seed)
    model.build_vocab(corpus_file=corpus_file)
    if len(model.wv) == 0:
        raise UserError(f"no word occurs at least --min-count {args.min_count} times in the {tokens} tokens")
    logger.info("vocabulary: %d words occur at least %d times", len(model.wv), args.min_count)
    model.train(corpus_file=corpus_file, total_examples=model.corpus_count, total_words=model.corpus_total_words,
                epochs=args.epochs, callbacks=[EpochLine()])
    return model


def save(model, path, fmt):
    directory, name = os.path.split(os.path.abspath(path))
    tmp = os.path.join(directory, f".tmp{os.getpid()}.{name}")  # same extension: gensim gzips *.gz
    try:
        model.wv.save_word2vec_format(tmp, binary=fmt == "word2vec-binary")
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)


def report_coverage(path, prep, prep_dir, fmt, dim):
    from fairseq.data import Dictionary

    from fairseq_plugins.text.word_vectors import read_vectors

    dict_path = os.path.join(prep_dir, prep["files"]["dict"])
    if not os.path.isfile(dict_path):
        logger.warning("%s not found: no dictionary coverage report", dict_path)
        return
    _, _, report = read_vectors(path, Dictionary.load(dict_path), dim, fmt)
    logger.info("dictionary %s: %s", dict_path, report)


def _main(argv):
    args = build_parser().parse_args(argv)
    logging.basicConfig(format="%(asctime)s | %(levelname)s | %(name)s | %(message)s", level=logging.INFO,
                        stream=sys.stderr)
    check_options(args)
    tokenizer, prep, prep_dir = make_tokenizer(args)
    files = input_files(args, prep)
    logger.info("tokenization: lang=%s unit=%s lowercase=%s%s", tokenizer.lang, tokenizer.unit, tokenizer.lowercase,
                f" (from {args.prep})" if args.prep else "")
    tmp_dir = args.tmp_dir or os.path.dirname(os.path.abspath(args.out))
    corpus = os.path.join(tmp_dir, f".{PROG}.{os.getpid()}.tok")
    try:
        with open(corpus, "w", encoding="utf-8", newline="\n") as out:
            documents, tokens = tokenize_to(tokenizer, files, out)
        logger.info("%d documents, %d tokens from %d files", documents, tokens, len(files))
        if tokens == 0:
            raise UserError("the text has no tokens")
        model = train(args, corpus, tokens)
    finally:
        if os.path.exists(corpus):
            os.remove(corpus)
    save(model, args.out, args.format)
    logger.info("wrote %s (%s): %d vectors of dimension %d", args.out, args.format, len(model.wv), args.dim)
    if prep is not None:
        report_coverage(args.out, prep, prep_dir, args.format, args.dim)


def main(argv=None):
    return run_cli(PROG, _main, argv)


if __name__ == "__main__":
    sys.exit(main())
