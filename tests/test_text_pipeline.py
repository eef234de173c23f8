"""Text pipeline: summ-convert, summ-prepare (tokenization, dictionary, OOV markers), summ-restore."""
import gzip
import hashlib
import json
import re
import subprocess
import sys
import unicodedata
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
SHARED = REPO.parent / "shared" / "data"

from fairseq_plugins.cli import convert, prepare, restore  # noqa: E402
from fairseq_plugins.text.convert import read_story  # noqa: E402
from fairseq_plugins.text.markers import is_reserved, marker  # noqa: E402
from fairseq_plugins.text.tokenization import (  # noqa: E402
    Tokenizer, char_tokenize, detokenize, display_text, train_sentencepiece, word_tokenize)


@pytest.fixture(scope="module")
def shared():
    if not SHARED.is_dir():
        pytest.fail(f"shared data not found at {SHARED} (expected beside the repository)")
    return SHARED


def lines(path):
    """Lines split on '\\n' only, as the tools write them."""
    text = Path(path).read_text(encoding="utf-8")
    assert text == "" or text.endswith("\n"), f"{path} lacks a final newline"
    return text.split("\n")[:-1]


def write(path, rows):
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(path).write_text("".join(r + "\n" for r in rows), encoding="utf-8")


def run(module, argv, capsys):
    """Run a CLI in-process: (exit status, stderr)."""
    capsys.readouterr()
    status = module.main([str(a) for a in argv])
    return status, capsys.readouterr().err


def ok(module, argv, capsys):
    status, err = run(module, argv, capsys)
    assert status == 0, err
    return err


def fake_generate(path, hypotheses, order=None, extra_lines=True):
    """fairseq-generate-like output: S/T/H/D/P lines, ids in a shuffled order."""
    order = order if order is not None else sorted(range(len(hypotheses)), key=lambda i: (i * 7) % 5)
    out = ["2024-01-01 | INFO | fairseq_cli.generate | loading model"] if extra_lines else []
    for i in order:
        out += [f"S-{i}\tsource", f"T-{i}\ttarget", f"H-{i}\t-0.5\t{hypotheses[i]}", f"D-{i}\t-0.5\tdetok",
                f"P-{i}\t-0.1 -0.2"] if extra_lines else [f"H-{i}\t-0.5\t{hypotheses[i]}"]
    write(path, out)


def build(tmp_path, capsys, train_src, train_tgt, *extra, splits="train", out="out"):
    raw = tmp_path / "raw"
    write(raw / "train.src", train_src)
    write(raw / "train.tgt", train_tgt)
    err = ok(prepare, ["--raw-dir", raw, "--out-dir", tmp_path / out, "--splits", splits, *extra], capsys)
    return tmp_path / out, err


# ----------------------------------------------------------------------------------------------- tokenization
def test_word_and_char_tokenization_are_deterministic():
    assert word_tokenize("Don't stop: 3.5% of U.S. state-of-the-art, 1,000 CATS!") == [
        "don't", "stop", ":", "3.5", "%", "of", "u", ".", "s", ".", "state-of-the-art", ",", "1,000", "cats", "!"]
    assert char_tokenize("基于LSTM的3.5版本，x86 芯片") == [
        "基", "于", "LSTM", "的", "3", ".", "5", "版", "本", "，", "x86", "芯", "片"]
    assert detokenize(["基", "于", "deep", "learning", "的", "3", ".", "5"], "zh", "char") == "基于deep learning的3.5"
    assert detokenize(["▁the", "▁ca", "t", "▁龘"], "en", "sp") == "the cat 龘"
    assert detokenize(["a", "b"], "en", "word") == "a b"


SEPARATED = {"en": "The cat sat. <q> The dog ran.<q>It rained <q>", "zh": "猫坐着。<q>狗跑了。 <q> MRP很好<q>"}


@pytest.mark.parametrize("lang, unit", [("en", "keep"), ("en", "word"), ("en", "sp"), ("zh", "char"),
                                        ("zh", "jieba"), ("zh", "sp")])
def test_every_unit_keeps_the_sentence_separators_as_tokens(lang, unit, tmp_path):
    """<q> and ##SENT## are one token each under every unit (never '<', 'q', '>'), the sentencepiece model learns
    no piece of them, and detokenized text has them between spaces, where the ROUGE tools split sentences."""
    from fairseq_plugins.scoring.rouge_python import split_sentences

    model = _sp_model(tmp_path, lang, separators=True) if unit == "sp" else None
    tokenizer = Tokenizer(lang, unit, lowercase=True, sp_model_path=model)
    tokens = tokenizer(SEPARATED[lang])
    assert [tok for tok in tokens if tok in ("<q>", "##SENT##")] == ["<q>", "<q>", "<q>"]
    assert tokenizer(SEPARATED[lang].replace("<q>", "##SENT##")).count("##SENT##") == 3
    assert not any(("<" in tok or "q>" in tok or "SENT" in tok.upper()) and tok not in ("<q>", "##SENT##")
                   for tok in tokens), tokens
    text = detokenize(tokens, lang, unit)
    assert len(split_sentences(text, lang)) == 3, text
    assert display_text(tokens, lang, unit).count(" <q> ") == 2


def test_the_cased_spelling_keeps_the_separators():
    tokenizer = Tokenizer("en", "word")
    text = "The Cat<q>Smallville ##SENT## wins"
    assert tokenizer.surface(text, tokenizer(text)) == ["The", "Cat", "<q>", "Smallville", "##SENT##", "wins"]


