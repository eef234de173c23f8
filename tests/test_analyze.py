"""summ-analyze (fairseq_plugins/scoring/summary_stats.py; its command, cli/analyze.py): every figure
on hand-made pairs with known answers, the command's errors, and the experiment tables' use of the same code
(scripts/experiments/lib.py)."""
import json
import re
from pathlib import Path

import pytest

from fairseq_plugins.cli import analyze as command
from fairseq_plugins.scoring import summary_stats as ab
from scripts.experiments import lib


def figures(sources, summaries, lang="en", lower=False):
    return ab.analyze(sources, {"sys": summaries}, lang, lower)["sys"]


def pooled(result, key):
    return result[key]["pooled"]


# ---------------------------------------------------------------------------------------------- one pair
def test_novel_ngrams_count_repeats_and_run_across_sentences():
    counts = ab.document_counts("a b c d", "a b x d")
    assert [counts[f"novel_{n}grams"] for n in (1, 2, 3, 4)] == [(1, 4), (2, 3), (2, 2), (1, 1)]
    # with repeats: "x" twice is two novel unigrams; the bigram "b c" spans the sentence end
    counts = ab.document_counts("a b c", "x x . <q> b c")
    assert counts["novel_1grams"] == (3, 5)  # x x . are novel; b c are not (the <q> separator is no token)
    assert counts["novel_2grams"] == (3, 4)  # "x x", "x .", ". b" novel; "b c" not


def test_source_shorter_than_n_makes_every_ngram_novel():
    counts = ab.document_counts("a b", "a b a")
    assert counts["novel_2grams"] == (1, 2)
    assert counts["novel_3grams"] == (1, 1)  # the source has no trigram at all
    assert counts["novel_4grams"] == (0, 0)  # nor has the summary a 4-gram: undefined, not 0 %


def test_summary_equal_to_its_source():
    text = "the cat sat . the dog ran ."
    result = figures([text], [text])
    for n in range(1, 5):
        assert pooled(result, f"novel_{n}grams") == 0
    assert pooled(result, "copied_sentences") == 100
    assert pooled(result, "coverage") == 1
    assert pooled(result, "density") == 8  # one fragment of all 8 tokens: 8^2 / 8
    assert pooled(result, "compression") == 1
    assert pooled(result, "repeated_trigrams") == 0
    assert pooled(result, "sentences") == 2 and pooled(result, "tokens") == 8


def test_copied_sentences_need_a_contiguous_span_of_whole_tokens():
    source = "police said the man was arrested . he was 42 ."
    counts = ab.document_counts(source, "the man was arrested . police said he was 42 . he was .")
    assert counts["copied_sentences"] == (1, 3)  # "police said he was 42 ." is not contiguous; "he was ." neither
    assert ab.document_counts(source, "a man was arrested .")["copied_sentences"] == (0, 1)  # "a" is not "the"
    assert ab.document_counts("xman was", "man was")["copied_sentences"] == (0, 1)  # a token, not a substring


def test_fragments_follow_grusky_greedy_scan():
    # first the longest match from each summary position; nothing for a token the article lacks
    assert ab.fragments("a b c d e a b c".split(), "a b c d x a b".split()) == [
        ab.Fragment(0, 0, 4), ab.Fragment(5, 0, 2)]
    # the scan goes on after the end of a match, so the longer match starting inside it (j = 1) is never tried
    assert ab.fragments("a a a b".split(), "a a b".split()) == [ab.Fragment(0, 0, 2), ab.Fragment(2, 3, 1)]
    counts = ab.document_counts("a b c d e a b c", "a b c d x a b")
    assert counts["coverage"] == (6, 7) and counts["density"] == (20, 7) and counts["compression"] == (8, 7)


def test_repeated_trigrams_count_each_repeat_of_an_earlier_one():
    assert ab.repeated_trigrams("a b c a b c a b c".split()) == (4, 7)  # abc twice more, bca and cab once more
    assert ab.repeated_trigrams("a b".split()) == (0, 0)


def test_empty_summary():
    result = figures(["a b c", "a b c"], ["", "a b z"])
    assert pooled(result, "empty") == 50
    assert pooled(result, "tokens") == 1.5 and pooled(result, "sentences") == 0.5
    assert pooled(result, "novel_1grams") == pytest.approx(100 / 3)  # the empty summary adds no unigram
    assert result["novel_1grams"]["doc_mean"] == pytest.approx(100 / 3)  # nor a document to the mean
    assert pooled(result, "compression") == 1  # the empty summary's document is left out: 3 / 3
    alone = figures(["a b c"], [""])
    assert pooled(alone, "novel_1grams") is None and pooled(alone, "coverage") is None


