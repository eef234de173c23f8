"""Hub API (fairseq_plugins/inference/hub.py), the visualiser's CLI and TensorBoard logging, on a tiny trained model.

The model is the session's tiny one (tests/serving.py): pgn_lstm_small trained 3 updates on 200 SciTLDR-A documents
through preprocess.sh and train.sh, with --tensorboard-logdir."""
import logging
import shutil
import struct
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from conftest import run
from serving import MARKER_DOC, sample_documents, tiny_model

pytestmark = pytest.mark.slow  # every test uses a model trained through train.sh

ROOT = Path(__file__).resolve().parent.parent
GENERATION = ["--beam", "3", "--max-len-b", "20"]  # for generate.sh; the same options for summarize() below


def head(path: Path, count: int):
    with path.open(encoding="utf-8") as f:
        return [next(f).rstrip("\n") for _ in range(count)]


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """(work dir, DATA_DIR, SAVE_DIR, TensorBoard dir): the session's tiny model (serving.tiny_model)."""
    work, data, model, _ = tiny_model(tmp_path_factory)
    return work, data, model, work / "tensorboard"


@pytest.fixture(scope="module")
def summarizer(trained):
    from fairseq_plugins.inference.hub import Summarizer

    _, _, model, _ = trained
    return Summarizer.from_pretrained(model)


@pytest.fixture(scope="module")
def documents():
    """Documents of pairwise different token counts (so that any input order gives the same batches)."""
    return sample_documents()


def test_summarize_equals_generate_sh(trained, summarizer, documents, tmp_path):
    _, data, model, _ = trained
    (tmp_path / "docs.txt").write_text("\n".join(documents) + "\n", encoding="utf-8")
    config = str(trained[0] / "short.conf")
    script = run(["./generate.sh", "-c", config, "--input", str(tmp_path / "docs.txt"), str(data), str(model),
                  *GENERATION])
    expected = script.stdout.split("\n")
    assert expected[-1] == "" and len(expected) - 1 == len(documents)
    summaries = summarizer.summarize(documents, beam=3, max_len_b=20)
    assert isinstance(summaries, list) and all(isinstance(s, str) for s in summaries)
    assert summaries == expected[:-1]  # same preprocessing, beam search and OOV restoration, in input order
    assert not any("<oov-" in s or "</s>" in s for s in summaries)


def word_trigram_repeats(summary, ignore=(",", "<unk>")):
    words = summary.split()
    grams = [tuple(words[i:i + 3]) for i in range(len(words) - 2)]
    grams = [g for g in grams if not set(g) & set(ignore)]
    return len(grams) - len(set(grams))


def test_trigram_blocking_in_summarize_generate_sh_and_fairseq_generate(trained, summarizer, documents, tmp_path):
    """summarize(..., block_ngram_repeat=3) equals generate.sh --input ... --block-ngram-repeat 3 (through
    fairseq-interactive) and no summary repeats a trigram; generate.sh --split (fairseq-generate) blocks too."""
    _, data, model, _ = trained
    (tmp_path / "docs.txt").write_text("\n".join(documents) + "\n", encoding="utf-8")
    config = str(trained[0] / "short.conf")
    blocking = ["--block-ngram-repeat", "3", "--block-ignore", ","]
    script = run(["./generate.sh", "-c", config, "--input", str(tmp_path / "docs.txt"), str(data), str(model),
                  *GENERATION, "--min-len", "20", *blocking])
    blocked = summarizer.summarize(documents, beam=3, max_len_b=20, min_len=20, block_ngram_repeat=3,
                                   block_ignore=",")
    assert blocked == script.stdout.split("\n")[:-1]
    free = summarizer.summarize(documents, beam=3, max_len_b=20, min_len=20, block_ngram_repeat=0)
    assert sum(map(word_trigram_repeats, free)) > 0  # a 3-update model loops: the test has something to block
    assert sum(map(word_trigram_repeats, blocked)) == 0
    # the tokens blocking saw (--no-detok): detokenized, "a ," reads "a," and the trigrams ignoring "," change
    split = run(["./generate.sh", "--no-detok", "-c", config, "--split", "test", str(data), str(model), *GENERATION,
                 "--min-len", "20", *blocking])
    lines = split.stdout.split("\n")[:-1]
    assert len(lines) == 6 and sum(map(word_trigram_repeats, lines)) == 0


