"""summ-prepare's report: the truncation warning (build and apply mode), the lower-casing prep.json records, and
preprocess.sh's fairseq-preprocess log."""
import json

import pytest

from conftest import ROOT, run as run_command
from fairseq_plugins.cli import prepare
from fairseq_plugins.text import prepare as prepare_lib

LIMITS = ["--max-source-len", "12", "--max-target-len", "30"]


def words(n, word="Word"):
    """A document of ``n`` word tokens."""
    return " ".join([word] * n)


def write(path, documents):
    path.write_text("".join(doc + "\n" for doc in documents), encoding="utf-8")


def raw_corpus(raw):
    """train: targets of 1..40 tokens (10 of 40 over 30); valid: 1 of 20 targets over 30 (5 %: no warning);
    test: 3 of 20 sources over 12 tokens (20, 25, 30 tokens).  Every other source has at most 10 tokens."""
    raw.mkdir()
    write(raw / "train.src", [f"The Cat sat on the Mat {words(i % 3)}" for i in range(40)])
    write(raw / "train.tgt", [words(n) for n in range(1, 41)])
    write(raw / "valid.src", [words(10, "Cat")] * 20)
    write(raw / "valid.tgt", [words(10)] * 19 + [words(50)])
    write(raw / "test.src", [words(10, "Mat")] * 17 + [words(n, "Mat") for n in (20, 25, 30)])
    write(raw / "test.tgt", [words(5)] * 20)
    return raw


def prepare_cli(argv, capsys):
    """summ-prepare in-process: its stderr (asserting exit status 0)."""
    capsys.readouterr()
    status = prepare.main([str(a) for a in argv])
    err = capsys.readouterr().err
    assert status == 0, err
    return err


@pytest.fixture
def built(tmp_path, capsys):
    """(output directory, stderr) of summ-prepare on raw_corpus with --unit word."""
    raw = raw_corpus(tmp_path / "raw")
    err = prepare_cli(["--raw-dir", raw, "--output-dir", tmp_path / "out", "--unit", "word", *LIMITS], capsys)
    return tmp_path / "out", err


def warnings(err, split):
    return [line for line in err.splitlines() if line.startswith(f"summ-prepare: {split}: warning:")]


def test_percentile_is_the_length_that_keeps_that_share_whole():
    assert prepare_lib.percentile(list(range(1, 101)), 95) == 95
    assert prepare_lib.percentile(list(range(1, 41)), 95) == 38 and prepare_lib.percentile(list(range(1, 41)), 99) == 40
    assert prepare_lib.percentile([7], 99) == 7 and prepare_lib.percentile([], 95) == 0


def test_build_warns_when_more_than_5_percent_are_truncated(built):
    _, err = built
    assert "targets truncated to 30 tokens: 10 (25.00%; longest 40)" in err  # the report line is unchanged
    assert warnings(err, "train") == [
        "summ-prepare: train: warning: 10 of 40 targets (25.00%) are cut at 30 tokens; 38 tokens would keep 95% "
        "of them whole, 40 tokens 99% (longest 40): raise --max-target-len (preprocess.sh: in the config's "
        "PREP_ARGS)"]
    assert warnings(err, "test") == [
        "summ-prepare: test: warning: 3 of 20 sources (15.00%) are cut at 12 tokens; 25 tokens would keep 95% "
        "of them whole, 30 tokens 99% (longest 30): raise --max-source-len (preprocess.sh: in the config's "
        "PREP_ARGS)"]
    assert "targets truncated to 30 tokens: 1 (5.00%; longest 50)" in err
    assert warnings(err, "valid") == []  # 5 % exactly: no warning


def test_no_warning_without_a_limit(tmp_path, capsys):
    raw = raw_corpus(tmp_path / "raw")
    err = prepare_cli(["--raw-dir", raw, "--output-dir", tmp_path / "out", "--unit", "word", "--max-source-len",
                       "0", "--max-target-len", "0", "--num-markers", "20"], capsys)
    assert "are cut at" not in err


def test_prep_json_records_the_lowercasing_of_word_units(built, tmp_path, capsys):
    out, err = built
    assert json.loads((out / "prep.json").read_text())["settings"]["lowercase"] is True
    assert "lowercase=True" in err
    assert (out / "tok" / "train.src").read_text().startswith("the cat sat on the mat\n")
    # generation time tokenizes as the build did
    prepare_cli(["--apply", out / "prep.json", "--input", tmp_path / "raw" / "train.src", "--output-prefix",
                 tmp_path / "again"], capsys)
    assert (tmp_path / "again.src").read_text() == (out / "tok" / "train.src").read_text()
    err = prepare_cli(["--raw-dir", tmp_path / "raw", "--output-dir", tmp_path / "keep", "--unit", "keep",
                       *LIMITS], capsys)
    assert json.loads((tmp_path / "keep" / "prep.json").read_text())["settings"]["lowercase"] is False
    assert "lowercase=False" in err