def test_pooled_and_document_mean_differ_by_summary_length():
    result = figures(["a b c d", "a b c d"], ["a x", "a b c d"])  # 1 of 2 novel, 0 of 4 novel
    assert pooled(result, "novel_1grams") == pytest.approx(100 / 6)
    assert result["novel_1grams"]["doc_mean"] == pytest.approx(25)


def test_chinese_counts_characters():
    counts = ab.document_counts("今天 天气 很好", "今天很热", "zh")
    assert counts["novel_1grams"] == (1, 4)  # 热
    assert counts["novel_2grams"] == (2, 3)  # 天很 and 很热 are not in 今天天气很好
    assert counts["tokens"] == (4, 1) and counts["sentences"] == (1, 1)
    assert counts["copied_sentences"] == (0, 1)
    assert ab.document_counts("我们 今天 很好", "今天很好", "zh")["copied_sentences"] == (1, 1)
    assert ab.document_counts("今天 天气 很好", "今天很热")["tokens"] == (1, 1)  # English: one whitespace token


def test_immediate_repeats_and_a_doubled_first_token():
    """The stutter of an undertrained decoder is in the table beside the repeated trigrams."""
    summaries = ["title title policy", "a b c", "x y y y", "", "solo"]
    figures = ab.aggregate([ab.summary_counts(s) for s in summaries])
    assert figures["immediate_repeats"]["pooled"] == pytest.approx(100 * 3 / 7)  # 1 of 2, 0 of 2, 2 of 3
    assert figures["immediate_repeats"]["doc_mean"] == pytest.approx(100 * (1 / 2 + 0 + 2 / 3) / 3)
    assert figures["with_immediate_repeat"]["pooled"] == pytest.approx(100 * 2 / 5)
    assert figures["doubled_first"]["pooled"] == pytest.approx(100 * 1 / 5)
    assert ab.summary_counts("a . <q> a b")["immediate_repeats"] == (0, 3)  # the separator is no token
    quoted = ab.summary_counts("` ` bye , bye ' ' . .")  # PTB quotes and repeated punctuation are no stutter
    assert quoted["immediate_repeats"] == (0, 8) and quoted["doubled_first"] == (0.0, 1)
    assert ab.summary_counts("好好 学习")["immediate_repeats"] == (0, 1)
    assert ab.summary_counts("7 7 ok")["doubled_first"] == (1.0, 1)  # a number is a word
    report = ab.format_report({"system": figures}, 5, "en")
    assert re.search(r"^immediate repeats %\s+42\.86 \(", report, re.M)
    assert re.search(r"^doubled first token %\s+20\.00$", report, re.M)


def test_lower_case_option():
    assert ab.document_counts("The Cat", "the cat")["novel_1grams"] == (2, 2)
    assert ab.document_counts("The Cat", "the cat", lower=True)["novel_1grams"] == (0, 2)


# ---------------------------------------------------------------------------------------------- the experiment tables
def test_lib_repetition_is_the_shared_definition():
    summaries = ["a b c a b c", "x y", ""]
    shared = ab.aggregate([ab.summary_counts(s) for s in summaries])
    assert lib.repetition(summaries, "en") == {"repeated_trigrams": shared["repeated_trigrams"]["pooled"],
                                               "with_repeat": shared["with_repeat"]["pooled"],
                                               "mean_length": shared["tokens"]["pooled"]}
    # a sentence separator is no token: "c . <q> a" gives no trigram of its own
    assert lib.repetition(["a b c . <q> a b c ."], "en")["repeated_trigrams"] == pytest.approx(100 * 2 / 6)


def test_lib_read_lines_keeps_a_last_line_without_newline(tmp_path):
    path = tmp_path / "x.txt"
    path.write_text("one\ntwo", encoding="utf-8")
    assert lib.read_lines(path) == ["one", "two"]


def test_lib_abstraction_columns():
    row = lib.abstraction(["a b c . d e f .", "a b"], ["a b c . x y .", "a b"], "en")
    assert row == {"novel_2grams": pytest.approx(100 * 3 / 7), "copied_sentences": pytest.approx(100 * 2 / 3)}


