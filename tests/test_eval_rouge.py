"""``--task summarization --eval-rouge``: validation ROUGE equals generate.sh --score's, the best checkpoint by
ROUGE-L is kept, and several workers' sums give the mean over all documents."""
import json
import re
import sys
from pathlib import Path

import pytest
import torch

from fairseq_plugins.runtime.checkpoint_safety import allow_fairseq_checkpoints

from conftest import run, slice_corpus

ROOT = Path(__file__).resolve().parent.parent
USER_DIR = str(ROOT / "fairseq_plugins")
GENERATION = {"beam": 3, "max_len_a": 0, "max_len_b": 20, "min_len": 5, "block_ngram_repeat": 3,
              "block_immediate_repeat": 1, "block_ignore": ","}
GENERATE_SH = ["--beam", "3", "--max-len-b", "20", "--min-len", "5", "--block-ngram-repeat", "3",
               "--block-immediate-repeat", "1", "--block-ignore", ","]  # the same settings as fairseq-generate options
VALID_LINE = re.compile(r"valid on 'valid' subset \|.*\| rouge_1 ([\d.]+) \| rouge_2 ([\d.]+) \| rouge_l ([\d.]+) "
                        r"\|.*\| num_updates (\d+)")


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """pgn_lstm_small trained 6 updates on 200 SciTLDR-A documents, validated by ROUGE on 20 at updates 3, 6."""
    work = tmp_path_factory.mktemp("eval_rouge")
    raw = slice_corpus("scitldr", work / "raw", (("train", 200), ("valid", 20), ("test", 2)))
    data, save = work / "data", work / "model"
    run(["./preprocess.sh", raw, data])
    result = run(["fairseq-train", data / "bin", "--user-dir", USER_DIR, "--task", "summarization",
                  "--arch", "pgn_lstm_small", "--criterion", "focal_copy_coverage", "--focal-alpha", "1",
                  "--focal-gamma", "0", "--optimizer", "adam", "--lr", "0.003", "--max-tokens", "1500",
                  "--max-update", "6", "--validate-interval-updates", "3", "--save-interval-updates", "3",
                  "--save-dir", save, "--seed", "2", "--eval-rouge", "--eval-gen-args", json.dumps(GENERATION),
                  "--best-checkpoint-metric", "rouge_l", "--maximize-best-checkpoint-metric"])
    (save / "train_output.txt").write_text(result.stdout + result.stderr)
    validations = [tuple(map(float, m.groups())) for m in VALID_LINE.finditer(result.stdout + result.stderr)]
    assert [int(v[3]) for v in validations] == [3, 6], (result.stdout + result.stderr)[-3000:]
    return data, save, validations


@pytest.mark.slow
def test_validation_rouge_equals_generate_sh_score(trained):
    data, save, validations = trained
    script = run(["./generate.sh", "--split", "valid", "--score", "--checkpoint", "checkpoint_last.pt",
                  "--output", save / "valid.sum", data, save, *GENERATE_SH])
    mean = re.search(r"F1 mean over documents \(exact\): ROUGE-1 ([\d.]+) ROUGE-2 ([\d.]+) ROUGE-L ([\d.]+)",
                     script.stderr)
    assert mean, script.stderr[-2000:]
    logged = validations[-1][:3]  # the validation after update 6, the weights of checkpoint_last.pt
    assert logged == pytest.approx(tuple(map(float, mean.groups())), abs=0.011)
    assert logged[0] > 0  # a real score: the 20 summaries overlap their references


@pytest.mark.slow
def test_best_checkpoint_is_the_one_with_the_highest_rouge_l(trained):
    _, save, validations = trained
    best_update = int(max(validations, key=lambda v: (v[2], -v[3]))[3])  # the first of equal values is kept
    allow_fairseq_checkpoints()  # torch's safe loading stays on: the plugin allow-lists fairseq's classes
    best = torch.load(save / "checkpoint_best.pt", weights_only=True)
    twin = torch.load(save / f"checkpoint_1_{best_update}.pt", weights_only=True)
    assert best["extra_state"]["best"] == pytest.approx(max(v[2] for v in validations))
    for name, value in best["model"].items():
        assert torch.equal(value, twin["model"][name]), name


@pytest.mark.slow
def test_missing_references_fail_at_start_with_the_file_name(trained, tmp_path):
    data, _, _ = trained
    result = run([sys.executable, "-m", "fairseq_cli.train", data / "bin", "--user-dir", USER_DIR, "--task",
                  "summarization", "--arch", "pgn_lstm_small", "--optimizer", "adam", "--lr", "0.001",
                  "--max-tokens", "1500", "--max-update", "1", "--eval-rouge", "--eval-rouge-dir", tmp_path,
                  "--save-dir", tmp_path / "ckpt"], check=False)
    assert result.returncode != 0
    assert f"{tmp_path}/prep.json not found" in result.stdout + result.stderr