@pytest.mark.parametrize("config", ["see2017_cnndm_paper", "dca2018_cnndm_paper", "paulus2017_cnndm_paper"])
def test_the_cnndm_paper_configs_prepare_the_separator_as_one_token(config, tmp_path, capsys):
    """Highlights joined by ' <q> ', prepared with the config's PREP_ARGS: the tokenized targets and the dictionary
    hold <q> (never '<', 'q', '>'), and summ-analyze --prep forms a text as summ-prepare tokenized it."""
    from scripts.experiments import lib
    from fairseq_plugins.scoring.summary_stats import prepared

    sources = lines(REPO / "data" / "scitldr" / "train.src")[:30]
    targets = [text + " <q> It ends here. <q> So it does." for text in lines(REPO / "data" / "scitldr" / "train.tgt")[:30]]
    out, _ = build(tmp_path, capsys, sources, targets, *lib.config_array(config, "PREP_ARGS"))
    tok_targets = lines(out / "tok" / "train.tgt")
    assert all(line.split().count("<q>") == text.count(" <q> ") for line, text in zip(tok_targets, targets))
    assert not any(" < q > " in line for line in tok_targets)
    assert "<q>" in {line.split()[0] for line in lines(out / "dict.txt")}
    _, analysed, _ = prepared(str(out / "prep.json"), sources[:3], {"system": targets})
    assert [text.split() for text in analysed["system"]] == [line.split() for line in tok_targets]


# ----------------------------------------------------------------------------------------------- convert
def test_convert_story_directory_and_url_list(tmp_path, shared, capsys):
    stories = shared / "cnn_stories" / "cnn_stories"
    ok(convert, ["story", stories, "--out-prefix", tmp_path / "all"], capsys)
    src, tgt = lines(tmp_path / "all.src"), lines(tmp_path / "all.tgt")
    assert len(src) == len(tgt) == 20
    # sorted by file name: 017d27... is the Bush/Vietnam story
    assert src[0].startswith("WASHINGTON (CNN) -- As he awaits a crucial progress report on Iraq")
    assert "@highlight" not in src[0] and "\t" not in src[0]
    assert tgt[0].startswith("President Bush to address the Veterans of Foreign Wars on Wednesday Bush to say")

    url_list = shared / "cnn_stories" / "url_lists" / "all_val.txt"
    err = ok(convert, ["story", stories, "--url-list", url_list, "--sent-sep", "<q>", "--fix-missing-period",
                       "--out-prefix", tmp_path / "val"], capsys)
    assert "wrote 10 documents" in err
    urls = [u.strip() for u in url_list.read_text().splitlines() if u.strip()]
    first = hashlib.sha1(urls[0].encode()).hexdigest()
    article, highlights = read_story(str(stories / f"{first}.story"), fix_missing_period=True)
    val_src, val_tgt = lines(tmp_path / "val.src"), lines(tmp_path / "val.tgt")
    assert val_src[0] == " ".join(article)
    assert val_tgt[0] == " <q> ".join(highlights) and val_tgt[0].count(" <q> ") == len(highlights) - 1 >= 1
    assert all(h.endswith((".", "!", "?", '"', "'", ")", "\u2019", "\u201d")) for h in highlights)


def test_convert_jsonl_gzip_list_targets_and_ids(tmp_path, shared, capsys):
    path = shared / "cnndm_see2017" / "part_a.jsonl.gz"
    ok(convert, ["jsonl", path, "--src-field", "article", "--tgt-field", "reference", "--id-field", "id",
                 "--out-prefix", tmp_path / "see"], capsys)
    with gzip.open(path, "rt", encoding="utf-8") as handle:
        first = json.loads(handle.readline())
    src, tgt, ids = (lines(tmp_path / f"see.{ext}") for ext in ("src", "tgt", "ids"))
    assert len(src) == len(tgt) == len(ids) == 10000
    assert ids[0] == "000000" and ids[-1] == "009999"
    assert src[0] == " ".join(first["article"].split())
    assert tgt[0] == " ".join(" ".join(first["reference"]).split())


def test_convert_jsonl_multi_reference(tmp_path, shared, capsys):
    path = shared / "scitldr_a" / "test.jsonl"
    ok(convert, ["jsonl", path, "--src-field", "source", "--tgt-field", "target", "--all-targets",
                 "--target-index", "1", "--out-prefix", tmp_path / "sci"], capsys)
    records = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    refs = [json.loads(line) for line in lines(tmp_path / "sci.tgt.all")]
    tgt = lines(tmp_path / "sci.tgt")
    assert len(refs) == len(tgt) == len(lines(tmp_path / "sci.src")) == len(records) == 618
    assert [len(r) for r in refs] == [len(r["target"]) for r in records]
    assert tgt[5] == refs[5][1] == " ".join(records[5]["target"][1].split())
    # a reference that does not exist is an error naming file and line
    status, err = run(convert, ["jsonl", path, "--src-field", "source", "--tgt-field", "target",
                                "--target-index", "3", "--out-prefix", tmp_path / "bad"], capsys)
    assert status == 2 and f"{path}:1: --target-index 3 but only 2 references" in err
    assert not (tmp_path / "bad.src").exists()  # nothing half-written