def test_copied_oov_words_are_restored_as_generate_sh_does(trained, summarizer, documents, tmp_path):
    """A copy of the checkpoint that can only copy (p_gen = 0, uniform attention) writes the most frequent source
    token: for the last document an OOV word, which both generate.sh and summarize() must restore (again and again
    once the default config's --block-immediate-repeat is off)."""
    import torch

    from fairseq_plugins.inference.hub import Summarizer

    _, data, shared, _ = trained
    model = tmp_path / "copier"  # the checkpoint that only copies goes into a copy: the session's model stays as is
    shutil.copytree(shared, model)
    copier = Summarizer.from_pretrained(model)  # a model of its own: the module's summarizer stays untouched
    decoder = copier.model.decoder
    with torch.no_grad():
        decoder.readout.switch.proj.weight.zero_()
        decoder.readout.switch.proj.bias.fill_(-200.0)
        decoder.attention.v.weight.zero_()
    state = torch.load(model / "checkpoint_best.pt", map_location="cpu")  # safe loading: register() allow-lists
    state["model"] = copier.model.state_dict()
    torch.save(state, model / "checkpoint_copy.pt")
    docs = [MARKER_DOC, documents[0], "zyxwvut zyxwvut zyxwvut is a word ."]
    (tmp_path / "docs.txt").write_text("\n".join(docs) + "\n", encoding="utf-8")
    script = run(["./generate.sh", "-c", str(trained[0] / "short.conf"), "--checkpoint", "checkpoint_copy.pt",
                  "--input", str(tmp_path / "docs.txt"), str(data), str(model), *GENERATION])
    summaries = copier.summarize(docs, beam=3, max_len_b=20)
    assert summaries == script.stdout.split("\n")[:-1]
    assert summaries[-1].split()[0] == "zyxwvut"  # the OOV word, restored
    again = copier.summarize(docs[-1:], beam=3, max_len_b=20, block_immediate_repeat=0)[0]  # the config's ban off
    assert again.split()[:3] == ["zyxwvut"] * 3
    source_words = set(MARKER_DOC.split()) | {"<", ">", "oov-2"}
    tokens = copier.summarize(docs[:1], beam=3, max_len_b=20, detok=False)[0]  # before detokenization
    assert set(tokens.split()) <= source_words  # only copying: every word comes from the source


def test_one_summary_per_input_in_order(summarizer, documents):
    lengths = [summarizer.prepare(doc)[0].numel() for doc in documents]
    assert len(set(lengths)) == len(lengths) and lengths[1] == 1  # the empty document is just </s>
    forward = summarizer.summarize(documents, beam=3, max_len_b=20, batch_size=4)  # two batches
    backward = summarizer.summarize(documents[::-1], beam=3, max_len_b=20, batch_size=4)
    assert len(forward) == len(documents)
    assert forward[1] == ""  # the empty document gets the empty summary: nothing is invented
    assert backward == forward[::-1]
    assert summarizer.summarize([]) == []
    with pytest.raises(TypeError):
        summarizer.summarize("a single string is not a list of documents")


def test_an_empty_or_blank_document_gets_an_empty_summary_and_a_warning(summarizer, documents, caplog):
    texts = ["", documents[0], " \t  "]
    with caplog.at_level(logging.WARNING, logger="fairseq_plugins.inference.hub"):
        summaries = summarizer.summarize(texts, beam=3, max_len_b=20)
    assert summaries[0] == summaries[2] == "" and summaries[1].strip()
    assert summaries[1] == summarizer.summarize(documents[:1], beam=3, max_len_b=20)[0]  # its batch-mates change nothing
    warned = [r.getMessage() for r in caplog.records if "empty" in r.getMessage()]
    assert warned == ["document 0 of 3: empty: its summary is empty", "document 2 of 3: empty: its summary is empty"]
    details = summarizer.summarize_with_details(texts[:1])[0]
    assert details.text == "" and details.input_report.empty


