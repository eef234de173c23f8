"""scripts/rouge_significance.py: the paired bootstrap over summ-rouge's per-document scores."""
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from conftest import command_env
from scripts import rouge_significance

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "rouge_significance.py"

HEADER = "doc\trouge-1-f\trouge-1-p\trouge-1-r\trouge-2-f\trouge-2-p\trouge-2-r\trouge-l-f\trouge-l-p\trouge-l-r\n"


def per_doc(path, f1_rows):
    """A summ-rouge --per-doc TSV whose P and R equal F1."""
    lines = [f"{i}\t" + "\t".join(f"{f:.5f}\t{f:.5f}\t{f:.5f}" for f in row) for i, row in enumerate(f1_rows)]
    path.write_text(HEADER + "\n".join(lines) + "\n", encoding="utf-8")
    return path


def run(*args):
    return subprocess.run([sys.executable, str(SCRIPT), *map(str, args)], capture_output=True, text=True,
                          env=command_env())


def test_paired_bootstrap_by_hand():
    """A constant gain is significant whatever the resample; a zero difference never is; the interval of a
    two-valued difference lies inside its values and the mean is the plain mean."""
    a = np.array([[0.1, 0.2, 0.3], [0.4, 0.5, 0.6], [0.2, 0.2, 0.2]])
    delta, low, high, not_better = rouge_significance.paired_bootstrap(a, a + 0.05, 2000, seed=3)
    assert np.allclose(delta, 0.05) and np.allclose(low, 0.05) and np.allclose(high, 0.05)
    assert (not_better == 0).all()
    delta, _, _, not_better = rouge_significance.paired_bootstrap(a, a, 2000, seed=3)
    assert (delta == 0).all() and (not_better == 1).all()
    b = a + np.array([[0.1], [-0.1], [0.1]])  # two documents gain 0.1, one loses 0.1
    delta, low, high, not_better = rouge_significance.paired_bootstrap(a, b, 20000, seed=3)
    assert np.allclose(delta, 0.1 / 3)
    assert (low >= -0.1 - 1e-9).all() and (high <= 0.1 + 1e-9).all() and (low < delta).all()
    # B <= A when the resample has at least as many losing as gaining documents: 7/27 of the 27 equally likely draws
    assert np.allclose(not_better, 7 / 27, atol=0.01)


@pytest.mark.slow
def test_cli_on_real_summ_rouge_output(tmp_path):
    """summ-rouge --per-doc on two systems, then the script: its B - A equals the difference of summ-rouge's
    exact means over documents."""
    refs = tmp_path / "refs.txt"
    refs.write_text("the cat sat on the mat .\na dog barked at the red car .\nrain fell all day in the city .\n")
    hyps = {"a": "the cat sat .\na dog at night .\nsun all day .\n",
            "b": "the cat sat on a mat .\na dog barked at a car .\nrain fell all day .\n"}
    means = {}
    for name, text in hyps.items():
        (tmp_path / f"{name}.txt").write_text(text)
        out = subprocess.run([Path(sys.executable).parent / "summ-rouge", "--refs", refs, "--hyps",
                              tmp_path / f"{name}.txt", "--per-doc", tmp_path / f"{name}.tsv"],
                             capture_output=True, text=True, check=True).stdout
        means[name] = [float(x) for x in re.search(
            r"exact\): ROUGE-1 ([\d.]+) ROUGE-2 ([\d.]+) ROUGE-L ([\d.]+)", out).groups()]
    result = run(tmp_path / "a.tsv", tmp_path / "b.tsv", "--resamples", "500")
    assert result.returncode == 0, result.stderr
    for metric, mean_a, mean_b in zip(("ROUGE-1", "ROUGE-2", "ROUGE-L"), means["a"], means["b"]):
        delta = float(re.search(rf"^{metric} +([+-][\d.]+) ", result.stdout, re.M).group(1))
        assert abs(delta - (mean_b - mean_a)) < 0.02, (metric, delta, mean_a, mean_b)
        assert delta > 10  # b is far closer to the references


@pytest.mark.slow
def test_bad_input_names_the_file_and_line(tmp_path):
    a = per_doc(tmp_path / "a.tsv", [[0.1, 0.1, 0.1], [0.2, 0.2, 0.2]])
    short = per_doc(tmp_path / "short.tsv", [[0.1, 0.1, 0.1]])
    result = run(a, short)
    assert result.returncode != 0 and f"{a} has 2 documents and {short} 1" in result.stderr
    broken = tmp_path / "broken.tsv"
    broken.write_text(HEADER + "0\t0.1\t0.1\t0.1\t0.1\t0.1\t0.1\t0.1\t0.1\t0.1\n1\t0.2\tnope\n", encoding="utf-8")
    result = run(a, broken)
    assert result.returncode != 0 and f"{broken}:3: bad per-document line" in result.stderr
    plain = tmp_path / "plain.txt"
    plain.write_text("a summary, not scores\n", encoding="utf-8")
    result = run(a, plain)
    assert result.returncode != 0 and f"{plain}:1: not a summ-rouge --per-doc table" in result.stderr