def test_apply_warns_about_documents_longer_than_the_model_reads(built, tmp_path, capsys):
    out, _ = built
    write(tmp_path / "new.txt", [words(20)] * 4 + [words(3)] * 6)
    err = prepare_cli(["--apply", out / "prep.json", "--input", tmp_path / "new.txt", "--output-prefix",
                       tmp_path / "new"], capsys)
    assert f"summ-prepare: {tmp_path / 'new.txt'}: warning: 4 of 10 documents (40.00%) are longer than the " \
           "model's max_source_len (12 tokens): it reads only their first 12 tokens" in err
    write(tmp_path / "few.txt", [words(20)] + [words(3)] * 24)  # 4 %
    err = prepare_cli(["--apply", out / "prep.json", "--input", tmp_path / "few.txt", "--output-prefix",
                       tmp_path / "few"], capsys)
    assert "sources truncated to 12 tokens: 1 (4.00%" in err and "warning" not in err


@pytest.mark.slow
def test_preprocess_sh_logs_fairseq_preprocess_to_a_file(tmp_path):
    raw = raw_corpus(tmp_path / "raw")
    config = tmp_path / "tiny.conf"
    config.write_text(f"PREP_ARGS=(--lang en --unit word --vocab-size 100 {' '.join(LIMITS)})\n")
    data = tmp_path / "data"
    result = run_command([ROOT / "preprocess.sh", "-c", config, raw, data])
    shown = result.stdout + result.stderr
    assert "Namespace(" not in shown and "| INFO |" not in shown
    assert f"its messages: {data}/preprocess.log" in result.stderr
    assert "Namespace(" in (data / "preprocess.log").read_text()
    assert "train: warning: 10 of 40 targets (25.00%)" in result.stderr
    assert (data / "bin" / "train.src-tgt.src.bin").is_file()
    failed = run_command([ROOT / "preprocess.sh", "-c", config, raw, data, "--no-such-option"], check=False)
    assert failed.returncode != 0
    assert "unrecognized arguments: --no-such-option" in failed.stderr  # the end of the log, shown
    assert f"fairseq-preprocess failed (exit status {failed.returncode}); its whole log: {data}/preprocess.log" \
        in failed.stderr


def test_apply_whole_keeps_every_token_and_cases_as_the_build_did(built, tmp_path, capsys):
    """--whole: text to analyse as the model's input is tokenized (references for summ-analyze), every token
    kept; only an apply-mode option."""
    out, _ = built
    write(tmp_path / "refs.txt", [f"The Cat {words(18)}", "The Mat"])
    err = prepare_cli(["--apply", out / "prep.json", "--input", tmp_path / "refs.txt", "--output-prefix",
                       tmp_path / "refs", "--whole"], capsys)
    lines = (tmp_path / "refs.src").read_text().splitlines()
    assert [len(line.split()) for line in lines] == [20, 2]  # not cut at max_source_len (12)
    assert lines[1] == "the mat" and "warning" not in err  # lower-cased as the build's word units were
    capsys.readouterr()
    with pytest.raises(SystemExit):
        prepare.main(["--raw-dir", str(tmp_path), "--output-dir", str(tmp_path / "o"), "--whole"])
    assert "--whole is an apply-mode option" in capsys.readouterr().err


# ----------------------------------------------------------------------------------------------- decoding lengths
def test_the_training_targets_lengths_are_recorded_and_contradicting_bounds_are_named(tmp_path, capsys):
    """train targets of 1..40 tokens, cut at 30: percentiles of the lengths the model learns; --min-len above the
    25th percentile and --max-len-b below the 99th are each named with the figures, bounds that fit are not."""
    from fairseq_plugins.cli import length_fit
    from fairseq_plugins.runtime.length_fit import length_warnings

    raw = raw_corpus(tmp_path / "raw")
    prepare_cli(["--raw-dir", raw, "--out-dir", tmp_path / "data", "--lang", "en", "--unit", "word", *LIMITS], capsys)
    lengths = json.loads((tmp_path / "data" / "prep.json").read_text())["target_lengths"]
    assert lengths == {"p1": 1, "p5": 2, "p25": 10, "p50": 20, "p75": 30, "p95": 30, "p99": 30, "max": 30}
    assert length_warnings(lengths, min_len=10, max_len_b=30) == [] == length_warnings(None, min_len=99)
    assert length_warnings(lengths, min_len=5, max_len_a=1.5, max_len_b=3) == []  # b is not the bound with a > 0
    low, high = length_warnings(lengths, min_len=11, max_len_b=29)
    assert low.startswith("--min-len 11 is above the length of a quarter of the training summaries (25th percentile "
                          "10 tokens, median 20)") and low.endswith("(e.g. --min-len 10) fits the data")
    assert high.startswith("--max-len-b 29 is below the length of the longest 1 % of the training summaries (99th "
                           "percentile 30 tokens, longest 30)")
    capsys.readouterr()
    assert length_fit.main([str(tmp_path / "data" / "prep.json"), "--prog", "generate.sh", "--beam", "5",
                            "--min-len", "5", "--max-len-b", "60", "--min-len", "12"]) == 0
    assert capsys.readouterr().err.startswith("generate.sh: warning: --min-len 12 is above")
    assert length_fit.main([str(tmp_path / "missing.json")]) == 2