def test_control_characters_are_counted_warned_and_never_copied(summarizer, caplog):
    """A NUL, a bell and a bidirectional override inside a document: read as spaces or nothing, counted in its
    report and its warning, and no summary holds one (the model copies source words)."""
    text = "nul\0 inside zyxwvut\x07 \u202ezyxwvut ."
    with caplog.at_level(logging.WARNING, logger="fairseq_plugins.inference.hub"):
        summary = summarizer.summarize([text], beam=3, max_len_b=20)[0]
    assert summary == summarizer.summarize(["nul inside zyxwvut zyxwvut ."], beam=3, max_len_b=20)[0]
    assert not any(ch in summary for ch in "\0\x07\u202e")
    assert [r.getMessage() for r in caplog.records if "control" in r.getMessage()] == [
        "document 0 of 1: 3 control or invisible characters replaced by spaces or removed"]
    assert summarizer.input_reports([text])[0].invisible_characters == 3


def test_bounds_that_contradict_the_training_targets_are_named_once(summarizer, documents, caplog):
    """--min-len above the 25th percentile of the training targets' lengths: one warning with the figures, however
    many calls use it; bounds that fit give none."""
    high = summarizer.target_lengths["p25"] + 5
    with caplog.at_level(logging.WARNING, logger="fairseq_plugins.inference.hub"):
        for _ in range(2):
            summarizer.summarize(documents[:1], beam=2, min_len=high, max_len_b=summarizer.target_lengths["p99"])
        summarizer.summarize(documents[:1], beam=2, min_len=1, max_len_b=summarizer.target_lengths["p99"])
    warned = [r.getMessage() for r in caplog.records if "training summaries" in r.getMessage()]
    assert len(warned) == 1 and warned[0].startswith(f"--min-len {high} is above the length of a quarter")


def test_marker_like_token_and_oov_word_are_copyable_words(summarizer):
    from fairseq_plugins.text.markers import marker

    ids, marked, oov_words = summarizer.prepare(MARKER_DOC)
    # the word tokenizer reads the raw "<oov-2>" as "<", "oov-2", ">"; "oov-2" and "zyxwvut" are outside the
    # vocabulary, so each becomes a marker of its own and comes back verbatim after generation
    assert "zyxwvut" in oov_words and "oov-2" in oov_words
    for word in ("zyxwvut", "oov-2"):
        assert marked.count(marker(oov_words.index(word))) == 1 and word not in marked
    assert ids.numel() == len(marked) + 1 and ids[-1].item() == summarizer.src_dict.eos()
    assert (ids[:-1] >= summarizer.model.decoder.num_regular).sum().item() == sum(
        tok.startswith("<oov-") for tok in marked)  # markers are ids beyond the regular vocabulary


