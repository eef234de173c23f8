"""Pretrained word embeddings: the word2vec/GloVe reader, fill_embedding/freeze, and scripts/train_word2vec.py.

A real (small) word2vec model is trained with gensim on SciTLDR abstracts tokenized by the project's tokenizer,
saved by gensim in both word2vec formats and written out as GloVe text, then read back into a fairseq
Dictionary laid out as summ-prepare writes it (specials, words, <oov-K> markers, plus words the model lacks).
"""
import gzip
import importlib.util
import itertools
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
import torch

from fairseq.data import Dictionary

from conftest import command_env
from fairseq_plugins.modules.factories import Embedding
from fairseq_plugins.modules.pretrained_embeddings import fill_embedding, freeze, load_pretrained
from fairseq_plugins.text.word_vectors import EmbeddingFileError, detect_format
from fairseq_plugins.cli import prepare
from fairseq_plugins.text.markers import is_reserved, marker
from fairseq_plugins.text.textio import read_lines
from fairseq_plugins.text.tokenization import Tokenizer

REPO = Path(__file__).resolve().parent.parent
SCITLDR = REPO / "data" / "scitldr"
SCRIPT = REPO / "scripts" / "train_word2vec.py"
DIM = 12
UNSEEN = ["zzunseenword", "qqneverseen"]
RESERVED_IN_FILE = ["<unk>", marker(1), "madeupword0000"]  # the model has vectors for these: never used


def head_tokens(path, n, tokenizer):
    return [tokenizer(line) for _, line in itertools.islice(read_lines(path), n)]


@pytest.fixture(scope="module")
def w2v(tmp_path_factory):
    """A gensim model, its three files, and a dictionary of its text plus unseen words, 'The' and markers."""
    from gensim.models import Word2Vec

    tmp = tmp_path_factory.mktemp("w2v")
    docs = head_tokens(SCITLDR / "train.src", 300, Tokenizer("en", "word"))
    docs.append(RESERVED_IN_FILE * 3 + ["the"])
    model = Word2Vec(docs, vector_size=DIM, window=3, min_count=2, epochs=1, workers=1, seed=3, sg=0)
    kv = model.wv
    assert all(word in kv.key_to_index for word in RESERVED_IN_FILE)
    paths = {"word2vec-binary": tmp / "vec.bin", "word2vec-text": tmp / "vec.txt", "glove": tmp / "glove.txt"}
    kv.save_word2vec_format(str(paths["word2vec-binary"]), binary=True)
    kv.save_word2vec_format(str(paths["word2vec-text"]), binary=False)
    with open(paths["glove"], "w", encoding="utf-8") as out:
        for word in kv.index_to_key:
            out.write(word + " " + " ".join(f"{x:.6f}" for x in kv[word]) + "\n")

    counts = Counter(tok for doc in docs for tok in doc if not is_reserved(tok))
    dictionary = Dictionary()
    for word, n in sorted(counts.items(), key=lambda item: (-item[1], item[0])):
        dictionary.add_symbol(word, n)
    for word in UNSEEN + ["The"]:
        dictionary.add_symbol(word, 1)
    for k in range(4):
        dictionary.add_symbol(marker(k), 0)
    dictionary.add_symbol("madeupword0000", 0)
    expected = [i for i, w in enumerate(dictionary.symbols)
                if i >= dictionary.nspecial and not is_reserved(w) and w in kv.key_to_index]
    regular = sum(1 for i, w in enumerate(dictionary.symbols) if i >= dictionary.nspecial and not is_reserved(w))
    assert 500 < len(expected) < regular  # words seen once fall under min_count: some are missing
    return {"kv": kv, "paths": paths, "dict": dictionary, "expected": expected, "regular": regular, "tmp": tmp}


def fresh_embedding(dictionary):
    torch.manual_seed(0)
    emb = Embedding(len(dictionary), DIM, dictionary.pad())
    return emb, emb.weight.detach().clone()


