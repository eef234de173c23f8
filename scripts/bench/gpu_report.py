"""The GPU check's report: the test tier's counts, every architecture x criterion x precision with its losses,
the CPU/GPU decode agreement and the copy check, as one Markdown file (scripts/bench/gpu_check.sh writes the
inputs).

    python scripts/bench/gpu_report.py WORK_DIR > summary.md

WORK_DIR holds cuda-tests.xml (pytest's JUnit file), cases.jsonl (tests/test_cuda.py's SUMM_CUDA_REPORT lines),
versions.txt, copy_check.tsv (precision, markers restored, ROUGE line), speed/ (step_ops.py's tables, throughput.py's
reports) and paper/dry_run.md (paper_scale.py's), each optional.
"""
import json
import sys
import xml.etree.ElementTree as ElementTree
from collections import defaultdict
from pathlib import Path


def tier_counts(junit: Path) -> str:
    if not junit.is_file():
        return "the test tier left no JUnit file (it did not finish)"
    suites = ElementTree.parse(junit).getroot()
    suite = suites if suites.tag == "testsuite" else suites.find("testsuite")
    get = lambda key: int(suite.get(key, 0))  # noqa: E731
    failed = [case.get("name") for case in suite.iter("testcase") if case.find("failure") is not None
              or case.find("error") is not None]
    line = (f"{get('tests')} tests: {get('tests') - get('failures') - get('errors') - get('skipped')} passed, "
            f"{get('failures')} failed, {get('errors')} errors, {get('skipped')} skipped, {float(suite.get('time', 0)):.0f} s")
    return line + "".join(f"\n- failed: `{name}`" for name in failed)


def read_cases(path: Path) -> list:
    if not path.is_file():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def loss_table(cases: list) -> str:
    """Rows: architecture x criterion; columns: precisions; cells: first -> last loss of the few updates."""
    training = [case for case in cases if "losses" in case]
    if not training:
        return "no training case ran"
    precisions = list(dict.fromkeys(case["precision"] for case in training))
    cells = defaultdict(dict)
    for case in training:
        losses = case["losses"]
        cell = f"{losses[0]:.4g} -> {losses[-1]:.4g}" if losses else "no loss logged"
        cells[(case["arch"], case["criterion"])][case["precision"]] = cell
    lines = ["| architecture | criterion | " + " | ".join(precisions) + " |",
             "|---|---|" + "---|" * len(precisions)]
    for (arch, criterion), row in cells.items():
        lines.append(f"| {arch} | {criterion} | " + " | ".join(row.get(p, "not run") for p in precisions) + " |")
    return "\n".join(lines)


SPEED_FILES = (  # (file in speed/, heading)
    ("ops_4000.md", "A decoder step, --max-tokens 4000 (step_ops.py)"),
    ("ops_fairseq_search.md", "A beam step by fairseq's own search loop, --max-tokens 4000 (step_ops.py "
                              "--fairseq-beam-search)"),
    ("ops_foreach_adam.md", "An update of --optimizer foreach_adam (step_ops.py --passes update)"),
    ("ops_64000.md", "A training step of the decoder, --max-tokens 64000 (step_ops.py)"),
    ("baseline_ops_4000.md", "The same for the baseline tree (the code before), --max-tokens 4000"),
    ("profile_4000.txt", "Where the GPU time goes, --max-tokens 4000 (profile_step.py --profile)"),
    ("throughput_4000.txt", "End to end, --max-tokens 4000 (throughput.py)"),
    ("throughput_64000.txt", "End to end, --max-tokens 64000 (throughput.py)"),
    ("graph_ceiling.md", "The fused recurrence eager and as a CUDA graph (graph_ceiling.py)"),
    ("host_4000.txt", "Where fairseq-train's host time goes, --max-tokens 4000 (train_host_profile.py)"),
    ("host_64000.txt", "Where fairseq-train's host time goes, --max-tokens 64000 (train_host_profile.py)"),
)


def speed_sections(speed: Path) -> list:
    """The speed part's tables as they were printed (a missing one: said so)."""
    if not speed.is_dir():
        return []
    out = []
    for name, heading in SPEED_FILES:
        path = speed / name
        text = path.read_text(encoding="utf-8", errors="replace").strip() if path.is_file() else ""
        out += [f"## {heading}", "", "```", text or "(not produced: see the logs in gpu_check.tgz)", "```", ""]
    return out


def main(argv=None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1 or not Path(args[0]).is_dir():
        print("usage: gpu_report.py WORK_DIR", file=sys.stderr)
        return 2
    work = Path(args[0])
    cases = read_cases(work / "cases.jsonl")
    out = ["# GPU check", ""]
    if (work / "versions.txt").is_file():
        out += ["```", (work / "versions.txt").read_text(encoding="utf-8").strip(), "```", ""]
    if (work / "cuda-tests.log").is_file():  # the tier ran
        out += ["## The test tier (`bash scripts/test.sh --gpu`)", "", tier_counts(work / "cuda-tests.xml"), ""]
        out += ["## Losses of a few updates on CUDA", "", loss_table(cases), ""]
    for case in cases:
        if case.get("check") == "cpu_gpu_decode":
            out += [f"CPU/GPU decode agreement (fp32, beam 5, trigram blocking): {case['same']} of "
                    f"{case['documents']} documents identical.", ""]
    out += speed_sections(work / "speed")
    if (work / "paper" / "dry_run.md").is_file():
        out += ["## See et al.'s recipe at paper scale on this GPU", "",
                (work / "paper" / "dry_run.md").read_text(encoding="utf-8").strip(), ""]
    if (work / "copy_check.tsv").is_file():
        out += ["## Copying at the quickstart's budget (600 updates of scitldr_small, 618 test documents)", "",
                "| precision | markers restored | ROUGE |", "|---|---|---|"]
        for line in (work / "copy_check.tsv").read_text(encoding="utf-8").splitlines():
            out.append("| " + " | ".join(line.split("\t")) + " |")
    print("\n".join(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