def test_details_agree_with_summarize_and_the_equations(summarizer, documents):
    texts = [MARKER_DOC, ""]
    details = summarizer.summarize_with_details(texts, beam=3, max_len_b=20)
    assert [d.text for d in details] == summarizer.summarize(texts, beam=3, max_len_b=20)
    d = details[0]
    ids, marked, oov_words = summarizer.prepare(MARKER_DOC)
    T, S = len(d.summary_tokens), ids.numel()
    assert d.attention.shape == (T, S) and d.coverage.shape == (T, S) and d.p_gen.shape == (T,)
    assert d.source_markers == marked + ["</s>"]
    assert d.source_tokens[d.source_markers.index(f"<oov-{oov_words.index('zyxwvut')}>")] == "zyxwvut"
    assert "zyxwvut" not in d.source_markers
    assert sum(d.source_oov) == sum(tok.startswith("<oov-") for tok in marked)
    assert d.summary_markers[-1] == "</s>" and len(d.positional_scores) == T
    np.testing.assert_allclose(d.attention.sum(axis=1), 1.0, rtol=1e-5)  # a distribution per step (eq 2)
    assert ((d.p_gen > 0) & (d.p_gen < 1)).all()
    # c^0 = 0 and c^t = sum of the attention before step t (eq 10)
    np.testing.assert_allclose(d.coverage, np.vstack([np.zeros(S), np.cumsum(d.attention, axis=0)[:-1]]),
                               rtol=1e-4, atol=1e-6)
    # the words shown are the restored ones: the summary's tokens (detok=False, generate.sh --no-detok) are them
    shown = [w for w in d.summary_tokens if w != "</s>"]
    tokens = summarizer.summarize_with_details([MARKER_DOC], beam=3, max_len_b=20, detok=False)[0]
    assert tokens.text == " ".join(shown) and tokens.summary_tokens == d.summary_tokens
    empty = details[1]
    assert empty.source_tokens == ["</s>"] and empty.attention.shape == (len(empty.summary_tokens), 1)


def test_from_pretrained_with_data_dir(trained, summarizer, tmp_path):
    from fairseq_plugins.inference.hub import Summarizer

    _, data, model, _ = trained
    bare = tmp_path / "bare"
    bare.mkdir()
    shutil.copy(model / "checkpoint_best.pt", bare / "checkpoint_best.pt")
    with pytest.raises(FileNotFoundError, match="prep.json"):
        Summarizer.from_pretrained(bare)
    # prep.json from the data dir and the dictionary from its bin/dict.src.txt: the same model
    other = Summarizer.from_pretrained(bare, data_dir=data)
    docs = [MARKER_DOC, head(ROOT / "data" / "scitldr" / "test.src", 1)[0]]
    assert other.summarize(docs, beam=2, max_len_b=10) == summarizer.summarize(docs, beam=2, max_len_b=10)
    with pytest.raises(FileNotFoundError, match="checkpoint"):
        Summarizer.from_pretrained(model, checkpoint_file="checkpoint_nope.pt")


def test_visualize_attention_cli(trained, summarizer, documents, tmp_path):
    import matplotlib.image

    from fairseq_plugins.viz.visualize import png_layout

    _, data, model, _ = trained
    (tmp_path / "docs.txt").write_text("\n".join(documents) + "\n", encoding="utf-8")
    html, png = tmp_path / "out.html", tmp_path / "out.png"
    result = run([sys.executable, "scripts/visualize_attention.py", str(model), "--data-dir", str(data),
                  "--input", str(tmp_path / "docs.txt"), "--index", "2", "--html", str(html), "--png", str(png),
                  "--beam", "3", "--max-len-b", "20", "--quiet"])
    details = summarizer.summarize_with_details([documents[2]], beam=3, max_len_b=20)[0]
    assert result.stdout == details.text + "\n"
    page = html.read_text(encoding="utf-8")
    assert page.startswith("<!DOCTYPE html>") and page.count('<tr data-step="') == len(details.summary_tokens)
    assert "zyxwvut" in page
    image = matplotlib.image.imread(png)
    layout = png_layout(len(details.source_tokens), len(details.summary_tokens), True, True)
    assert image.shape[:2] == (layout["height"], layout["width"])
    bad = subprocess.run([sys.executable, "scripts/visualize_attention.py", str(model), "--input",
                          str(tmp_path / "docs.txt"), "--index", "99", "--html", str(html)],
                         cwd=ROOT, capture_output=True, text=True)
    assert bad.returncode == 2 and "no line with index 99" in bad.stderr and "Traceback" not in bad.stderr