def check_filled(w2v, fmt, path=None, exact=True, lowercase_fallback=False):
    dictionary, kv = w2v["dict"], w2v["kv"]
    emb, before = fresh_embedding(dictionary)
    report = fill_embedding(emb, path or w2v["paths"][fmt], dictionary, lowercase_fallback=lowercase_fallback)
    weight = emb.weight.detach()
    assert report.fmt == fmt
    found = torch.zeros(len(dictionary), dtype=torch.bool)
    found[w2v["expected"]] = True
    if lowercase_fallback:
        found[dictionary.index("The")] = True
    for i in found.nonzero().squeeze(1).tolist():
        word = dictionary[i]
        want = torch.from_numpy(kv[word if word != "The" else "the"].copy())
        if exact:
            assert torch.equal(weight[i], want), word
        else:
            assert torch.allclose(weight[i], want, rtol=0, atol=2e-6), word
    assert torch.equal(weight[~found], before[~found])  # specials, markers, unseen: initialization kept
    assert torch.count_nonzero(weight[dictionary.pad()]) == 0
    for word in RESERVED_IN_FILE + UNSEEN + [marker(0), "<s>", "</s>"]:
        assert torch.equal(weight[dictionary.index(word)], before[dictionary.index(word)]), word
    assert report.found == len(w2v["expected"]) + lowercase_fallback
    assert report.found_lowercase == int(lowercase_fallback)
    assert report.regular == w2v["regular"]
    assert report.file_vectors == len(kv) and report.file_dim == DIM
    assert set(UNSEEN) <= set(dictionary.symbols)
    assert report.missing_examples and all(w not in kv.key_to_index for w in report.missing_examples)
    assert f"found {report.found} of {report.regular}" in str(report)
    return report


@pytest.mark.parametrize("fmt", ["word2vec-binary", "word2vec-text", "glove"])
def test_fill_rows_from_each_format(w2v, fmt):
    check_filled(w2v, fmt, exact=fmt == "word2vec-binary")


def test_text_format_matches_to_float_tolerance(w2v):
    text, found, _ = load_pretrained(w2v["paths"]["word2vec-text"], w2v["dict"], DIM)
    binary, found_b, _ = load_pretrained(w2v["paths"]["word2vec-binary"], w2v["dict"], DIM)
    assert torch.equal(found, found_b) and found.sum() == len(w2v["expected"])
    assert torch.allclose(text, binary, rtol=1e-6, atol=0)
    assert torch.count_nonzero(text[~found]) == 0  # load_pretrained: zeros where nothing was found


def test_gzip_and_word2vec_c_binary_layout(w2v):
    """A .gz file, and the word2vec.c binary layout (a newline after every vector, which gensim omits)."""
    tmp, kv = w2v["tmp"], w2v["kv"]
    gz = tmp / "vec.bin.gz"
    gz.write_bytes(gzip.compress(w2v["paths"]["word2vec-binary"].read_bytes()))
    check_filled(w2v, "word2vec-binary", path=gz)
    c_style = tmp / "c_style.bin"
    with open(c_style, "wb") as out:
        out.write(f"{len(kv)} {DIM}\n".encode())
        for word in kv.index_to_key:
            out.write(word.encode() + b" " + kv[word].astype("<f4").tobytes() + b"\n")
    check_filled(w2v, "word2vec-binary", path=c_style)


def test_lowercase_fallback(w2v):
    emb, _ = fresh_embedding(w2v["dict"])
    report = fill_embedding(emb, w2v["paths"]["word2vec-binary"], w2v["dict"])
    assert "The" not in w2v["kv"].key_to_index and report.found_lowercase == 0
    report = check_filled(w2v, "word2vec-binary", lowercase_fallback=True)
    assert "1 by lower-case fallback" in str(report)