def test_convert_tsv_formats(tmp_path, shared, capsys):
    ok(convert, ["tsv", shared / "csl_title" / "ydli_dev.tsv", "--src-col", "1", "--tgt-col", "2",
                 "--out-prefix", tmp_path / "csl"], capsys)
    ok(convert, ["tsv", shared / "lcsts_part2" / "val.tsv", "--src-col", "1", "--tgt-col", "0",
                 "--out-prefix", tmp_path / "lcsts"], capsys)
    raw = (shared / "csl_title" / "ydli_dev.tsv").read_text(encoding="utf-8").split("\n")[0].split("\t")
    assert lines(tmp_path / "csl.src")[0] == " ".join(raw[1].split())
    assert lines(tmp_path / "csl.tgt")[0] == raw[2] and raw[0] == "to title"
    assert lines(tmp_path / "lcsts.tgt")[0] == "李嘉诚回应“撤资”等质疑：是一个大笑话"
    assert len(lines(tmp_path / "lcsts.src")) == 1000
    # wrong column count, named by file and line
    bad = tmp_path / "bad.tsv"
    bad.write_text("title\tabstract\ntitle only\n", encoding="utf-8")
    status, err = run(convert, ["tsv", bad, "--src-col", "1", "--tgt-col", "0", "--out-prefix", tmp_path / "b"],
                      capsys)
    assert status == 2 and f"{bad}:2: wrong column count: 1" in err


def test_convert_errors_and_empty_documents(tmp_path, capsys):
    good = tmp_path / "in.jsonl"
    good.write_text(json.dumps({"s": "a\tb\nc\u2028d  e", "t": ["one.", "", "two."]}) + "\n"
                    + json.dumps({"s": "", "t": "x"}) + "\n", encoding="utf-8")
    err = ok(convert, ["jsonl", good, "--src-field", "s", "--tgt-field", "t", "--out-prefix", tmp_path / "g"],
             capsys)
    assert lines(tmp_path / "g.src") == ["a b c d e", ""]
    assert lines(tmp_path / "g.tgt") == ["one. two.", "x"]
    assert "1 empty source documents" in err

    cases = {
        b'{"s": "a", "t": "b"}\n{"s": "a", "t": \n': "bad.jsonl:2: bad JSON",
        b'{"s": "a", "t": "b"}\n{"s": "a"}\n': "bad.jsonl:2: missing field 't'",
        b'{"s": "a", "t": "b"}\n{"s": "caf\xe9", "t": "b"}\n': "bad.jsonl:2: invalid UTF-8",
        b'{"s": 3, "t": "b"}\n': "bad.jsonl:1: field 's' must be a string or a list of strings",
    }
    for content, message in cases.items():
        (tmp_path / "bad.jsonl").write_bytes(content)
        status, err = run(convert, ["jsonl", tmp_path / "bad.jsonl", "--src-field", "s", "--tgt-field", "t",
                                    "--out-prefix", tmp_path / "b"], capsys)
        assert status == 2 and message in err, (message, err)
        assert "Traceback" not in err


LCSTS_RELEASE = """<doc id=0>
    <human_label>5</human_label>
    <summary>
        修改后的立法法全文公布
    </summary>
    <short_text>
        新华社受权于18日全文播发修改后的《中华人民共和国立法法》，
        修改后的立法法分为“总则”等六章。
    </short_text>
</doc>
<doc id=1>
    <human_label>2</human_label>
    <summary>
        低分摘要
    </summary>
    <short_text>
        一段与摘要无关的短文。
    </short_text>
</doc>
"""


def test_convert_lcsts_release(tmp_path, capsys):
    """The LCSTS release's <doc> records (PART_II/III with human scores): pairs in order, a field's lines joined,
    --min-score leaves out the low-scored documents and says how many; a broken record names its line."""
    release = tmp_path / "PART_II.txt"
    release.write_text(LCSTS_RELEASE, encoding="utf-8")
    ok(convert, ["lcsts", release, "--scores", "--output-prefix", tmp_path / "all"], capsys)
    assert (tmp_path / "all.tgt").read_text(encoding="utf-8") == "修改后的立法法全文公布\n低分摘要\n"
    assert (tmp_path / "all.src").read_text(encoding="utf-8").splitlines()[0] == (
        "新华社受权于18日全文播发修改后的《中华人民共和国立法法》， 修改后的立法法分为“总则”等六章。")
    assert (tmp_path / "all.score").read_text() == "5\n2\n"
    err = ok(convert, ["lcsts", release, "--min-score", "3", "--output-prefix", tmp_path / "test"], capsys)
    assert (tmp_path / "test.tgt").read_text(encoding="utf-8") == "修改后的立法法全文公布\n"
    assert "left out 1 documents with a human score below 3" in err
    no_summary = LCSTS_RELEASE.replace("    <summary>\n        修改后的立法法全文公布\n    </summary>\n", "", 1)
    broken = {"no summary": (no_summary, "PART_II.txt:1: the <doc> record has no <summary>"),
              "unknown tag": (LCSTS_RELEASE.replace("<summary>", "<x>", 1), "PART_II.txt:3: text outside"),
              "unclosed": (LCSTS_RELEASE.rsplit("</doc>", 1)[0], "opened at line 11 is not closed"),
              "text outside": (LCSTS_RELEASE.replace("</summary>", "</summary>\nstray", 1), "PART_II.txt:6: text outside"),
              "nested doc": (LCSTS_RELEASE.replace("</doc>\n<doc id=1>", "<doc id=1>", 1), "PART_II.txt:10: <doc> inside the <doc> opened at line 1")}
    for case, (text, message) in broken.items():
        release.write_text(text, encoding="utf-8")
        status, err = run(convert, ["lcsts", release, "--output-prefix", tmp_path / "bad"], capsys)
        assert status == 2 and message in err, (case, err)
    release.write_text(LCSTS_RELEASE.replace("    <human_label>5</human_label>\n", ""), encoding="utf-8")
    status, err = run(convert, ["lcsts", release, "--min-score", "3", "--output-prefix", tmp_path / "bad"], capsys)
    assert status == 2 and "PART_II.txt:1: --min-score/--scores need <human_label>" in err


