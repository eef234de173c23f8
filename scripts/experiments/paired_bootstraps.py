#!/usr/bin/env python
"""Paired bootstraps between the systems of compare.py work folders, one folder per seed of the same systems, and
each comparison's verdict over the seeds by the project's rule (lib.verdict), as a markdown section.

    python scripts/experiments/paired_bootstraps.py WORK [WORK ...] --pair B=A [--pair B=A ...]
                                                     [--decode beam ...] [--table] [--out FILE] [--archive DIR]
    python scripts/experiments/paired_bootstraps.py WORK [WORK ...] --decode-pair B=A --system S [--system S ...]

For every pair, decoding and folder: official ROUGE-1.5.5's per-document F1 of WORK/outputs/B.DECODE.txt and
A.DECODE.txt against the test references (``summ-rouge --per-doc``, cached in WORK/logs/), B - A in ROUGE points
with its 95 % interval over 10,000 paired resamples of the test documents (fairseq_plugins/scoring/significance.py,
seed 1).  A direction holds only when every folder (two or more) shows it with an interval that excludes zero;
one folder gives "inconclusive (one seed)".  ``--decode-pair B=A`` compares two decodings of each system named
by ``--system`` instead (decoding B - decoding A of the same summaries' system: what trigram blocking changes,
say).  The section says how many intervals it prints.  Pairs name systems
without their seed suffix (``full``, also in a folder whose system is ``full_seed2``).  ``--table`` puts each
WORK/results.md (compare.py's tables) before the section.

``--archive DIR`` then packs what the section and the tables are made of (lib.RUN_FILES: no checkpoints, no data)
into DIR/NAME.tar.xz for each WORK folder NAME (with the folders above it where two names are alike: seed1_main).
A WORK may be such an archive: it is read as its folder was, so a table and its intervals can be rebuilt after the
machine that trained it is gone.
"""
import argparse
import json
import sys
import tempfile
from pathlib import Path

from scripts.experiments.lib import (ARCHIVE_SUFFIX, RUN_FILES, Experiment, invocation, pack, paired_intervals,
                                     per_doc_rouge, split_seed, unpack, verdict, work_language)

RESAMPLES = 10000


def tabulated(exp: Experiment) -> dict:
    """SYSTEM.DECODE -> the name of its summaries, for every row of WORK/results.json (the systems compare.py's
    printed table vouches for).  SYSTEM drops the seed suffix of a system labelled LABEL_seedN, so the folders
    of several seeds name their systems alike."""
    results = exp.work / "results.json"
    if not results.is_file():
        exp.fail(f"{results} not found: {exp.work} is not a finished compare.py run")
    rows = json.loads(results.read_text(encoding="utf-8"))["rows"]
    return {f"{split_seed(row['system'])[0]}.{row['decode']}": f"{row['system']}.{row['decode']}"
            for row in rows if row.get("decode")}


def per_doc(exp: Experiment, name: str, lang: str) -> Path:
    """WORK/logs/rouge_NAME.per_doc.tsv: official ROUGE-1.5.5 per-document F1 of the summaries of NAME
    (SYSTEM.DECODE, ``tabulated``), for a system and decoding of the folder's table only."""
    kept = tabulated(exp).get(name)
    if kept is None or not (exp.work / "outputs" / f"{kept}.txt").is_file():
        exp.fail(f"{name}: not a system and decoding of {exp.work}'s table (results.json), or its summaries "
                 f"outputs/{kept or name}.txt are missing")
    if lang is None and not (exp.logs / f"rouge_{kept}.per_doc.tsv").is_file():
        exp.fail(f"{kept}: its per-document scores are not in {exp.work.name}, which keeps no data/ to compute "
                 "them (an archive keeps the scores computed before it was packed)")
    return per_doc_rouge(exp, kept, lang)


def intervals(exp: Experiment, a: str, b: str, lang: str):
    """[(difference, low, high)] of B - A in ROUGE points for ROUGE-1, -2 and -L."""
    return paired_intervals(per_doc(exp, a, lang), per_doc(exp, b, lang), RESAMPLES)


def comparisons(pairs, decodes, decode_pairs, systems) -> list:
    """(B's name, A's name, the row's B, A and decoding cells) for every pair of systems under every decoding,
    then every pair of decodings of every named system; names are SYSTEM.DECODE."""
    rows = [(f"{b}.{decode}", f"{a}.{decode}", b, a, decode) for decode in decodes for b, a in pairs]
    rows += [(f"{system}.{b}", f"{system}.{a}", system, system, f"{b} - {a}")
             for b, a in decode_pairs for system in systems]
    return rows