def test_detect_format_rule(w2v, tmp_path):
    for fmt, path in w2v["paths"].items():
        assert detect_format(path) == fmt
    # a GloVe file whose first word is a number is still GloVe (its first line has more than two fields)
    numeric = tmp_path / "numeric.txt"
    numeric.write_text("2019 0.5 0.25\nthe 1 2\n", encoding="utf-8")
    assert detect_format(numeric) == "glove"
    header_only = tmp_path / "empty.txt"
    header_only.write_text("0 5\n", encoding="utf-8")
    assert detect_format(header_only) == "word2vec-text"


def test_dimension_mismatch_names_file_and_dims(w2v):
    for fmt, path in w2v["paths"].items():
        with pytest.raises(EmbeddingFileError) as err:
            load_pretrained(path, w2v["dict"], DIM + 4, fmt=fmt)
        message = str(err.value)
        assert str(path) in message and f"dimension {DIM} " in message and f"dimension {DIM + 4}" in message


def lines_of(path):
    return Path(path).read_text(encoding="utf-8").split("\n")[:-1]


def write_lines(path, rows):
    Path(path).write_text("".join(r + "\n" for r in rows), encoding="utf-8")
    return path


def error_of(path, dictionary, fmt="auto"):
    with pytest.raises(EmbeddingFileError) as err:
        load_pretrained(path, dictionary, DIM, fmt=fmt)
    return str(err.value)


def test_malformed_text_lines_are_named(w2v, tmp_path):
    rows = lines_of(w2v["paths"]["word2vec-text"])
    dictionary = w2v["dict"]
    for k in (3, 5, 7):  # these file lines hold regular dictionary words
        assert rows[k].split()[0] in dictionary.indices and not is_reserved(rows[k].split()[0])
    bad = list(rows)
    bad[5] = " ".join(rows[5].split()[:-1] + ["1.5abc"])
    message = error_of(write_lines(tmp_path / "value.txt", bad), dictionary)
    assert f"{tmp_path / 'value.txt'}:6:" in message and "'1.5abc'" in message and "not a number" in message
    bad = list(rows)
    bad[3] = " ".join(rows[3].split()[:-2])
    message = error_of(write_lines(tmp_path / "short.txt", bad), dictionary)
    assert f"short.txt:4: {DIM - 1} fields, expected {DIM + 1}" in message
    bad = list(rows)
    bad[7] = " ".join(rows[7].split()[:-1] + ["nan"])
    message = error_of(write_lines(tmp_path / "nan.txt", bad), dictionary)
    assert "nan.txt:8:" in message and "non-finite" in message
    bad = list(rows)
    bad[9] = ""
    assert "empty.txt:10: empty line" in error_of(write_lines(tmp_path / "empty.txt", bad), dictionary)
    count = int(rows[0].split()[0])
    bad = [f"{count + 1} {DIM}"] + rows[1:]
    message = error_of(write_lines(tmp_path / "count.txt", bad), dictionary)
    assert f"announces {count + 1} vectors but the file has {count}" in message
    message = error_of(write_lines(tmp_path / "header.txt", ["12 dims"] + rows[1:]), dictionary, "word2vec-text")
    assert "header.txt:1: bad word2vec-text header" in message


def test_glove_lines_and_words_with_spaces(w2v, tmp_path):
    rows = lines_of(w2v["paths"]["glove"])
    dictionary = w2v["dict"]
    values = " ".join(["0.5"] * DIM)
    spaced = rows[:3] + [f". . . {values}", f"a b {values}"] + rows[3:]
    path = write_lines(tmp_path / "spaced.txt", spaced)
    _, found, report = load_pretrained(path, dictionary, DIM)
    assert report.fmt == "glove" and report.skipped_spaced_words == 2
    assert report.spaced_word_examples == [". . .", "a b"]
    assert found.sum() == len(w2v["expected"]) and "2 file words containing spaces skipped" in str(report)
    bad = list(rows)
    bad[2] = rows[2] + " extra"
    message = error_of(write_lines(tmp_path / "extra.txt", bad), dictionary)
    assert f"extra.txt:3: {DIM + 2} fields, expected {DIM + 1}" in message
    message = error_of(write_lines(tmp_path / "hdr.txt", ["5 12"] + rows), dictionary, "glove")
    assert "looks like a word2vec header" in message