def test_convert_parallel(tmp_path, shared, capsys):
    base = shared / "cnndm_sample100" / "train.txt"
    ok(convert, ["parallel", f"{base}.src.100", f"{base}.tgt.100", "--split-target-on", "##SENT##",
                 "--sent-sep", "<q>", "--out-prefix", tmp_path / "p"], capsys)
    tgt = lines(tmp_path / "p.tgt")
    assert len(tgt) == len(lines(tmp_path / "p.src")) == 100
    assert "##SENT##" not in tgt[0] and " <q> " in tgt[0]
    write(tmp_path / "a.txt", ["x", "y", "z"])
    write(tmp_path / "b.txt", ["x"])
    status, err = run(convert, ["parallel", tmp_path / "a.txt", tmp_path / "b.txt", "--out-prefix", tmp_path / "q"],
                      capsys)
    assert status == 2 and f"{tmp_path / 'a.txt'} has 3 lines" in err and f"{tmp_path / 'b.txt'} has 1 lines" in err


def test_convert_split_keeps_near_duplicates_together(tmp_path, capsys):
    src = [f"document number {i}" for i in range(30)] + ["Same Title story!", "same title, story"]
    tgt = [f"title {i}" for i in range(30)] + ["t-a", "t-b"]
    write(tmp_path / "all.src", src)
    write(tmp_path / "all.tgt", tgt)
    for out in ("s1", "s2"):
        ok(convert, ["split", "--in-prefix", tmp_path / "all", "--sizes", "test=5,valid=5", "--out-dir",
                     tmp_path / out], capsys)
    got = {name: lines(tmp_path / "s1" / f"{name}.src") for name in ("train", "valid", "test")}
    assert [len(got[n]) for n in ("train", "valid", "test")] == [22, 5, 5]
    assert sorted(sum(got.values(), [])) == sorted(src)
    holder = [n for n in got if "Same Title story!" in got[n]]
    assert len(holder) == 1 and "same title, story" in got[holder[0]]
    for name in got:  # deterministic
        assert (tmp_path / "s1" / f"{name}.src").read_bytes() == (tmp_path / "s2" / f"{name}.src").read_bytes()
        assert [tgt[src.index(s)] for s in got[name]] == lines(tmp_path / "s1" / f"{name}.tgt")


def test_shipped_data():
    norm = lambda s: re.sub(r"[\W_]+", "", s.lower())  # noqa: E731
    expected = {"scitldr": (1992, 619, 618), "csl": (2600, 200, 200)}
    for corpus, sizes in expected.items():
        folder = REPO / "data" / corpus
        assert "Apache License" in (folder / "LICENSE").read_text() and (folder / "NOTICE").is_file()
        seen = {}
        for split, size in zip(("train", "valid", "test"), sizes):
            src, tgt = lines(folder / f"{split}.src"), lines(folder / f"{split}.tgt")
            assert len(src) == len(tgt) == size, (corpus, split)
            assert all(s.strip() and t.strip() for s, t in zip(src, tgt))
            if corpus == "csl":
                for text in src + tgt:
                    assert seen.setdefault(norm(text), split) == split, f"{text[:30]} in two CSL splits"
            elif split != "train":
                refs = [json.loads(line) for line in lines(folder / f"{split}.tgt.all")]
                assert len(refs) == size and all(r[0] == t for r, t in zip(refs, tgt))
    assert "Apache" in (REPO / "data" / "README.md").read_text()


# ----------------------------------------------------------------------------------------------- prepare
TRAIN_SRC = ["the cat sat on the mat .", "the dog sat on the log .", "a cat and a dog ."]
TRAIN_TGT = ["the cat sat .", "the dog sat .", "a cat and a dog ."]


def test_dictionary_markers_and_shared_target_marker(tmp_path, capsys):
    src = TRAIN_SRC + ["the zebra met the okapi ; the zebra ran ."]
    tgt = TRAIN_TGT + ["zebra ran from the quagga ."]
    out, err = build(tmp_path, capsys, src, tgt, "--min-count", "4", "--num-markers", "6")
    entries = [line.rsplit(" ", 1) for line in lines(out / "dict.txt")]
    words = [w for w, _ in entries]
    assert words[-6:] == [marker(k) for k in range(6)] and all(c == "0" for _, c in entries[-6:])
    regular = entries[:-6]
    assert all(int(c) >= 4 and not is_reserved(w) for w, c in regular)
    assert regular == sorted(regular, key=lambda e: (-int(e[1]), e[0]))  # by count, ties in code-point order
    assert ["the", "10"] in regular and ["cat", "4"] in regular and "zebra" not in words  # zebra: 3 times
    assert lines(out / "tok" / "train.src")[3] == "the <oov-0> <oov-1> the <oov-2> <oov-3> the <oov-0> <oov-4> ."
    assert lines(out / "tok" / "train.oov")[3] == "zebra\tmet\tokapi\t;\tran"
    # the target copies of 'zebra'/'ran' share the source markers; 'from'/'quagga' are not in the source
    assert lines(out / "tok" / "train.tgt")[3] == "<oov-0> <oov-4> <unk> the <unk> ."
    assert lines(out / "tok" / "train.oov")[0] == "on\tmat"
    # fairseq loads it with the markers last
    from fairseq.data import Dictionary

    from fairseq_plugins.text.markers import first_marker_index

    dictionary = Dictionary.load(str(out / "dict.txt"))
    assert first_marker_index(dictionary) == dictionary.nspecial + len(regular) == len(dictionary) - 6
    prep = json.loads((out / "prep.json").read_text())
    assert prep["settings"]["num_markers"] == 6 and prep["vocab"]["regular"] == len(regular)
    assert prep["stats"]["train"]["target"]["copyable_tokens"] == 3  # zebra, ran and "and" of document 2
    assert prep["stats"]["train"]["target"]["unk_tokens"] == 2