def test_workers_sums_give_the_mean_over_all_documents():
    """Two workers with 1 and 3 documents: the logged figure is the mean over the 4 documents (not the mean of
    the two workers' means)."""
    from fairseq import metrics

    from fairseq_plugins.tasks.summarization import log_means

    workers = [{"_rouge_1_sum": 0.5, "_rouge_l_sum": 0.9, "_rouge_count": 1},
               {"_rouge_1_sum": 0.7, "_rouge_l_sum": 0.3, "_rouge_count": 3}]
    with metrics.aggregate() as aggregate:
        log_means(["rouge_1", "rouge_l"], "_rouge_count", workers[:1])  # two batches, as validation logs them
        log_means(["rouge_1", "rouge_l"], "_rouge_count", workers[1:])
        values = aggregate.get_smoothed_values()
    assert values["rouge_l"] == pytest.approx(100 * 1.2 / 4)  # not (90 + 10) / 2
    assert values["rouge_1"] == pytest.approx(100 * 1.2 / 4)


def test_workers_all_reduced_tensors_give_the_same_figures_as_numbers():
    """Several workers: fairseq all-reduces the logging outputs and hands reduce_metrics 0-d double tensors."""
    from fairseq import metrics

    from fairseq_plugins.tasks.summarization import log_means

    numbers = {"_accuracy_sum": 1.25, "_accuracy_count": 3}
    tensors = {key: torch.tensor(value, dtype=torch.double) for key, value in numbers.items()}
    figures = []
    for outputs in ([numbers], [tensors]):
        with metrics.aggregate() as aggregate:
            log_means(["accuracy"], "_accuracy_count", outputs)
            figures.append(aggregate.get_smoothed_values()["accuracy"])
    assert figures == [round(100 * 1.25 / 3, 2)] * 2
    assert all(type(figure) is float for figure in figures)


@pytest.mark.slow
def test_fairseq_validate_on_a_checkpoint_trained_with_eval_rouge_reports_the_loss(trained):
    """fairseq-validate builds the model from the checkpoint (no generator for validation ROUGE): it reports the
    loss of each split instead of failing, and the valid loss is the one training logged for the same weights."""
    data, save, _ = trained
    result = run(["fairseq-validate", data / "bin", "--user-dir", USER_DIR, "--task", "summarization",
                  "--path", save / "checkpoint_last.pt", "--valid-subset", "train,valid", "--max-tokens", "1500",
                  "--criterion", "focal_copy_coverage", "--focal-alpha", "1", "--focal-gamma", "0"])
    output = result.stdout + result.stderr
    losses = dict(re.findall(r"valid on '(\w+)' subset \| loss ([\d.]+)", output))
    assert set(losses) == {"train", "valid"}, output[-3000:]
    assert "reports the loss only" in output
    logged = re.findall(r"valid on 'valid' subset \| loss ([\d.]+)", (save / "train_output.txt").read_text())
    assert float(losses["valid"]) == pytest.approx(float(logged[-1]), abs=0.002)  # the weights of update 6


def test_eval_max_documents_decodes_only_the_first_documents_of_the_split():
    """The batch's rows whose dataset index is below --eval-max-documents, aligned across every tensor; the
    whole batch when the limit is 0 or covers it."""
    from fairseq_plugins.tasks.summarization import SummarizationConfig, SummarizationTask
    from conftest import tiny_dictionary

    dictionary = tiny_dictionary()
    src = torch.arange(20).view(4, 5)
    sample = {"id": torch.tensor([5, 0, 2, 4]), "target": src + 100,
              "net_input": {"src_tokens": src, "src_lengths": torch.tensor([5, 4, 3, 2]), "prev_output_tokens": src}}

    def decoded(limit):
        task = SummarizationTask(SummarizationConfig(eval_max_documents=limit), dictionary, dictionary)
        return task.documents_to_decode(sample)

    kept = decoded(3)
    assert kept["id"].tolist() == [0, 2] and kept["net_input"]["src_lengths"].tolist() == [4, 3]
    assert torch.equal(kept["net_input"]["src_tokens"], src[[1, 2]]) and torch.equal(kept["target"], src[[1, 2]] + 100)
    assert decoded(0) is sample and decoded(6) is sample
    assert decoded(0)["id"].numel() == 4 and decoded(0 + 1)["id"].tolist() == [0]