def test_binary_truncated_or_malformed(w2v, tmp_path):
    data = w2v["paths"]["word2vec-binary"].read_bytes()
    kv, dictionary = w2v["kv"], w2v["dict"]
    last = kv.index_to_key[-1].encode()
    last_offset = len(data) - (len(last) + 1 + 4 * DIM)
    cut = tmp_path / "cut.bin"
    cut.write_bytes(data[:-5])
    message = error_of(cut, dictionary, "word2vec-binary")
    assert "truncated" in message and f"byte offset {last_offset}" in message and str(cut) in message
    assert f"needs {4 * DIM} bytes after the word, only {4 * DIM - 5} left" in message
    header_end = data.index(b"\n") + 1
    more = tmp_path / "more.bin"
    more.write_bytes(f"{len(kv) + 1} {DIM}\n".encode() + data[header_end:])
    message = error_of(more, dictionary, "word2vec-binary")
    assert f"announces {len(kv) + 1} vectors but the data ends after {len(kv)}" in message
    junk = tmp_path / "junk.bin"
    junk.write_bytes(data + b"junk")
    assert f"byte offset {len(data)}: data continues" in error_of(junk, dictionary, "word2vec-binary")
    header = tmp_path / "header.bin"
    header.write_bytes(b"vectors: many\n" + data[header_end:])
    assert "header.bin:1: bad word2vec-binary header" in error_of(header, dictionary, "word2vec-binary")


def test_missing_file_and_bad_arguments(w2v, tmp_path):
    missing = tmp_path / "nope.bin"
    assert f"{missing}: no such file" in error_of(missing, w2v["dict"])
    with pytest.raises(ValueError, match="unknown embedding format"):
        load_pretrained(w2v["paths"]["glove"], w2v["dict"], DIM, fmt="fasttext")
    with pytest.raises(ValueError, match="rows but the dictionary has"):
        fill_embedding(Embedding(len(w2v["dict"]) + 1, DIM, 1), w2v["paths"]["glove"], w2v["dict"])


def test_freeze():
    emb = Embedding(10, 4, 1)
    assert freeze(emb) is emb and not emb.weight.requires_grad
    assert not emb(torch.tensor([2, 3])).requires_grad  # nothing to update: fairseq's optimizer skips it
    freeze(emb, trainable=True)
    assert emb.weight.requires_grad
    emb(torch.tensor([2, 3])).sum().backward()
    assert emb.weight.grad is not None and emb.weight.grad[2].abs().sum() > 0


# ----------------------------------------------------------------------------------------------- the CLI
@pytest.fixture(scope="module")
def prepared(tmp_path_factory):
    """A raw dir of the first 200 lines of every SciTLDR split and its summ-prepare output (unit word)."""
    tmp = tmp_path_factory.mktemp("cli")
    raw = tmp / "raw"
    raw.mkdir()
    for split in ("train", "valid", "test"):
        for side in ("src", "tgt"):
            rows = [line for _, line in itertools.islice(read_lines(SCITLDR / f"{split}.{side}"), 200)]
            write_lines(raw / f"{split}.{side}", rows)
    assert prepare.main(["--raw-dir", str(raw), "--out-dir", str(tmp / "data"), "--unit", "word",
                         "--vocab-size", "1500"]) == 0
    extra = write_lines(tmp / "extra.txt", ["Zyxwvutsr qwertyuiopasd.", "Mnbvcxzlkj!"])
    return {"tmp": tmp, "raw": raw, "data": tmp / "data", "extra": extra}


def run_script(args):
    return subprocess.run([sys.executable, str(SCRIPT), *map(str, args)], capture_output=True, text=True,
                          timeout=120, env=command_env())


def token_set(paths, tokenizer):
    return {tok for path in paths for _, line in read_lines(path) for tok in tokenizer(line)}