def test_marker_lookalikes_round_trip_verbatim(tmp_path, capsys):
    weird = "<oov-3> </s> <unk> madeupword0001 <s> <pad> <mask>"
    src = TRAIN_SRC + [f"the cat {weird} sat .", f"{weird} {weird}"]
    tgt = TRAIN_TGT + [f"the cat </s> <oov-3> sat <unk> .", f"madeupword0001 <mask> <s> <pad>"]
    out, err = build(tmp_path, capsys, src, tgt)
    assert not any(is_reserved(w.rsplit(" ", 1)[0]) and not w.startswith("<oov-")
                   for w in lines(out / "dict.txt"))
    assert "look like markers/fairseq symbols" in err
    tok_src, tok_tgt = lines(out / "tok" / "train.src"), lines(out / "tok" / "train.tgt")
    assert tok_src[3] == "the cat <oov-0> <oov-1> <oov-2> <oov-3> <oov-4> <oov-5> <oov-6> sat ."
    assert tok_src[4] == " ".join([marker(k) for k in range(7)] * 2)
    assert lines(out / "tok" / "train.oov")[3].split("\t") == weird.split()
    # a perfect model: hypotheses = the marked targets; restore must give the raw targets back (as tokens:
    # --no-detok, the form ROUGE scores; the old spellings --out and --tokens-out still work)
    fake_generate(tmp_path / "gen.txt", tok_tgt)
    ok(restore, ["--prep", out / "prep.json", "--oov", out / "tok" / "train.oov", "--generate-output",
                 tmp_path / "gen.txt", "--out", tmp_path / "hyp.txt", "--tokens-out", tmp_path / "hyp.tok",
                 "--no-detok"], capsys)
    assert lines(tmp_path / "hyp.txt") == tgt
    assert lines(tmp_path / "hyp.tok") == tgt


def test_truncation_empty_lines_and_long_document(tmp_path, capsys):
    long_doc = " ".join(f"w{i % 997}" for i in range(50000))
    src = TRAIN_SRC + ["", long_doc, "one two three four five six seven"]
    tgt = TRAIN_TGT + ["not empty", "", "x y z a b c d e f g h"]
    out, err = build(tmp_path, capsys, src, tgt, "--max-source-len", "6", "--max-target-len", "5",
                     "--num-markers", "3")
    for ext in ("src", "tgt", "oov"):
        assert len(lines(out / "tok" / f"train.{ext}")) == len(src)
    tok_src = lines(out / "tok" / "train.src")
    assert tok_src[3] == "" and lines(out / "tok" / "train.tgt")[4] == ""
    assert [len(s.split()) for s in tok_src] == [6, 6, 6, 0, 6, 6]
    assert "sources truncated to 6 tokens: 4" in err and "longest 50000" in err
    assert "targets truncated to 5 tokens: 2" in err
    assert "empty lines: 1 sources, 1 targets" in err
    stats = json.loads((out / "prep.json").read_text())["stats"]["train"]
    assert stats["source"]["truncated"] == 4 and stats["source"]["longest"] == 50000
    assert stats["source"]["empty"] == 1 and stats["target"]["empty"] == 1 and stats["documents"] == 6


def test_only_oov_document_and_marker_overflow(tmp_path, capsys):
    src = TRAIN_SRC + ["qq rr ss qq tt"]
    tgt = TRAIN_TGT + ["tt qq uu"]
    out, err = build(tmp_path, capsys, src, tgt, "--num-markers", "3", "--vocab-size", "6")
    assert lines(out / "tok" / "train.src")[3] == "<oov-0> <oov-1> <oov-2> <oov-0> <unk>"
    assert lines(out / "tok" / "train.oov")[3] == "qq\trr\tss"
    assert lines(out / "tok" / "train.tgt")[3] == "<unk> <oov-0> <unk>"
    assert "marker overflow: 1 documents (1 OOV words -> <unk>)" in err and "raise --num-markers" in err
    stats = json.loads((out / "prep.json").read_text())["stats"]["train"]
    assert stats["markers"] == {"overflow_documents": 1, "overflow_words": 1, "max_in_document": 3}
    # with enough markers, every word of the all-OOV document is restored
    out, _ = build(tmp_path, capsys, src, tgt, "--num-markers", "10", "--vocab-size", "6", out="out10")
    fake_generate(tmp_path / "gen.txt", lines(out / "tok" / "train.src"))
    ok(restore, ["--prep", out / "prep.json", "--oov", out / "tok" / "train.oov", "--generate-output",
                 tmp_path / "gen.txt", "--out", tmp_path / "hyp.txt"], capsys)
    assert lines(tmp_path / "hyp.txt")[3] == "qq rr ss qq tt"


