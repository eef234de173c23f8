#!/usr/bin/env python
"""How abstractive See et al. (2017)'s released CNN/DM outputs are: summ-analyze on their 10,000 test documents.

    python scripts/experiments/see2017_abstractiveness.py [--work runs/see2017_abstractiveness] [--docs N]
        [--out docs/results/see2017_abstractiveness]

Data: ../shared/data/cnndm_see2017/part_a.jsonl.gz (research use only: read from there, written only under
WORK): per document the article (lower-cased, PTB-tokenized, in full), the reference highlights and the
decoded summaries of See et al.'s baseline (seq2seq + attention), pointer-generator and pointer-generator +
coverage, each a list of sentences, joined here with `` <q> `` so that summ-analyze splits them as released.

Runs the command a user runs, twice:
  1. ``summ-analyze`` against the full article (every figure; the plot OUT.png; an HTML page of the first 20
     documents in WORK/page.html);
  2. against the article's first 400 tokens, the part See et al.'s models read (their ``max_enc_steps``), for
     the novel n-grams and copied sentences only.
and writes OUT.md (its command, commit and machine, summ-analyze's command lines, both tables and the paper's
figures) from the two JSON files.  The section comparing with the paper is prose written for this run (the
constant ``COMPARISON``), marked as such.
"""
import argparse
import json
import shlex
import sys
from pathlib import Path

from scripts.experiments.corpora import CNNDM, cnndm_documents
from scripts.experiments.lib import ROOT, Experiment, write_lines
from scripts.experiments.records import made_header

SYSTEMS = ("baseline", "pointer_gen", "pointer_gen_cov")
ENCODER_STEPS = 400  # See et al., section 5: articles truncated to 400 tokens for training and test
FIGURE_ROWS = ("novel_1grams", "novel_2grams", "novel_3grams", "novel_4grams", "copied_sentences", "coverage",
               "density", "compression", "repeated_trigrams", "with_repeat", "tokens", "sentences", "empty")
TRUNCATED_ROWS = FIGURE_ROWS[:5]

# What See et al. (2017) write (section 7.2 and Figure 6 of the ACL paper); the bar heights of Figure 6 are
# not printed in the paper, so only the two numbers of the text are quoted.
PAPER = """See et al. (2017), section 7.2 and Figure 6 (11,490 test documents; summaries of the full test set):
- section 7.2 (paraphrased; the paper's text was not at hand offline, the two numbers are as the paper and
  readers' notes of it give them): the final model (pointer-generator + coverage) copies whole article
  sentences 35% of the time, the reference summaries 1.3% of the time;
- Figure 6: the final model's summaries contain a much lower rate of novel n-grams than the reference summaries;
  the baseline produces novel n-grams more often, but that count includes incorrectly copied words, [UNK]
  tokens and fabrications.  The bar heights are not given as numbers in the paper."""

COMPARISON = """Written by hand after the run of 2026-11-25 on all 10,000 documents; the numbers quoted are that run's.

- Copied sentences: pointer-generator + coverage 49.9% here against 35% in the paper; the reference 2.0% against
  1.3%.  The order (the final model copies far more than the reference, and more than the pointer-generator
  without coverage, 35.8%; the baseline 4.9%) agrees, the levels do not.  The paper does not say how it
  matched a sentence (tokens, case, punctuation, whether the article was the 400-token input) nor on which
  documents beyond "the test set".  Two candidate reasons do not explain the gap: cutting the article to its
  first 400 tokens changes the figure by less than 0.1 point, and the mix of sources is about the test set's (1,067
  CNN stories of 10,000 here; 1,093 of the 11,490 test documents).  The figure does depend on the documents: the
  first 500 ids (484 of them CNN stories, with shorter summaries) give 38.0% for the final model and 1.0% for
  the reference, close to the paper's numbers; the DailyMail summaries copy more.  The gap stays unexplained;
  the likeliest cause is a matching rule of the paper's own analysis that the paper does not state.
- Novel n-grams (Figure 6): as the paper says, the final model writes far fewer novel n-grams than the
  references (2.3% against 47.9% of bigrams, 9.8% against 78.4% of 4-grams) and the baseline far more than
  the pointer-generator models (20.6% of bigrams), many of them [UNK] tokens and wrong words (the baseline's
  6.1% novel unigrams include every [UNK]).  The paper gives the bars only as a picture, so the levels cannot
  be compared number by number.
- Against the first 400 tokens the references' novel unigrams rise from 11.0% to 17.2%: 6 in 100 reference
  words occur in the article only after the part the models read.
- Repetition and fragments (not in the paper's section 7.2): coverage cuts repeated trigrams from 14.9% to 1.5%
  (the paper makes the same point with its own counts of duplicated n-grams); the final model's fragment
  density (29.7) is seven times the references' (4.3)."""