@pytest.mark.slow
def test_cli_with_prep_trains_on_every_split_and_extra(prepared):
    from gensim.models import KeyedVectors

    out = prepared["tmp"] / "w2v.txt"
    result = run_script(["--prep", prepared["data"] / "prep.json", "--extra", prepared["extra"], "--out", out,
                         "--format", "word2vec-text", "--dim", "16", "--epochs", "2", "--min-count", "1",
                         "--workers", "1"])
    assert result.returncode == 0, result.stderr
    assert "epoch 2/2 done" in result.stderr and "found 1500 of 1500 dictionary words" in result.stderr
    kv = KeyedVectors.load_word2vec_format(str(out), binary=False)
    files = sorted(prepared["raw"].iterdir()) + [prepared["extra"]]
    assert len(files) == 7
    # the vocabulary is exactly the tokens of all six raw files plus the extra file, as summ-prepare tokenizes
    assert set(kv.key_to_index) == token_set(files, Tokenizer("en", "word"))
    assert "zyxwvutsr" in kv.key_to_index and "Zyxwvutsr" not in kv.key_to_index
    dictionary = Dictionary.load(str(prepared["data"] / "dict.txt"))
    emb = Embedding(len(dictionary), 16, dictionary.pad())
    report = fill_embedding(emb, out, dictionary)
    assert report.fmt == "word2vec-text" and report.found == report.regular == 1500
    i = dictionary.index("the")
    assert torch.allclose(emb.weight[i].detach(), torch.from_numpy(kv["the"].copy()), rtol=1e-6, atol=0)
    assert not list(prepared["tmp"].glob(".train_word2vec*"))  # the tokenized temporary file is gone


@pytest.mark.slow
def test_cli_direct_tokenization_binary(prepared):
    out = prepared["tmp"] / "train_only.bin"
    result = run_script(["--raw-dir", prepared["raw"], "--splits", "train", "--lang", "en", "--unit", "keep",
                         "--lowercase", "--out", out, "--dim", "8", "--epochs", "1", "--min-count", "3", "--cbow"])
    assert result.returncode == 0, result.stderr
    counts = Counter(tok for path in (prepared["raw"] / "train.src", prepared["raw"] / "train.tgt")
                     for _, line in read_lines(path) for tok in line.lower().split())
    frequent = {tok for tok, n in counts.items() if n >= 3}
    words = Dictionary()
    for tok in sorted(frequent) + ["zzunseenword"]:
        words.add_symbol(tok)
    _, _, report = load_pretrained(out, words, 8)
    assert report.fmt == "word2vec-binary" and report.file_vectors == len(frequent)
    assert report.found == len(frequent) and report.missing_examples == ["zzunseenword"]


def load_script():
    spec = importlib.util.spec_from_file_location("train_word2vec", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_cli_errors(prepared, tmp_path, capsys):
    script = load_script()
    partial = tmp_path / "raw"
    partial.mkdir()
    for name in ("train.src", "train.tgt", "valid.src", "valid.tgt"):
        (partial / name).write_bytes((prepared["raw"] / name).read_bytes())
    cases = [
        (["--raw-dir", partial, "--lang", "en"], f"missing file {partial / 'test.src'}"),
        (["--raw-dir", partial, "--splits", "train", "--lang", "en", "--extra", tmp_path / "nope.txt"],
         f"{tmp_path / 'nope.txt'}: no such file (--extra)"),
        (["--raw-dir", partial, "--splits", "train"], "give --prep"),
        (["--prep", tmp_path / "prep.json"], f"{tmp_path / 'prep.json'}: no such file"),
        (["--prep", prepared["data"] / "prep.json", "--unit", "word"], "do not combine"),
        (["--raw-dir", partial, "--lang", "en", "--unit", "sp"], "--unit sp needs --sp-model"),
    ]
    for argv, expected in cases:
        capsys.readouterr()
        status = script.main([str(a) for a in argv + ["--out", tmp_path / "out.bin"]])
        err = capsys.readouterr().err
        assert status == 2 and expected in err, (argv, err)
    assert not (tmp_path / "out.bin").exists()