@pytest.mark.slow
def test_prepare_user_errors(tmp_path, capsys):
    raw = tmp_path / "raw"
    write(raw / "train.src", ["a b", "c d", "e"])
    write(raw / "train.tgt", ["a", "c"])
    status, err = run(prepare, ["--raw-dir", raw, "--out-dir", tmp_path / "o", "--splits", "train"], capsys)
    assert status == 2
    assert f"{raw / 'train.src'} has 3 lines" in err and f"{raw / 'train.tgt'} has 2 lines" in err
    write(raw / "train.tgt", ["a", "c", "e"])
    status, err = run(prepare, ["--raw-dir", raw, "--out-dir", tmp_path / "o"], capsys)
    assert status == 2 and f"missing file {raw / 'valid.src'}" in err
    (raw / "train.tgt").write_bytes(b"a\nc \xff\xfe d\ne\n")
    status, err = run(prepare, ["--raw-dir", raw, "--out-dir", tmp_path / "o", "--splits", "train"], capsys)
    assert status == 2 and f"{raw / 'train.tgt'}:2: invalid UTF-8" in err
    # the installed entry point: exit status 2, one message, no traceback
    write(raw / "train.tgt", ["a"])
    proc = subprocess.run([sys.executable, "-m", "fairseq_plugins.cli.prepare", "--raw-dir", str(raw),
                           "--out-dir", str(tmp_path / "o"), "--splits", "train"],
                          cwd=REPO, capture_output=True, text=True)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "summ-prepare: error: line counts differ" in proc.stderr


def test_apply_mode_matches_build(tmp_path, capsys):
    raw = tmp_path / "raw"
    write(raw / "valid.src", ["the cat saw a zebra .", "", "zebra " * 10])
    write(raw / "valid.tgt", ["x", "y", "z"])
    out, _ = build(tmp_path, capsys, TRAIN_SRC, TRAIN_TGT, "--max-source-len", "8", splits="train,valid")
    err = ok(prepare, ["--apply", out / "prep.json", "--input", raw / "valid.src", "--out-prefix",
                       tmp_path / "new"], capsys)
    assert lines(tmp_path / "new.src") == lines(out / "tok" / "valid.src")
    assert lines(tmp_path / "new.oov") == lines(out / "tok" / "valid.oov") == ["saw\tzebra", "", "zebra"]
    assert "sources truncated to 8 tokens: 1" in err


# ----------------------------------------------------------------------------------------------- restore
def test_restore_ids_nbest_and_errors(tmp_path, capsys):
    out, _ = build(tmp_path, capsys, TRAIN_SRC, TRAIN_TGT)
    write(tmp_path / "p.oov", ["zebra\tokapi", "", "gnu"])
    gen = tmp_path / "gen.txt"
    write(gen, ["H-2\t-0.1\t<oov-0> sat <oov-1> </s>", "H-0\t-0.2\tthe <oov-1> and <oov-0> <pad>",
                "H-0\t-0.9\tsecond best", "D-0\t-0.2\tignored", "H-1\t-0.3\t"])
    err = ok(restore, ["--prep", out / "prep.json", "--oov", tmp_path / "p.oov", "--generate-output", gen,
                       "--out", tmp_path / "hyp.txt", "--num-docs", "3"], capsys)
    assert lines(tmp_path / "hyp.txt") == ["the okapi and zebra", "", "gnu sat <unk>"]
    assert "1 markers had no OOV word" in err and "1 empty summaries" in err and "<unk> tokens" not in err
    write(tmp_path / "unk.txt", ["H-0\t-0.1\tthe <unk> sat", "H-1\t-0.1\t<unk> <unk>", "H-2\t-0.1\tgnu"])
    err = ok(restore, ["--prep", out / "prep.json", "--oov", tmp_path / "p.oov", "--generate-output",
                       tmp_path / "unk.txt", "--out", tmp_path / "unk.sum"], capsys)
    assert "the summaries hold 3 <unk> tokens" in err
    ok(restore, ["--prep", out / "prep.json", "--oov", tmp_path / "p.oov", "--generate-output", gen,
                 "--out", tmp_path / "hyp2.txt", "--drop-unk"], capsys)
    assert lines(tmp_path / "hyp2.txt")[2] == "gnu sat"
    # fairseq dropped inputs: the missing ids are listed
    write(tmp_path / "p5.oov", ["", "", "", "", ""])
    write(gen, ["H-0\t-0.2\ta", "H-3\t-0.2\tb"])
    status, err = run(restore, ["--prep", out / "prep.json", "--oov", tmp_path / "p5.oov", "--generate-output",
                                gen, "--out", tmp_path / "hyp3.txt"], capsys)
    assert status == 2 and "missing 3 ids: 1-2, 4" in err and not (tmp_path / "hyp3.txt").exists()
    status, err = run(restore, ["--prep", out / "prep.json", "--oov", tmp_path / "p.oov", "--generate-output",
                                gen, "--out", tmp_path / "hyp3.txt", "--num-docs", "4"], capsys)
    assert status == 2 and "--num-docs 4" in err


# ----------------------------------------------------------------------------------------------- invisible characters
def _invisible_characters():
    """Every control character but tab, newline and carriage return, and every format character (Cf)."""
    return [chr(c) for c in range(sys.maxunicode + 1)
            if (unicodedata.category(chr(c)) == "Cc" and chr(c) not in "\t\n\r") or unicodedata.category(chr(c)) == "Cf"]


