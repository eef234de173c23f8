"""End to end on the shipped SciTLDR-A sample: preprocess -> train a few updates -> generate -> ROUGE,
through the shell scripts and through the plain fairseq binaries with --user-dir."""
import re
from pathlib import Path

import pytest

from conftest import run, slice_corpus

pytestmark = pytest.mark.slow  # every test runs the shell scripts or the fairseq binaries

ROOT = Path(__file__).resolve().parent.parent
USER_DIR = str(ROOT / "fairseq_plugins")
FEW_UPDATES = ["--max-update", "6", "--max-tokens", "3000"]


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A few-update pgn_lstm_small on a slice of data/scitldr, trained through the shell scripts."""
    work = tmp_path_factory.mktemp("e2e")
    raw = slice_corpus("scitldr", work / "raw", (("train", 300), ("valid", 30), ("test", 25)))
    data, model = work / "data", work / "model"
    run(["./preprocess.sh", str(raw), str(data)])
    train = run(["./train.sh", str(data), str(model), *FEW_UPDATES])
    log = train.stdout + train.stderr  # fairseq logs to stdout
    assert re.search(r"num_updates[ =]6\b", log), log[-3000:]
    # the command line's --max-update replaces the config's budget in epochs, and the run says it stopped short
    assert "'max_epoch': 0," in (model / "train.log").read_text(encoding="utf-8")
    assert "scitldr_small is tuned for 10 epochs" in train.stderr
    return work, data, model


def test_generate_split_and_score_through_scripts(trained):
    work, data, model = trained
    out = work / "test.summaries"
    result = run(["./generate.sh", "--split", "test", "--score", "--output", str(out), str(data), str(model)])
    summaries = out.read_text(encoding="utf-8").split("\n")
    assert summaries[-1] == "" and len(summaries) - 1 == 25  # one line per test document
    assert any(line.strip() for line in summaries)
    assert re.search(r"ROUGE-1\s.*\d+\.\d+", result.stderr), result.stderr[-2000:]
    # then summ-analyze's summary against the source the model read, the reference as a second column
    assert re.search(r"summ-analyze \| 25 documents \| lang=en", result.stderr), result.stderr[-2000:]
    assert re.search(r"^novel 2-grams %\s+[\d.]+ \([\d.]+\)\s+[\d.]+ \([\d.]+\)$", result.stderr, re.M)
    assert not any(marker in "".join(summaries) for marker in ("<oov-", "</s>"))


def test_generate_raw_text_one_line_per_document(trained, tmp_path):
    """Empty, marker-like, very long, one-word, repeated-word and control-character documents each get exactly
    one summary, in order; the config's decoding repeats no trigram (an undertrained model would otherwise echo
    "hello hello hello ..."), and no summary holds a control character."""
    _, data, model = trained
    docs = [
        "we propose a new method for training neural networks with sparse gradients .",
        "",
        "the <oov-3> token and </s> appear here literally , with a zyxwvut word .",
        " ".join(["lorem"] * 50_000),
        "hello",
        "table table table table table table table table",
        "nul\0 inside zyxwvut\x07 . \u202ereversed\u202c",
        "a final short document .",
    ]
    (tmp_path / "docs.txt").write_text("\n".join(docs) + "\n", encoding="utf-8")
    result = run(["./generate.sh", "--input", str(tmp_path / "docs.txt"), str(data), str(model)])
    assert result.stdout.count("\n") == len(docs)
    assert "truncat" in result.stderr.lower()  # the 50,000-token document was truncated, and it says so
    assert "4 control or invisible characters" in result.stderr
    summaries = result.stdout.split("\n")[:-1]
    assert not any(ch in result.stdout for ch in "\0\x07\u202e\u202c")
    for summary in summaries:
        tokens = summary.split()
        trigrams = [tuple(tokens[i:i + 3]) for i in range(len(tokens) - 2)]
        assert len(trigrams) == len(set(trigrams)), summary
    unblocked = run(["./generate.sh", "--input", str(tmp_path / "docs.txt"), str(data), str(model),
                     "--block-ngram-repeat", "0"]).stdout.split("\n")[:-1]
    assert any(len(s.split()) > 2 + len(set(s.split())) for s in unblocked)  # the test has something to block


def test_plain_fairseq_binaries_with_user_dir(trained, tmp_path):
    _, data, _ = trained
    save = tmp_path / "ckpt"
    train = run(["fairseq-train", str(data / "bin"), "--user-dir", USER_DIR, "--task", "summarization",
                 "--arch", "pgn_lstm_small", "--criterion", "focal_copy_coverage", "--optimizer", "adam",
                 "--lr", "0.002", "--save-dir", str(save), "--no-epoch-checkpoints", *FEW_UPDATES,
                 "--eval-accuracy", "--best-checkpoint-metric", "accuracy", "--maximize-best-checkpoint-metric"])
    # Validation summarized the 30 validation documents and logged eq 17's accuracy; best = highest accuracy.
    log = train.stdout + train.stderr
    assert re.search(r"valid on 'valid' subset .*\| accuracy \d+(\.\d+)? \|", log), log[-3000:]
    checkpoint = save / "checkpoint_last.pt"
    assert checkpoint.exists() and (save / "checkpoint_best.pt").exists()
    generated = run(["fairseq-generate", str(data / "bin"), "--user-dir", USER_DIR, "--task", "summarization",
                     "--path", str(checkpoint), "--gen-subset", "test", "--beam", "5", "--max-len-b", "30",
                     "--batch-size", "8", "--scoring", "rouge"])
    assert len(re.findall(r"^H-\d+\t", generated.stdout, flags=re.M)) == 25  # not 24: no batch is dropped
    assert re.search(r"ROUGE F1 .*R-1 \d+\.\d+ R-2 \d+\.\d+ R-L \d+\.\d+", generated.stdout + generated.stderr)

    interactive = run(["fairseq-interactive", str(data / "bin"), "--user-dir", USER_DIR, "--task", "summarization",
                       "--path", str(checkpoint), "--beam", "2", "--max-len-b", "20", "-s", "src", "-t", "tgt",
                       "--input", str(data / "tok" / "valid.src")])
    assert len(re.findall(r"^H-\d+\t", interactive.stdout, flags=re.M)) == 30


def test_scripts_fail_fast_on_bad_input(tmp_path):
    raw = tmp_path / "raw"
    raw.mkdir()
    for split in ("valid", "test"):
        (raw / f"{split}.src").write_text("a document .\n", encoding="utf-8")
        (raw / f"{split}.tgt").write_text("a summary .\n", encoding="utf-8")
    (raw / "train.src").write_text("one document .\ntwo documents .\n", encoding="utf-8")
    (raw / "train.tgt").write_text("one summary .\n", encoding="utf-8")
    result = run(["./preprocess.sh", raw, tmp_path / "data"], check=False)
    assert result.returncode != 0
    assert "train.src" in result.stderr and "train.tgt" in result.stderr
    missing = run(["./generate.sh", tmp_path / "nope", tmp_path / "nope"], check=False)
    assert missing.returncode != 0 and "checkpoint not found" in missing.stderr