# ---------------------------------------------------------------------------------------------- command line
def write(path, lines):
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return str(path)


def run_main(argv, capsys):
    status = command.main([str(a) for a in argv])
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def test_cli_prints_every_figure_and_writes_json(tmp_path, capsys):
    src = write(tmp_path / "src.txt", ["a b c d .", "e f g ."])
    hyp = write(tmp_path / "pgn.txt", ["a b c d .", "e f x ."])
    ref = write(tmp_path / "ref.txt", ["z z z .", "e f g ."])
    status, out, err = run_main(["--source", src, "--hyp", hyp, "--ref", ref, "--json", tmp_path / "a.json"],
                                capsys)
    assert status == 0, err
    assert "pooled over the corpus" in out and "pgn" in out and "reference" in out
    for fig in ab.FIGURES:
        assert fig.label in out
    data = json.loads((tmp_path / "a.json").read_text(encoding="utf-8"))
    assert data["documents"] == 2
    assert data["systems"]["pgn"]["copied_sentences"]["pooled"] == 50
    assert data["systems"]["reference"]["novel_1grams"]["pooled"] == pytest.approx(100 * 3 / 8)


def test_cli_names_the_file_and_line_when_line_counts_differ(tmp_path, capsys):
    src = write(tmp_path / "src.txt", ["a", "b", "c"])
    hyp = write(tmp_path / "hyp.txt", ["a", "b"])
    status, _, err = run_main(["--source", src, "--hyp", hyp], capsys)
    assert status == 2
    assert "hyp.txt has 2 lines" in err and "line 3 of" in err and "src.txt" in err


def test_cli_missing_file(tmp_path, capsys):
    src = write(tmp_path / "src.txt", ["a"])
    status, _, err = run_main(["--source", src, "--hyp", tmp_path / "nope.txt"], capsys)
    assert status == 2 and "nope.txt: no such file" in err


def test_cli_invalid_utf8_names_file_and_line(tmp_path, capsys):
    src = write(tmp_path / "src.txt", ["a", "b"])
    hyp = tmp_path / "hyp.txt"
    hyp.write_bytes(b"a\n\xff\n")
    status, _, err = run_main(["--source", src, "--hyp", hyp], capsys)
    assert status == 2 and "hyp.txt:2: invalid UTF-8" in err


def test_help_states_the_definitions(capsys):
    with pytest.raises(SystemExit):
        command.main(["--help"])
    out = capsys.readouterr().out
    for phrase in ("Novel n-grams", "Copied sentences", "Grusky", "Coverage", "Repeated trigrams",
                   "pooled over the corpus", "per-document mean"):
        assert phrase in out


# ---------------------------------------------------------------------------------------------- pictures
def test_plot_and_page(tmp_path, capsys):
    src = write(tmp_path / "src.txt", ["the <b>cat</b> sat on the mat .", "dogs bark ."])
    hyp = write(tmp_path / "pgn.txt", ["the <b>cat</b> sat on the mat .", "cats meow ."])
    ref = write(tmp_path / "ref.txt", ["a cat sat .", "dogs bark loudly ."])
    png, page = tmp_path / "f.png", tmp_path / "p.html"
    status, _, err = run_main(["--source", src, "--hyp", hyp, "--ref", ref, "--plot", png, "--html", page], capsys)
    assert status == 0, err
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    html = page.read_text(encoding="utf-8")
    assert "<script" not in html and "http" not in html.replace("http-equiv", "")  # self-contained
    assert "&lt;b&gt;cat&lt;/b&gt;" in html and "<b>cat</b>" not in html  # text escaped
    assert 'id="doc-1"' in html and 'id="doc-2"' in html and 'href="#doc-2"' in html  # paging
    assert html.count('class="frag s0"') >= 1  # pgn's copied fragment marked in its colour


# ---------------------------------------------------------------------------------------------- units
def test_detokenized_summaries_against_a_tokenized_source_get_a_warning(tmp_path, capsys):
    src = write(tmp_path / "src.txt", ["the model ( a gru ) did not win , sadly .", "it won , then ( oddly ) lost ."])
    detok = write(tmp_path / "detok.txt", ["the model (a gru) did not win, sadly.", "it won, then lost."])
    tokens = write(tmp_path / "tokens.txt", ["the model ( a gru ) did not win , sadly .", "it won , then lost ."])
    status, _, err = run_main(["--source", src, "--hyp", detok, "--hyp", tokens], capsys)
    assert status == 0
    assert "detok.txt looks detokenized" in err and "--prep DATA/prep.json" in err
    assert "tokens.txt" not in err


