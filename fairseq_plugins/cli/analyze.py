"""``summ-analyze``: how abstractive, how repetitive and how long summaries are, against their sources.

    summ-analyze --source SRC --hyp SYS1.txt [--hyp SYS2.txt ...] [--ref REF.txt] [--lang en|zh] [--lower]
                 [--prep DATA/prep.json] [--json OUT.json] [--plot OUT.png] [--html OUT.html]

The figures and their definitions: ``scoring/summary_stats.py`` (the library, which ``--help`` prints);
``--plot`` and ``--html``: ``analysis_page.py``.  Pure Python (no fairseq, no torch).
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

from fairseq_plugins.cli.common import finish_parser, run_cli
from fairseq_plugins.scoring import summary_stats
from fairseq_plugins.scoring.summary_stats import (FIGURES, PROG, REFERENCE, analyze, format_report, prepared,
                                                  unit_warnings)
from fairseq_plugins.text.textio import STDOUT, UserError, display_name, no_stdout, read_lines, write_text
from fairseq_plugins.viz import analysis_page

DEFINITIONS = summary_stats.__doc__[summary_stats.__doc__.index("Definitions"):]


# ---------------------------------------------------------------------------------------------- command line
def read_aligned(source: str, others: Sequence[str]) -> Tuple[List[str], List[List[str]]]:
    """The lines of the source and of each other file; a UserError naming the file and the first line without
    a partner when the line counts differ."""
    sources = [line for _, line in read_lines(source)]
    texts = []
    for path in others:
        lines = [line for _, line in read_lines(path)]
        if len(lines) != len(sources):
            short, long_ = (path, source) if len(lines) < len(sources) else (source, path)
            first = min(len(lines), len(sources)) + 1
            raise UserError(f"{display_name(path)} has {len(lines)} lines but the source {display_name(source)} "
                            f"has {len(sources)}: line {first} of {display_name(long_)} has no partner in "
                            f"{display_name(short)}")
        texts.append(lines)
    return sources, texts


def system_names(paths: Sequence[str], names: Sequence[str]) -> List[str]:
    """--name values, else each file's name without its extension (made unique with a number)."""
    if names and len(names) != len(paths):
        raise UserError(f"--name is given {len(names)} times for {len(paths)} --hyp files: give one per --hyp")
    out = list(names) or [Path(p).stem or p for p in paths]
    if REFERENCE in out:
        raise UserError(f"the name '{REFERENCE}' is kept for --ref: rename that --hyp with --name")
    seen: Dict[str, int] = {}
    for i, name in enumerate(out):
        seen[name] = seen.get(name, 0) + 1
        if seen[name] > 1:
            out[i] = f"{name}#{seen[name]}"
    return out


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog=PROG, formatter_class=argparse.RawDescriptionHelpFormatter,
        description="How abstractive, repetitive and long summaries are: novel n-grams, copied sentences,\n"
                    "extractive fragment coverage / density / compression, repeated trigrams, lengths.\n"
                    "Inputs are line-aligned plain text, one document a line; --ref is one more system.",
        epilog=DEFINITIONS.replace("**", "").replace("``", "'"))
    p.add_argument("--source", required=True, metavar="FILE", help="source documents, one per line")
    p.add_argument("--hyp", action="append", required=True, metavar="FILE",
                   help="a system's summaries, one per line (repeat for several systems)")
    p.add_argument("--name", action="append", default=[], metavar="NAME",
                   help="a name per --hyp, in order (default: the file name without its extension)")
    p.add_argument("--ref", metavar="FILE", help="reference summaries: analysed as one more system")
    p.add_argument("--lang", choices=("en", "zh"), default="en", help="en: words; zh: characters")
    p.add_argument("--lower", action="store_true", help="lower-case all texts first")
    p.add_argument("--prep", metavar="PREP_JSON",
                   help="tokenize every text as the model's source was (DATA/prep.json: its units and "
                        "lower-casing; the source truncated as the model read it); sets --lang and --lower")
    p.add_argument("--json", metavar="OUT", help="write the figures (and their definitions) as JSON (- = stdout: "
                                                 "the report then goes to stderr)")
    p.add_argument("--plot", metavar="OUT.png", help="See et al.'s Figure 6: novel n-grams and copied sentences")
    p.add_argument("--html", metavar="OUT.html", help="a page per document: the copied fragments highlighted "
                                                      "(- = stdout: the report then goes to stderr)")
    p.add_argument("--html-docs", type=int, default=100, metavar="N",
                   help="documents on the --html page: the first N (default 100; 0 = all)")
    return finish_parser(p)


def to_json(results: Dict, n_docs: int, args) -> Dict:
    return {"documents": n_docs, "lang": args.lang, "lower": args.lower,
            "pooling": "pooled = sum of numerators / sum of denominators over the corpus; doc_mean = mean of "
                       "the documents' own values where defined; shares in percent",
            "figures": {fig.key: fig.label for fig in FIGURES}, "definitions": DEFINITIONS,
            "systems": results}


def run(argv: Optional[Sequence[str]] = None) -> None:
    args = build_parser().parse_args(argv)
    if args.html_docs < 0:
        raise UserError(f"--html-docs must be 0 or more, not {args.html_docs}")
    if args.plot:
        no_stdout("--plot", args.plot, "it is an image")
    if args.json == STDOUT and args.html == STDOUT:
        raise UserError("--json - and --html -: only one of them can go to stdout")
    names = system_names(args.hyp, args.name)
    paths = list(args.hyp) + ([args.ref] if args.ref else [])
    sources, texts = read_aligned(args.source, paths)
    if not sources:
        raise UserError(f"{display_name(args.source)} is empty: nothing to analyse")
    systems = dict(zip(names + ([REFERENCE] if args.ref else []), texts))
    if args.prep:
        sources, systems, args.lang = prepared(args.prep, sources, systems)
    elif args.lang == "en":
        for warning in unit_warnings(sources, systems, paths):
            print(f"{PROG}: warning: {warning}", file=sys.stderr)
    results = analyze(sources, systems, args.lang, args.lower)
    report = format_report(results, len(sources), args.lang)
    print(report, file=sys.stderr if STDOUT in (args.json, args.html) else sys.stdout)
    if args.json:
        write_text(args.json, json.dumps(to_json(results, len(sources), args), indent=1, ensure_ascii=False) + "\n")
    if args.plot or args.html:
        if args.plot:
            analysis_page.render_png(results, args.plot, title="Novel n-grams and copied sentences: "
                                     f"{len(sources)} documents ({args.lang})")
        if args.html:
            count = args.html_docs or len(sources)
            page = analysis_page.render_html(sources[:count], {n: t[:count] for n, t in systems.items()},
                                             args.lang, args.lower)
            write_text(args.html, page)


def main(argv: Optional[Sequence[str]] = None) -> int:
    return run_cli(PROG, run, argv)


if __name__ == "__main__":
    sys.exit(main())
