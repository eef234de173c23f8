"""``fairseq-generate --scoring rouge`` prints what ``generate.sh --score`` prints as "F1 mean over documents
(exact)": OOV markers restored, scored against DATA/ref/SPLIT.tgt, or it refuses and says what to run instead.

A hand-made corpus (preprocess.sh, no model) checks the cases of the issue: a target ``<<unk>>`` against a
hypothesis ``<unk>``, the markers ``<oov-0>`` and ``<oov-7>``, documents with the same target.  The
pgn_lstm_small of test_eval_rouge.py (6 updates on 200 SciTLDR-A documents) checks real fairseq-generate runs on
its 20 validation documents against generate.sh --score.
"""
import re
from pathlib import Path

import pytest

from conftest import run

from fairseq_plugins.scoring.rouge_python import RougeScorer, split_sentences
from fairseq_plugins.text.textio import UserError

from test_eval_rouge import trained  # noqa: F401  (fixture: a pgn_lstm_small trained 6 updates, 20 valid docs)

pytestmark = pytest.mark.slow  # every test runs fairseq-generate on a trained model

ROOT = Path(__file__).resolve().parent.parent
USER_DIR = str(ROOT / "fairseq_plugins")
GENERATION = ["--beam", "3", "--max-len-a", "0", "--max-len-b", "20", "--min-len", "5", "--batch-size", "8",
              "--block-ngram-repeat", "3", "--block-immediate-repeat", "1"]  # what generate.sh adds from the config:
# the same search on both paths
SCORE_REFERENCE = ["--score-reference", "--batch-size", "8"]
SCORER_LINE = re.compile(r"R-1 ([\d.]+) R-2 ([\d.]+) R-L ([\d.]+)")
EXACT_LINE = re.compile(r"F1 mean over documents \(exact\): ROUGE-1 ([\d.]+) ROUGE-2 ([\d.]+) ROUGE-L ([\d.]+)")

TRAIN = [("the model is good . we use it here .", "the model is good"),
         ("we use the model here .", "we use it"),
         ("it is good to use the model .", "it is good")]
OOV_WORDS = "aaone bbtwo ccthree ddfour eefive ffsix ggseven hheight"
TEST = [("the model is good .", "Zyxw Qwvu"),  # two target words in no vocabulary and not in the source: <unk>
        (f"we use {OOV_WORDS} here .", "Aaone is good"),  # aaone is the source's OOV word 0: <oov-0>
        ("it is good .", "It is good"),  # documents 2 and 3 are the same: interchangeable
        ("it is good .", "It is good")]
LONG = "It is good " * 20  # 60 tokens: preprocess.sh (scitldr_small) truncates targets to 60 tokens
VALID = [("it is good .", LONG + "model"),  # the same target in fairseq's output, different references:
         ("it is good .", LONG + "here")]  # fairseq's strings cannot tell the two documents apart


def write_split(raw: Path, split: str, pairs) -> None:
    (raw / f"{split}.src").write_text("".join(src + "\n" for src, _ in pairs), encoding="utf-8")
    (raw / f"{split}.tgt").write_text("".join(tgt + "\n" for _, tgt in pairs), encoding="utf-8")


@pytest.fixture(scope="module")
def hand_data(tmp_path_factory):
    work = tmp_path_factory.mktemp("scorer_hand")
    raw = work / "raw"
    raw.mkdir()
    for split, pairs in (("train", TRAIN), ("valid", VALID), ("test", TEST)):
        write_split(raw, split, pairs)
    run(["./preprocess.sh", raw, work / "data"])
    return work / "data"


def build_scorer(data: Path, *options: str):
    """The scorer as fairseq-generate builds it, for DATA/bin and ``options``."""
    import fairseq_plugins.scoring.rouge  # noqa: F401  (registers "rouge")
    from fairseq import options as fairseq_options, scoring
    from fairseq.dataclass.utils import convert_namespace_to_omegaconf

    parser = fairseq_options.get_generation_parser()
    args = fairseq_options.parse_args_and_arch(
        parser, [str(data / "bin"), "--path", "unused.pt", "--scoring", "rouge", *options])
    return scoring.build_scorer(convert_namespace_to_omegaconf(args).scoring, None)


def figures(scorer):
    return tuple(float(x) for x in SCORER_LINE.search(scorer.result_string()).groups())


def python_mean(refs, hyps):
    """generate.sh --score's exact mean (percent) of restored hypotheses against raw references."""
    corpus = RougeScorer().corpus_scores([split_sentences(r) for r in refs], [split_sentences(h) for h in hyps])
    return tuple(100 * corpus[name].fmeasure for name in ("rouge1", "rouge2", "rougeL"))


# ---------------------------------------------------------------------------------------------------------
# The cases of the issue, on fairseq's own target strings (T- lines)
# ---------------------------------------------------------------------------------------------------------
def test_unk_and_markers_are_scored_as_restored_text(hand_data):
    assert (hand_data / "tok" / "test.tgt").read_text().split("\n")[:2] == ["<unk> <unk>", "<oov-0> is good"]
    scorer = build_scorer(hand_data, "--gen-subset", "test")
    # the order of fairseq-generate's batches, not of the documents
    scorer.add_string("it is good", "it is good")
    scorer.add_string("<oov-0> is good", "<oov-7> is good")
    scorer.add_string("<<unk>> <<unk>>", "<unk> <unk>")
    scorer.add_string("it is good", "good")
    # "<unk> <unk>" is not "Zyxw Qwvu" (the old scorer: R-1 = R-2 = 1 on "unk unk"), <oov-7> is hheight, not
    # aaone (the old scorer: "oov" matched "oov")
    expected = python_mean(["Zyxw Qwvu", "Aaone is good", "It is good", "It is good"],
                           ["<unk> <unk>", "hheight is good", "it is good", "good"])
    assert expected[0] == pytest.approx(100 * (0 + 2 / 3 + 1 + 0.5) / 4)
    assert figures(scorer) == pytest.approx(expected, abs=0.006)
    assert scorer.score() == pytest.approx(expected[2])  # ROUGE-L F1 by default