def read_scalars(event_file: Path):
    """{tag: [steps]} of the scalar summaries in a TensorBoard event file (TFRecord framing, Event protos)."""
    from tensorboardX.proto import event_pb2

    data, offset, scalars = event_file.read_bytes(), 0, {}
    while offset < len(data):
        (length,) = struct.unpack("<Q", data[offset:offset + 8])
        event = event_pb2.Event()
        event.ParseFromString(data[offset + 12:offset + 12 + length])  # skip length and its CRC
        offset += 12 + length + 4  # record and its CRC
        for value in event.summary.value:
            if value.WhichOneof("value") == "simple_value":
                scalars.setdefault(value.tag, []).append(event.step)
    return scalars


def test_tensorboard_logdir_writes_event_files(trained):
    _, _, _, tensorboard = trained
    for split in ("train", "valid"):
        files = sorted((tensorboard / split).glob("events.out.tfevents.*"))
        assert len(files) == 1, f"no event file for {split} in {tensorboard}"
        scalars = read_scalars(files[0])
        assert scalars.get("loss") == [3], scalars  # logged at the end of the epoch, after update 3
        assert {"nll_loss", "coverage", "p_gen"} <= set(scalars)  # the criterion's own metrics too


# ---------------------------------------------------------------------------- what the model does not read
def long_document():
    return " ".join(head(ROOT / "data" / "scitldr" / "test.src", 3))  # far beyond max_source_len 150


def test_truncated_document_is_warned_counted_and_refusable(summarizer, caplog):
    from fairseq_plugins.inference.hub import LossyInputError

    short = "we propose a new method for training neural networks ."
    with caplog.at_level("WARNING", logger="fairseq_plugins.inference.hub"):
        details = summarizer.summarize_with_details([long_document(), short], beam=2, max_len_b=10)
    report = details[0].input_report
    assert report.tokens > 200 and report.truncated_tokens == report.tokens - 150 and report.lossy
    assert len(details[0].source_tokens) == 151  # what the model read: 150 tokens and </s>
    assert not details[1].input_report.lossy and details[1].input_report.tokens == len(short.split())
    warned = [r for r in caplog.records if r.name == "fairseq_plugins.inference.hub"]
    assert len(warned) == 1 and warned[0].levelname == "WARNING"  # one per lossy document, none for the other
    assert "document 0 of 2" in warned[0].getMessage() and f"of its {report.tokens} tokens" in warned[0].getMessage()
    with pytest.raises(LossyInputError, match="1 of 2 documents cannot be read whole") as refused:
        summarizer.summarize([short, long_document()], strict=True)
    assert list(refused.value.reports) == [1] and isinstance(refused.value, ValueError)
    assert summarizer.summarize([short], beam=2, max_len_b=10, strict=True)  # a whole document passes


def test_oov_words_beyond_the_markers_are_counted_as_unk(summarizer, caplog):
    import copy

    _, marked, oov_words = summarizer.prepare(MARKER_DOC)
    assert len(oov_words) >= 2 and "zyxwvut" in oov_words
    unk = sum(tok.startswith("<oov-") and tok != "<oov-0>" for tok in marked)  # the words beyond the first
    few = copy.copy(summarizer)
    few.num_markers = 1  # one marker: only the document's first OOV word can be copied
    with caplog.at_level("WARNING", logger="fairseq_plugins.inference.hub"):
        d = few.summarize_with_details([MARKER_DOC], beam=2, max_len_b=10)[0]
    assert d.oov_words == oov_words[:1] and d.source_markers.count("<unk>") == unk
    report = d.input_report
    assert (report.overflow_words, report.unk_tokens, report.truncated_tokens) == (len(oov_words) - 1, unk, 0)
    assert report.lossy and not summarizer.summarize_with_details([MARKER_DOC], beam=2)[0].input_report.lossy
    assert any(f"{len(oov_words) - 1} OOV words ({unk} tokens) beyond the 1 OOV markers read as <unk>"
               in r.getMessage() for r in caplog.records)


# ---------------------------------------------------------------------------- devices
class Stop(Exception):
    """Raised by a recording forward once it has seen its inputs."""


