"""The paper configs train for a few updates, end to end:
- every row of Shi et al.'s Table 1 (configs/shi2018_lcsts_row*.conf): jieba preprocessing of shipped Chinese
  data, word2vec trained by scripts/train_word2vec.py, train.sh;
- the DTU report's three models (configs/dtu_*.conf) on shipped English data, with a GloVe-format file."""
import re
import sys
from pathlib import Path

import pytest

from conftest import command_env, output, run, slice_corpus

pytestmark = pytest.mark.slow  # every test runs preprocess.sh / train.sh

ROOT = Path(__file__).resolve().parent.parent
TINY = ["--max-update", "2", "--encoder-hidden-size", "16", "--decoder-hidden-size", "32", "--max-tokens", "2000"]


@pytest.fixture(scope="module")
def prepared(tmp_path_factory):
    work = tmp_path_factory.mktemp("shi2018")
    raw = slice_corpus("csl", work / "raw", (("train", 150), ("valid", 20), ("test", 20)))
    data = work / "data"
    run(["./preprocess.sh", "-c", "shi2018_lcsts", str(raw), str(data)])
    w2v = work / "w2v.bin"
    run([sys.executable, "scripts/train_word2vec.py", "--prep", str(data / "prep.json"), "--dim", "128",
         "--min-count", "1", "--epochs", "1", "--out", str(w2v)])
    return work, data, w2v


@pytest.mark.parametrize("row", [1, 2, 3, 4, 5, 6, 7])
def test_table1_row_trains(prepared, row):
    work, data, w2v = prepared
    log = output(["./train.sh", "-c", f"shi2018_lcsts_row{row}", data, work / f"row{row}", *TINY],
                 env=command_env(W2V=str(w2v)))
    assert re.search(r"num_updates[ =]2\b", log)
    assert re.search(r"valid on 'valid' subset .*\| accuracy \d", log), log[-2000:]
    report = re.search(r"pretrained embeddings \S+w2v.bin .*: found (\d+) of (\d+) dictionary words", log)
    if row in (2, 3, 5, 6, 7):  # word2vec was trained on the same text with min-count 1: every word has a vector
        assert report and report.group(1) == report.group(2), log[-2000:]
    else:
        assert report is None
    lambdas = re.findall(r"'coverage_lambda': ([\d.]+)", log)
    assert lambdas and float(lambdas[-1]) == (0.25 if row == 7 else 1.0)  # row 7: lambda scaled by alpha
    frozen = re.search(r"num\. shared model params: ([\d,]+) \(num\. trained: ([\d,]+)\)", log)
    assert frozen and (frozen.group(1) != frozen.group(2)) == (row == 3)  # only row 3 freezes the embeddings


def test_word2vec_rows_need_the_file(prepared):
    work, data, _ = prepared
    env = {k: v for k, v in command_env().items() if k != "W2V"}
    result = run(["./train.sh", "-c", "shi2018_lcsts_row2", data, work / "x", *TINY], check=False, env=env)
    assert result.returncode != 0 and "W2V" in result.stderr


@pytest.mark.parametrize("model, copy, coverage", [("baseline", False, False), ("pointer", True, False),
                                                   ("coverage", True, True)])
def test_dtu_models_train_with_glove(tmp_path_factory, model, copy, coverage):
    work = tmp_path_factory.getbasetemp() / "dtu"
    data = work / "data"
    if not (data / "bin" / "dict.src.txt").exists():
        raw = slice_corpus("scitldr", work / "raw", (("train", 120), ("valid", 10), ("test", 10)))
        run(["./preprocess.sh", "-c", "dtu_common", str(raw), str(data)])
        words = [line.split()[0] for line in (data / "dict.txt").read_text(encoding="utf-8").splitlines()]
        vectors = [f"{w} " + " ".join(f"{(i * 7 + j) % 13 / 13:.3f}" for j in range(128))
                   for i, w in enumerate(words) if not w.startswith("<oov-")][:500]
        (work / "glove.txt").write_text("\n".join(vectors) + "\n", encoding="utf-8")
    log = output(["./train.sh", "-c", f"dtu_{model}", data, work / model, *TINY],
                 env=command_env(GLOVE=str(work / "glove.txt")))
    assert re.search(r"num_updates[ =]2\b", log)
    assert f"copy={copy}, coverage={coverage}" in log
    assert re.search(r"pretrained embeddings \S+glove.txt \(glove, 500 vectors .*found 500 of", log), log[-2000:]