def test_rouge_metric_picks_the_score(hand_data):
    scorer = build_scorer(hand_data, "--gen-subset", "test", "--rouge-metric", "rouge2")
    for target, hypothesis in (("<<unk>> <<unk>>", "<unk> <unk>"), ("<oov-0> is good", "<oov-0> is good"),
                               ("it is good", "it is"), ("it is good", "it is")):
        scorer.add_string(target, hypothesis)
    expected = python_mean(["Zyxw Qwvu", "Aaone is good", "It is good", "It is good"],
                           ["<unk> <unk>", "aaone is good", "it is", "it is"])
    assert scorer.score() == pytest.approx(expected[1])
    assert expected[1] == pytest.approx(100 * (0 + 1 + 2 * 2 / 3) / 4)


# ---------------------------------------------------------------------------------------------------------
# Refusals: where the figure cannot be generate.sh --score's
# ---------------------------------------------------------------------------------------------------------
def test_same_target_with_different_words_is_refused(hand_data):
    scorer = build_scorer(hand_data, "--gen-subset", "valid")
    target = " ".join(LONG.lower().split())
    assert (hand_data / "tok" / "valid.tgt").read_text() == f"{target}\n{target}\n"
    scorer.add_string(target, "the model")  # R-1 0.5 precision against document 0, 0 against document 1
    scorer.add_string(target, "we use it here")
    with pytest.raises(UserError, match=r"documents 0, 1 of 'valid'.*generate\.sh --split valid --score"):
        scorer.result_string()


def test_missing_documents_are_refused(hand_data):
    scorer = build_scorer(hand_data, "--gen-subset", "test")
    scorer.add_string("<<unk>> <<unk>>", "<unk>")
    scorer.add_string("it is good", "good")
    with pytest.raises(UserError, match=r"2 of the 4 documents of 'test' \(missing: 1; 1 of 2-3\).*"
                                        r"generate\.sh --split test --score"):
        scorer.score()


def test_unknown_target_is_refused(hand_data):
    scorer = build_scorer(hand_data, "--gen-subset", "test")
    scorer.add_string("the model is not here", "the model")
    with pytest.raises(UserError, match=r"'the model is not here' is not the target of any document of 'test'.*"
                                        r"generate\.sh --split test --score"):
        scorer.result_string()


def test_tokenizer_is_refused(hand_data):
    with pytest.raises(UserError, match=r"--tokenizer.*generate\.sh"):
        build_scorer(hand_data, "--gen-subset", "test", "--tokenizer", "space")


def test_data_without_references_is_refused_at_start(hand_data, tmp_path):
    (tmp_path / "bin").mkdir()
    with pytest.raises(UserError, match=rf"{tmp_path}/prep\.json not found.*--rouge-data-dir"):
        build_scorer(tmp_path, "--gen-subset", "test")
    with pytest.raises(UserError, match=rf"^--scoring rouge: {hand_data}/ref/train2\.tgt not found"):
        build_scorer(hand_data, "--gen-subset", "train2")
    with pytest.raises(UserError, match=r"fairseq-generate"):
        from fairseq import scoring
        scoring.build_scorer("rouge", None)  # outside fairseq-generate: no data, no split


# ---------------------------------------------------------------------------------------------------------
# A real fairseq-generate run against generate.sh --score
# ---------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("options", [GENERATION, SCORE_REFERENCE], ids=["beam", "score_reference"])
def test_fairseq_generate_scoring_rouge_equals_generate_sh_score(trained, options):
    """Beam search, and the references as hypotheses (--score-reference: markers and <unk> in every hypothesis
    whose target has them: the old scorer printed R-1 = R-2 = R-L = 100.00)."""
    data, save, _ = trained
    generated = run(["fairseq-generate", data / "bin", "--user-dir", USER_DIR, "--task", "summarization",
                     "--path", save / "checkpoint_last.pt", "--gen-subset", "valid", *options, "--scoring", "rouge"])
    targets = re.findall(r"^T-\d+\t(.*)$", generated.stdout, flags=re.M)
    assert len(targets) == 20 and any("<oov-" in t for t in targets) and any("<<unk>>" in t for t in targets)
    scorer = SCORER_LINE.search(generated.stdout)
    assert scorer, generated.stdout[-2000:]
    script = run(["./generate.sh", "--split", "valid", "--score", "--checkpoint", "checkpoint_last.pt",
                  "--output", save / "valid.sum", data, save, *options])
    exact = EXACT_LINE.search(script.stderr)
    assert exact, script.stderr[-2000:]
    assert tuple(map(float, scorer.groups())) == pytest.approx(tuple(map(float, exact.groups())), abs=0.011)
    assert 0 < float(exact.group(1)) < 100