def tensor_devices(value):
    """The devices of every tensor in (nested) args."""
    import torch

    if isinstance(value, torch.Tensor):
        return [value.device]
    if isinstance(value, dict):
        value = list(value.values())
    if isinstance(value, (list, tuple)):
        return [device for item in value for device in tensor_devices(item)]
    return []


def record_inputs(monkeypatch, module, seen, stop=False):
    """Wrap ``module.forward`` to append the devices of its tensor inputs to ``seen`` (then raise Stop)."""
    original = module.forward

    def forward(*args, **kwargs):
        seen.extend(tensor_devices([args, kwargs]))
        if stop:
            raise Stop
        return original(*args, **kwargs)

    monkeypatch.setattr(module, "forward", forward)


def test_every_input_goes_to_the_summarizer_device(trained, monkeypatch):
    import torch

    from fairseq_plugins.inference.hub import Summarizer, teacher_force

    _, _, model, _ = trained
    on_cpu = Summarizer.from_pretrained(model, device="cpu")
    assert on_cpu.device == torch.device("cpu")
    seen = []
    record_inputs(monkeypatch, on_cpu.model.encoder, seen)
    record_inputs(monkeypatch, on_cpu.model, seen)
    details = on_cpu.summarize_with_details([MARKER_DOC], beam=2, max_len_b=10)[0]
    assert details.text and seen and set(seen) == {torch.device("cpu")}
    ids = on_cpu.prepare(MARKER_DOC)[0]
    # A device other than the CPU: "meta" (shapes only).  The beam search stops at the encoder's inputs,
    # teacher forcing at the model's; both must be on the device, given at loading or moved to later.
    for summarizer in (Summarizer.from_pretrained(model, device="meta"), on_cpu):
        summarizer.model.to("meta")  # as summarizer.model.cuda() would
        assert summarizer.device == torch.device("meta")
        seen = []
        record_inputs(monkeypatch, summarizer.model.encoder, seen, stop=True)
        with pytest.raises(Stop):
            summarizer.summarize([MARKER_DOC, "a second document ."], beam=2, max_len_b=10)
        record_inputs(monkeypatch, summarizer.model, seen, stop=True)
        with pytest.raises(Stop):
            teacher_force(summarizer.model, ids, ids)  # CPU inputs
        assert len(seen) == 5 and set(seen) == {torch.device("meta")}  # tokens, lengths; src, lengths, prev


def test_unknown_or_missing_device_is_a_clear_error(trained):
    import torch

    from fairseq_plugins.inference.hub import Summarizer
    from fairseq_plugins.inference.options import resolve_device

    _, _, model, _ = trained
    with pytest.raises(ValueError, match="unknown device 'gpu'"):
        Summarizer.from_pretrained(model, device="gpu")
    expected = "cuda" if torch.cuda.is_available() else "cpu"
    assert resolve_device(None) == torch.device(expected)  # the default: CUDA when available
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match="'cuda:0': CUDA is not available on this machine"):
            Summarizer.from_pretrained(model, device="cuda:0")


# ---------------------------------------------------------------------------- threads
def test_summarize_leaves_the_warning_filters_alone(summarizer, monkeypatch):
    """The warning filters are process-wide: a call that changed them (warnings.catch_warnings) even for a
    moment would garble those of concurrent calls from other threads."""
    import warnings

    states = []
    build = summarizer.task.build_dataset_for_inference

    def build_dataset(*args, **kwargs):
        dataset = build(*args, **kwargs)
        collater = dataset.collater
        dataset.collater = lambda samples: (states.append(warnings.filters is before
                                                          and warnings.filters == content), collater(samples))[1]
        return dataset

    monkeypatch.setattr(summarizer.task, "build_dataset_for_inference", build_dataset)
    with warnings.catch_warnings(record=True) as caught:  # the test's own, on this thread alone
        warnings.simplefilter("always")
        before, content = warnings.filters, list(warnings.filters)
        summarizer.summarize(["a first document .", "a second one ."], beam=2, max_len_b=10, batch_size=1)
    assert states == [True, True]  # one per batch, each collated with the filters untouched
    assert not [w for w in caught if "pin_memory" in str(w.message)]  # there was nothing to silence