def section(exps, rows, command: str) -> str:
    """The markdown section: one row per comparison (``comparisons``), each score's verdict over the folders."""
    count = len(rows) * len(exps)
    lines = ["## Paired bootstraps", "", f"Written by `{command}`.", "",
             f"B - A in ROUGE points, 95 % interval over {RESAMPLES:,} paired resamples of the test documents, "
             f"per seed ({len(exps)}): {count} intervals of 3 scores each ({3 * count} in all), none corrected for "
             "their number. A direction holds only when every seed, two or more, shows it with an interval that "
             "excludes zero; otherwise inconclusive.", "",
             "| B | A | decoding | ROUGE-1 | ROUGE-2 | ROUGE-L |", "|---|---|---|---|---|---|"]
    # each folder's corpus, read once; an archive keeps no data, only per-document scores already computed
    langs = [work_language(exp.work) if (exp.work / "data").is_dir() else None for exp in exps]
    for b_name, a_name, b, a, decoding in rows:
        runs = [intervals(exp, a_name, b_name, lang) for exp, lang in zip(exps, langs)]
        cells = [verdict([run[metric] for run in runs]) for metric in range(3)]
        lines.append(f"| {b} | {a} | {decoding} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def parse_pair(text: str):
    b, sep, a = text.partition("=")
    if not sep or not a or not b:
        raise argparse.ArgumentTypeError(f"{text!r}: give B=A (two labels)")
    return b, a


def opened(works, unpacked: Path) -> list:
    """An Experiment per WORK: the folder itself, or an archive unpacked under ``unpacked``."""
    folders = [unpack(work, unpacked / str(place)) if work.name.endswith(ARCHIVE_SUFFIX) else work
               for place, work in enumerate(works)]
    return [Experiment("paired_bootstraps", folder) for folder in folders]


def archive_targets(works, dest: Path) -> list:
    """(WORK folder, DEST/NAME.tar.xz) for each WORK that is a folder.  NAME is the folder's name, or where two
    names are alike the last parts of their paths joined by "_" (runs/seed1/main: seed1_main), as few as tell
    them apart."""
    folders = [work.resolve() for work in works if not work.name.endswith(ARCHIVE_SUFFIX)]
    if len(set(folders)) < len(folders):
        sys.exit("paired_bootstraps: --archive packs each WORK folder once; a folder is given twice")
    names = [short_name(folder, [other for other in folders if other != folder]) for folder in folders]
    if len(set(names)) < len(names):
        sys.exit(f"paired_bootstraps: --archive would give two folders one name: {names}")
    return [(folder, dest / f"{name}{ARCHIVE_SUFFIX}") for folder, name in zip(folders, names)]


def short_name(folder: Path, others) -> str:
    """The fewest last parts of FOLDER's path that no other folder's path ends with, joined by "_"."""
    parts = 1
    while any(other.parts[-parts:] == folder.parts[-parts:] for other in others):
        parts += 1
    return "_".join(folder.parts[-parts:])


def archive(targets) -> None:
    """Packs each folder's RUN_FILES into its archive (``archive_targets``)."""
    for folder, dest in targets:
        members = pack(folder, RUN_FILES, dest)
        print(f"paired_bootstraps: {len(members)} files of {folder} packed into {dest}", file=sys.stderr)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("work", type=Path, nargs="+", help="compare.py work folders, one per seed")
    parser.add_argument("--pair", type=parse_pair, action="append", default=[], metavar="B=A",
                        help="two system labels")
    parser.add_argument("--decode", action="append", help="decoding labels of --pair (default: beam)")
    parser.add_argument("--decode-pair", type=parse_pair, action="append", default=[], metavar="B=A",
                        help="two decoding labels, compared for every --system")
    parser.add_argument("--system", action="append", default=[], help="a system label of --decode-pair")
    parser.add_argument("--table", action="store_true", help="WORK/results.md first")
    parser.add_argument("--out", type=Path, help="write here as well as to stdout")
    parser.add_argument("--archive", type=Path, metavar="DIR", help="pack each WORK folder into DIR/NAME.tar.xz")
    args = parser.parse_args(argv)
    if not args.pair and not args.decode_pair:
        parser.error("nothing to compare: give --pair B=A (systems) or --decode-pair B=A with --system")
    if bool(args.decode_pair) != bool(args.system):
        parser.error("--decode-pair and --system go together: the decodings of which systems?")
    rows = comparisons(args.pair, args.decode or ["beam"], args.decode_pair, args.system)
    command = invocation("paired_bootstraps.py", argv)
    targets = archive_targets(args.work, args.archive) if args.archive else []
    with tempfile.TemporaryDirectory() as unpacked:
        exps = opened(args.work, Path(unpacked))
        text = section(exps, rows, command)
        if args.table:
            tables = [(exp.work / "results.md").read_text(encoding="utf-8").rstrip("\n") for exp in exps]
            text = "\n\n".join(tables) + "\n\n" + text
    archive(targets)
    if args.out:
        args.out.write_text(text, encoding="utf-8")
    print(text, end="")


if __name__ == "__main__":
    main()