@pytest.mark.parametrize("lang, unit", [("en", "keep"), ("en", "word"), ("zh", "char"), ("zh", "jieba")])
def test_control_and_format_characters_never_reach_a_token(lang, unit):
    from fairseq_plugins.text.tokenization import clean_text, invisible_count

    invisible = _invisible_characters()
    assert len(invisible) > 150 and "\0" in invisible and "\u200b" in invisible and "\u202e" in invisible
    text = "x".join(invisible) + " nul\0 inside ."
    tokens = Tokenizer(lang, unit)(text)
    assert not any(ch in invisible for tok in tokens for ch in tok)
    assert tokens[-3:] == ["nul", "inside", "."] and invisible_count(text) == len(invisible) + 1
    assert clean_text("a\0b\u200bc\u200dd\u00ade") == "a b cde" and clean_text("plain text") == "plain text"
    assert detokenize(["a\0b", "\u202ec"], lang, unit).replace(" ", "") == "abc"


def test_prepare_counts_the_invisible_characters_and_restore_writes_none(tmp_path, capsys):
    src = TRAIN_SRC + ["nul\0 inside . \u200bzero\u200dwidth \u202eokapi\u202c"]
    tgt = TRAIN_TGT + ["the\x07 okapi ."]
    out, err = build(tmp_path, capsys, src, tgt, "--min-count", "2")
    assert "6 control or invisible characters (NUL, zero-width, bidirectional marks...) in 2 lines" in err
    written = "".join((out / "tok" / f"train.{ext}").read_text(encoding="utf-8") for ext in ("src", "tgt", "oov"))
    assert not any(ch in written for ch in "\0\x07\u200b\u200d\u202e\u202c")
    stats = json.loads((out / "prep.json").read_text())["stats"]["train"]
    assert stats["invisible_characters"] == {"characters": 6, "lines": 2}
    # an OOV file of an older preparation that still holds a NUL: the summary holds none
    write(tmp_path / "p.oov", ["oka\0pi"])
    write(tmp_path / "gen.txt", ["H-0\t-0.1\tthe <oov-0> sat"])
    ok(restore, ["--prep", out / "prep.json", "--oov", tmp_path / "p.oov", "--generate-output",
                 tmp_path / "gen.txt", "--out", tmp_path / "hyp.txt"], capsys)
    assert lines(tmp_path / "hyp.txt") == ["the oka pi sat"]


# ----------------------------------------------------------------------------------------------- Chinese units
@pytest.fixture(scope="module")
def csl_raw(tmp_path_factory):
    """data/csl with a reduced training split for the char/jieba units (the sp test uses the full one)."""
    raw = tmp_path_factory.mktemp("csl_raw")
    csl = REPO / "data" / "csl"
    for ext in ("src", "tgt"):
        write(raw / f"train.{ext}", lines(csl / f"train.{ext}")[:400])
        write(raw / f"valid.{ext}", lines(csl / f"valid.{ext}"))
    return raw


def _round_trip(out, tmp_path, capsys):
    """Restore the marked valid targets as if a model had generated them exactly."""
    tok_tgt = lines(out / "tok" / "valid.tgt")
    assert any("<oov-" in t for t in tok_tgt), "no OOV marker in the targets: the test would check little"
    fake_generate(tmp_path / "gen.txt", tok_tgt)
    ok(restore, ["--prep", out / "prep.json", "--oov", out / "tok" / "valid.oov", "--generate-output",
                 tmp_path / "gen.txt", "--out", tmp_path / "hyp.txt"], capsys)
    hyp = lines(tmp_path / "hyp.txt")
    assert len(hyp) == len(tok_tgt)
    # targets with a non-copyable OOV (<unk>) cannot come back; every other one must
    return hyp, [i for i, t in enumerate(tok_tgt) if "<unk>" not in t.split()]


@pytest.mark.parametrize("unit", ["char", "jieba"])
def test_chinese_units_round_trip(unit, csl_raw, tmp_path, capsys):
    out = tmp_path / "out"
    ok(prepare, ["--raw-dir", csl_raw, "--out-dir", out, "--lang", "zh", "--unit", unit, "--splits",
                 "train,valid", "--max-source-len", "1000"], capsys)
    want = lines(csl_raw / "valid.tgt")
    hyp, restorable = _round_trip(out, tmp_path, capsys)
    assert len(restorable) > 120
    for i in restorable:  # every character comes back; only spaces between CJK and latin text may differ
        assert "".join(hyp[i].split()) == "".join(want[i].split())
    assert sum(h == w for h, w in zip(hyp, want)) > 120
    # detokenization: no space between CJK characters, a space between two latin/digit tokens
    tokens = Tokenizer("zh", unit)("基于LSTM的3路 deep learning模型")
    assert detokenize(tokens, "zh", unit) == "基于LSTM的3路deep learning模型"


def test_sentencepiece_round_trip_on_csl(tmp_path, capsys):
    out = tmp_path / "out"
    err = ok(prepare, ["--raw-dir", REPO / "data" / "csl", "--out-dir", out, "--lang", "zh", "--unit", "sp",
                       "--sp-vocab-size", "4000", "--splits", "train,valid", "--max-source-len", "1000"], capsys)
    assert (out / "sp.model").is_file() and "sentencepiece model" in err
    prep = json.loads((out / "prep.json").read_text())
    assert prep["files"]["sp_model"] == "sp.model" and prep["sentencepiece"]["pieces"] == 4000
    assert prep["sentencepiece"]["normalization"] == "identity"
    assert lines(out / "tok" / "valid.tgt")[0].startswith("\u2581")  # pieces, not characters
    want = lines(REPO / "data" / "csl" / "valid.tgt")
    hyp, restorable = _round_trip(out, tmp_path, capsys)
    assert len(restorable) > 190
    for i in restorable:  # every character comes back as written (no NFKC); only runs of spaces may differ
        assert " ".join(hyp[i].split()) == " ".join(want[i].split())
    assert sum(h == w for h, w in zip(hyp, want)) > 120