def test_prep_tokenizes_every_text_as_the_models_source(tmp_path, capsys):
    """Raw text and detokenized summaries, through --prep, give the figures of the same texts in the model's
    units (lower-cased word tokens, the source cut at --max-source-len as the model read it)."""
    from fairseq_plugins.cli.prepare import main as prepare

    raw = tmp_path / "raw"
    raw.mkdir()
    for split in ("train", "test"):
        write(raw / f"{split}.src", ["The Model (a GRU) did not win, sadly. It lost to Smallville.", "It won, then lost."])
        write(raw / f"{split}.tgt", ["The GRU lost.", "It won."])
    assert prepare(["--raw-dir", str(raw), "--out-dir", str(tmp_path / "data"), "--unit", "word",
                    "--max-source-len", "12", "--splits", "train,test"]) == 0
    capsys.readouterr()
    hyp = write(tmp_path / "hyp.txt", ["The model (a GRU) lost to Smallville.", "It won, then lost."])
    prep = tmp_path / "data" / "prep.json"
    status, prepared_report, err = run_main(["--prep", prep, "--source", raw / "test.src", "--hyp", hyp, "--ref",
                                             raw / "test.tgt"], capsys)
    assert status == 0 and "warning" not in err
    src = write(tmp_path / "src.txt", ["the model ( a gru ) did not win , sadly .", "it won , then lost ."])
    tokens = write(tmp_path / "hyp_tokens.txt", ["the model ( a gru ) lost to smallville .", "it won , then lost ."])
    ref = write(tmp_path / "ref.txt", ["the gru lost .", "it won ."])
    status, by_hand, _ = run_main(["--source", src, "--hyp", tokens, "--name", "hyp", "--ref", ref], capsys)
    assert prepared_report == by_hand
    first = ab.analyze(["the model ( a gru ) did not win , sadly ."], {"ref": ["the gru lost ."]})["ref"]
    assert first["novel_1grams"]["pooled"] == 25  # "lost" is beyond the 12 tokens the model read: novel
    _, systems, _ = ab.prepared(prep, [], {"lead": ["The GRU won. <q> It lost, sadly."]})
    assert systems["lead"] == ["the gru won . <q> it lost , sadly ."]  # the separators of LEAD-k kept
    raw_sources = (raw / "test.src").read_text().splitlines()
    assert lib.abstraction(raw_sources, ["The model (a GRU) lost. <q> It won.", "It won."], "en", Path(prep)) == \
        lib.abstraction(Path(src).read_text().splitlines(), ["the model ( a gru ) lost . <q> it won .", "it won ."],
                        "en")


def test_prep_that_is_not_a_prep_json_is_a_clear_error(tmp_path, capsys):
    src = write(tmp_path / "src.txt", ["a b"])
    status, _, err = run_main(["--prep", tmp_path / "src.txt", "--source", src, "--hyp", src], capsys)
    assert status == 2 and "src.txt: not a valid prep.json" in err


def test_the_quickstart_reference_row_counts_in_the_models_units(tmp_path, capsys):
    """The shipped SciTLDR-A test references against their sources, both tokenized as scitldr_small prepares the
    quickstart's data: 24.0 % novel unigrams and 3.79 % copied sentences, the figures an audit computed by hand
    for the quickstart's reference row (the raw texts gave it 38.2 % and 0.00 %)."""
    from fairseq_plugins.cli.prepare import main as prepare

    scitldr = Path(__file__).resolve().parents[1] / "data" / "scitldr"
    options = lib.config_array("scitldr_small", "PREP_ARGS")
    assert prepare(["--raw-dir", str(scitldr), "--out-dir", str(tmp_path / "data"), "--splits", "train,test",
                    *options]) == 0
    capsys.readouterr()
    status, _, err = run_main(["--prep", tmp_path / "data" / "prep.json", "--source", scitldr / "test.src",
                               "--hyp", scitldr / "test.tgt", "--name", "references", "--json", tmp_path / "a.json"],
                              capsys)
    assert status == 0, err
    figures = json.loads((tmp_path / "a.json").read_text())["systems"]["references"]
    assert round(figures["novel_1grams"]["pooled"], 1) == 24.0
    assert round(figures["copied_sentences"]["pooled"], 2) == 3.79
