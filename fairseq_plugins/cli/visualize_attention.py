"""summ-visualize-attention: summarize one document and render what the model attended to, copied and covered
(HTML page + PNG).

    summ-visualize-attention MODEL_DIR [--data-dir DATA_DIR] [--checkpoint NAME]
        (--text "raw document" | --input FILE [--index N])
        [--html OUT.html] [--png OUT.png] [--beam 5] [--max-len-b 60] [--min-len 5] [--lenpen 1.0]

MODEL_DIR is a train.sh SAVE_DIR (checkpoints, prep.json, dict.txt); DATA_DIR (preprocess.sh output) is only
needed when MODEL_DIR lacks prep.json or dict.txt.  --input FILE holds raw documents, one per line ('-' =
stdin); --index picks one (0-based, default 0).  The document goes through the same preprocessing, beam search
and OOV restoration as generate.sh --input; the generated summary is then teacher-forced through the model to
read the attention, p_gen and coverage of each output token (fairseq_plugins/inference/hub.py).  The page and the image
are described in fairseq_plugins/viz/visualize.py.  The summary is printed on stdout; logs go to stderr.
(``python scripts/visualize_attention.py`` is the same command.)  Exit status: 0 success, 1 runtime failure,
2 usage or bad input.
"""
import argparse
import logging
import os
import sys

from fairseq_plugins.cli.common import finish_parser, run_cli
from fairseq_plugins.text.textio import UserError, no_stdout, read_lines

PROG = "summ-visualize-attention"


def build_parser():
    parser = argparse.ArgumentParser(prog=PROG, description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("model_dir", help="model directory written by train.sh (SAVE_DIR)")
    parser.add_argument("--data-dir", help="preprocess.sh output, if MODEL_DIR lacks prep.json or dict.txt")
    parser.add_argument("--checkpoint", default="checkpoint_best.pt", help="checkpoint file in MODEL_DIR")
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--text", help="the raw document")
    source.add_argument("--input", help="raw documents, one per line ('-' = stdin)")
    parser.add_argument("--index", type=int, default=0, help="which line of --input (0-based; default 0)")
    parser.add_argument("--html", help="write the HTML page here")
    parser.add_argument("--png", help="write the PNG image here")
    parser.add_argument("--title", help="heading of the page and the image")
    parser.add_argument("--beam", type=int, default=5)
    parser.add_argument("--max-len-a", type=float, default=0)
    parser.add_argument("--max-len-b", type=int, default=60)
    parser.add_argument("--min-len", type=int, default=5)
    parser.add_argument("--lenpen", type=float, default=1.0)
    parser.add_argument("--quiet", action="store_true", help="no fairseq log messages")
    return finish_parser(parser)


def read_document(path, index):
    if index < 0:
        raise UserError(f"--index must be 0 or more, not {index}")
    count = 0
    for lineno, line in read_lines(path):
        if lineno - 1 == index:
            return line
        count = lineno
    raise UserError(f"{path}: no line with index {index} (the file has {count} lines; --index is 0-based)")


def _main(argv):
    parser = build_parser()
    args = parser.parse_args(argv)
    if not args.html and not args.png:
        parser.error("give --html and/or --png")
    for option, path in (("--html", args.html), ("--png", args.png)):
        if path:
            no_stdout(option, path, "stdout holds the summary")
    if args.text is not None and args.index != 0:
        parser.error("--index goes with --input")
    logging.basicConfig(level=logging.WARNING if args.quiet else logging.INFO, stream=sys.stderr,
                        format="%(asctime)s | %(levelname)s | %(name)s | %(message)s")
    document = args.text if args.text is not None else read_document(args.input, args.index)
    for path in (args.html, args.png):
        parent = os.path.dirname(os.path.abspath(path)) if path else None
        if parent and not os.path.isdir(parent):
            raise UserError(f"output directory does not exist: {parent}")

    from fairseq_plugins.inference.hub import Summarizer
    from fairseq_plugins.viz.visualize import save

    try:
        summarizer = Summarizer.from_pretrained(args.model_dir, args.checkpoint, data_dir=args.data_dir)
    except (FileNotFoundError, ValueError) as err:
        raise UserError(str(err)) from None
    details = summarizer.summarize_with_details(
        [document], beam=args.beam, max_len_a=args.max_len_a, max_len_b=args.max_len_b, min_len=args.min_len,
        lenpen=args.lenpen)[0]
    layout = save(details, html_path=args.html, png_path=args.png, title=args.title,
                  lang=summarizer.settings.get("lang", "en"))
    print(details.text)
    written = [path for path in (args.html, args.png) if path]
    size = f" ({layout['width']}x{layout['height']} px)" if layout else ""
    print(f"{PROG}: wrote {' and '.join(written)}{size}", file=sys.stderr)


def main(argv=None):
    return run_cli(PROG, _main, argv)


if __name__ == "__main__":
    sys.exit(main())