# ----------------------------------------------------------------------------------------------- sentencepiece text
ZH_FULL_WIDTH = "据报道：ＡＢＣ公司（Ｎａｓｄａｑ：ＡＢＣ）第３季度营收增长１２％，你知道吗？太好了！"
EN_MIXED = "The  “naïve” model\u3000costs ＄５ — 3½ ﬁxes…\tdone. "


def _sp_model(tmp_path, lang, separators=False, **kwargs):
    """A tiny sentencepiece model trained by the project's code on 300 shipped training documents (with
    ``separators``, each document's sentences joined by <q>, as the CNN/DM configs' targets are)."""
    corpus = REPO / "data" / ("csl" if lang == "zh" else "scitldr") / "train.src"
    texts = lines(corpus)[:300]
    if separators:
        texts = [re.sub(r"([.。])\s*", r"\1 <q> ", text) for text in texts]
    train_sentencepiece(texts, tmp_path / "sp", 3000, "unigram", lang, num_threads=1, **kwargs)
    return tmp_path / "sp.model"


@pytest.mark.parametrize("lang, text", [("zh", ZH_FULL_WIDTH), ("en", EN_MIXED)], ids=["zh", "en"])
def test_sentencepiece_round_trip_keeps_every_character(lang, text, tmp_path):
    tokenizer = Tokenizer(lang, "sp", sp_model_path=_sp_model(tmp_path, lang))
    tokens = tokenizer(text)
    assert tokens and all(tok == "".join(tok.split()) for tok in tokens), tokens  # no whitespace inside a token
    # full-width punctuation, letters and digits come back as written; only runs of whitespace become one space
    assert detokenize(tokens, lang, "sp") == " ".join(text.split())


def test_sentencepiece_model_trained_with_nfkc_still_works(tmp_path):
    """A model of an older summ-prepare (sentencepiece's default NFKC) loads and normalizes as it did."""
    tokenizer = Tokenizer("zh", "sp", sp_model_path=_sp_model(tmp_path, "zh", normalization="nmt_nfkc"))
    tokens = tokenizer(ZH_FULL_WIDTH + "\u3000第二句")
    assert all(tok == "".join(tok.split()) for tok in tokens), tokens
    assert detokenize(tokens, "zh", "sp") == unicodedata.normalize("NFKC", ZH_FULL_WIDTH) + " 第二句"


def test_sentencepiece_unknown_normalization_is_refused(tmp_path):
    with pytest.raises(ValueError, match="normalization 'nfkd' \\(choose from identity"):
        _sp_model(tmp_path, "zh", normalization="nfkd")
    assert not (tmp_path / "sp.model").exists()


def test_convert_jsonl_nested_fields(tmp_path, capsys):
    path = tmp_path / "aclsum.jsonl"
    path.write_text(json.dumps({"meta": {"id": 3}, "sentences": {"abstract": ["One.", " two\n"], "title": "T  1"}})
                    + "\n" + json.dumps({"meta": {"id": "b"}, "sentences": {"abstract": "x", "title": "T2"}})
                    + "\n", encoding="utf-8")
    ok(convert, ["jsonl", path, "--src-field", "sentences.abstract", "--tgt-field", "sentences.title",
                 "--id-field", "meta.id", "--out-prefix", tmp_path / "acl"], capsys)
    assert lines(tmp_path / "acl.src") == ["One. two", "x"]
    assert lines(tmp_path / "acl.tgt") == ["T 1", "T2"]
    assert lines(tmp_path / "acl.ids") == ["3", "b"]


def test_convert_jsonl_literal_dotted_key(tmp_path, capsys):
    path = tmp_path / "dots.jsonl"
    path.write_text(json.dumps({"doc.text": "literal", "doc": {"text": "nested"}, "a": {"b.c": "deep"}}) + "\n",
                    encoding="utf-8")
    ok(convert, ["jsonl", path, "--src-field", "doc.text", "--tgt-field", "a.b.c", "--out-prefix", tmp_path / "d"],
       capsys)
    assert lines(tmp_path / "d.src") == ["literal"]
    assert lines(tmp_path / "d.tgt") == ["deep"]


def test_convert_jsonl_nested_field_errors(tmp_path, capsys):
    path = tmp_path / "train.jsonl"
    cases = {
        '{"sentences": {"title": "t", "intro": "i"}}': "train.jsonl:2: missing field 'sentences.abstract' "
                                                        "('abstract' not in 'sentences'; fields there: title, intro)",
        '{"text": "t"}': "train.jsonl:2: missing field 'sentences.abstract' ('sentences' not at the top level; "
                         "fields there: text)",
        '{"sentences": "a string"}': "train.jsonl:2: field 'sentences.abstract' goes through 'sentences', "
                                     "which is str \"a string\", not a JSON object",
        '{"sentences": [1, 2]}': "train.jsonl:2: field 'sentences.abstract' goes through 'sentences', "
                                 "which is list [1, 2], not a JSON object",
        '{"sentences": {"abstract": null}}': "train.jsonl:2: missing field 'sentences.abstract' ('abstract' is "
                                             "null in 'sentences'; fields there: abstract)",
    }
    for second, message in cases.items():
        path.write_text('{"sentences": {"abstract": "a"}}\n' + second + "\n", encoding="utf-8")
        status, err = run(convert, ["jsonl", path, "--src-field", "sentences.abstract", "--no-target",
                                    "--out-prefix", tmp_path / "b"], capsys)
        assert status == 2 and message in err, (message, err)
        assert "Traceback" not in err and not (tmp_path / "b.src").exists()