def test_concurrent_calls_from_threads_give_the_sequential_summaries(summarizer, documents):
    import warnings
    from concurrent.futures import ThreadPoolExecutor

    inputs = [documents[i:i + 3] for i in range(4)]
    expected = [summarizer.summarize(docs, beam=2, max_len_b=10) for docs in inputs]
    before = list(warnings.filters)
    with ThreadPoolExecutor(4) as pool:
        got = list(pool.map(lambda docs: summarizer.summarize(docs, beam=2, max_len_b=10), inputs * 2))
    assert got == expected * 2
    assert warnings.filters == before


# ---------------------------------------------------------------------------- the API behaves like the command
@pytest.mark.parametrize("options, name, hint", [
    ({"beam_size": 1}, "beam_size", "did you mean 'beam'?"),
    ({"block_ngram_repat": 3}, "block_ngram_repat", "did you mean 'block_ngram_repeat'?"),
    ({"beam": 2, "qwertyuiop": 1}, "qwertyuiop", "known options: allow_unk, batch_size, beam,"),
])
def test_unknown_or_misspelled_option_is_a_type_error(summarizer, options, name, hint):
    with pytest.raises(TypeError, match=f"unexpected keyword argument '{name}'") as err:
        summarizer.summarize(["a document ."], **options)
    assert hint in str(err.value)
    with pytest.raises(TypeError, match=name):
        summarizer.summarize_with_details(["a document ."], **options)


@pytest.mark.parametrize("texts, message", [
    (None, r"takes a list of documents \(str\), got None"),
    ([None], "document 0 is NoneType, not a str"),
    (["fine", b"bytes"], "document 1 is bytes, not a str"),
    (7, r"takes a list of documents \(str\), got int"),
])
def test_none_or_a_document_that_is_no_string_is_a_type_error(summarizer, texts, message):
    with pytest.raises(TypeError, match=message):
        summarizer.summarize(texts)


def test_bom_and_carriage_return_are_read_as_generate_sh_reads_a_file(trained, summarizer, tmp_path):
    """A file with a byte-order mark and \\r\\n line ends, through summ-prepare --apply (generate.sh --input's
    first step), gives the same tokens as the same lines given as strings, BOM and \\r included."""
    _, _, model, _ = trained
    lines = ["\ufeffwe propose a zyxwvut method .", "a second\rdocument with a carriage return .", ""]
    raw = tmp_path / "crlf.txt"
    raw.write_bytes("".join(line + "\r\n" for line in lines).encode("utf-8"))
    run(["summ-prepare", "--apply", str(model / "prep.json"), "--input", str(raw), "--out-prefix",
         str(tmp_path / "prepared")])
    expected = (tmp_path / "prepared.src").read_text(encoding="utf-8").split("\n")[:-1]
    as_strings = [" ".join(summarizer.prepare(line + "\r")[1]) for line in lines]
    assert as_strings == expected
    assert as_strings[0].split()[:2] == ["we", "propose"]  # the BOM is no word of its own, nor glued to "we"
    clean = summarizer.summarize(["we propose a zyxwvut method ."], beam=2, max_len_b=10)
    assert summarizer.summarize([lines[0]], beam=2, max_len_b=10) == clean
    assert "\ufeff" not in summarizer.summarize(["\ufeffzyxwvut zyxwvut ."], beam=2, max_len_b=10)[0]


def test_summarize_logs_nothing_at_info_level(summarizer, caplog):
    with caplog.at_level("DEBUG"):
        summarizer.summarize(["we propose a new method .", "a second document ."], beam=2, max_len_b=10)
    assert [r.getMessage() for r in caplog.records if r.levelno >= 20] == []  # INFO and above: none