def load(docs: int):
    return cnndm_documents(docs or None, by_id=True)


def write_inputs(work: Path, rows):
    """WORK/source.txt, source400.txt, reference.txt and one file per system, one document a line."""
    work.mkdir(parents=True, exist_ok=True)
    write_lines(work / "source.txt", [" ".join(row["article"].split()) for row in rows])
    write_lines(work / "source400.txt", [" ".join(row["article"].split()[:ENCODER_STEPS]) for row in rows])
    for name in (*SYSTEMS, "reference"):
        write_lines(work / f"{name}.txt", [" <q> ".join(" ".join(s.split()) for s in row[name]) for row in rows])


def command(work: Path, source: str, out_json: Path, extra=()):
    hyps = [arg for name in SYSTEMS for arg in ("--hyp", work / f"{name}.txt", "--name", name)]
    return ["summ-analyze", "--source", work / source, *hyps, "--ref", work / "reference.txt", "--json", out_json,
            *extra]


def shown(cmd) -> str:
    return " ".join(shlex.quote(str(part).replace(str(ROOT) + "/", "")) for part in cmd)


def table(data, rows, note) -> list:
    names = list(data["systems"])
    lines = [f"| figure ({note}) | " + " | ".join(names) + " |", "|---|" + "---:|" * len(names)]
    for key in rows:
        cells = []
        for name in names:
            value = data["systems"][name][key]
            pooled, mean = value["pooled"], value["doc_mean"]
            cells.append(f"{pooled:.2f}" if abs(pooled - mean) < 1e-9 else f"{pooled:.2f} ({mean:.2f})")
        lines.append(f"| {data['figures'][key]} | " + " | ".join(cells) + " |")
    return lines


def report(args, full_cmd, cut_cmd, full, cut) -> str:
    lines = [
        "# See et al. (2017)'s released CNN/DM outputs: novel n-grams, copied sentences, fragments, repetition",
        "",
        *made_header("see2017_abstractiveness.py", args.argv), "",
        f"{full['documents']:,} documents of `../shared/data/cnndm_see2017/part_a.jsonl.gz`, sorted by id. "
        "summ-analyze's commands:",
        "", f"    {shown(full_cmd)}", f"    {shown(cut_cmd)}", "",
        "Tokens are the released (lower-cased, PTB-tokenized) whitespace tokens; sentences are the released "
        "sentences (joined with `<q>`). Each cell: pooled over the corpus, the per-document mean in brackets "
        "where it can differ (definitions: `summ-analyze --help`). Shares in percent; coverage 0-1.",
        "", "## Against the full article", "", *table(full, FIGURE_ROWS, "full article"), "",
        f"![novel n-grams and copied sentences]({args.out.name}.png)", "",
        f"## Against the article's first {ENCODER_STEPS} tokens (what the models read)", "",
        *table(cut, TRUNCATED_ROWS, f"first {ENCODER_STEPS} tokens"), "",
        "## What the paper reports", "", PAPER, "",
        "## Comparison with the paper (prose written for this run, not computed)", "",
        COMPARISON or "(not written yet)", ""]
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--work", type=Path, default=ROOT / "runs" / "see2017_abstractiveness")
    parser.add_argument("--docs", type=int, default=0, help="only the first N documents (0: all)")
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "results" / "see2017_abstractiveness")
    args = parser.parse_args(argv)
    args.argv = sys.argv[1:] if argv is None else argv
    if not CNNDM.is_file():
        sys.exit(f"{CNNDM} not found (needs ../shared/data beside the repository)")
    exp = Experiment("see2017_abstractiveness", args.work)
    write_inputs(exp.work, load(args.docs))
    full_cmd = command(exp.work, "source.txt", exp.work / "full.json",
                       ["--plot", args.out.with_suffix(".png"), "--html", exp.work / "page.html", "--html-docs", "20"])
    cut_cmd = command(exp.work, "source400.txt", exp.work / "first400.json")
    exp.run(full_cmd, "analyze_full.log", stdout=exp.work / "full.txt")
    exp.run(cut_cmd, "analyze_first400.log", stdout=exp.work / "first400.txt")
    full, cut = (json.loads((exp.work / name).read_text(encoding="utf-8")) for name in ("full.json", "first400.json"))
    args.out.with_suffix(".md").write_text(report(args, full_cmd, cut_cmd, full, cut), encoding="utf-8")
    print((exp.work / "full.txt").read_text(encoding="utf-8"))


if __name__ == "__main__":
    main()
