"""scripts/attention_stats.py: the sums over target tokens are exact (hand-computed batch), and the CLI reads a
trained checkpoint and reports a missing split clearly."""
import importlib.util
import json
import math
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from conftest import command_env, run
from test_eval_rouge import USER_DIR, trained  # noqa: F401  (the module-scoped trained pgn_lstm_small)

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "scripts" / "attention_stats.py"


def load_script():
    spec = importlib.util.spec_from_file_location("attention_stats", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_batch_sums_by_hand():
    """Two summaries, pad = 1.  Row 0: uniform over its 4 source tokens, then one-hot on the target token.
    Row 1: source of 2 tokens (2 pads), one target token and a padded step that must not count."""
    stats = load_script()
    src = torch.tensor([[5, 6, 7, 8], [9, 7, 1, 1]])  # B x S, right-padded
    target = torch.tensor([[6, 7], [9, 1]])  # B x T
    attn = torch.tensor([
        [[0.25, 0.25, 0.25, 0.25], [0.0, 0.0, 1.0, 0.0]],
        [[0.5, 0.5, 0.0, 0.0], [1.0, 0.0, 0.0, 0.0]],  # the second step is padding
    ])
    sums = stats.batch_sums(attn, src, target, pad=1)
    assert sums["tokens"] == 3
    assert sums["entropy"] == pytest.approx(math.log(4) + 0 + math.log(2))
    assert sums["uniform_entropy"] == pytest.approx(2 * math.log(4) + math.log(2))
    assert sums["max_weight"] == pytest.approx(0.25 + 1.0 + 0.5)
    # row 0 step 0 attends (first of ties) to 5 != 6; step 1 to 7 == 7; row 1 attends to 9 == 9
    assert sums["attended_is_target"] == 2


def test_agent_and_sentence_end_sums_by_hand():
    """dca_lstm's agent attention g^t (an empty third agent gets 0) and the sentence-end cosines, d = 1 and 2."""
    stats = load_script()
    agent_attn = torch.tensor([[[0.5, 0.5, 0.0], [1.0, 0.0, 0.0], [0.2, 0.3, 0.5]]])  # B x T x M
    tokens = torch.tensor([[True, True, False]])  # the third step is padding
    sums = stats.agent_sums(agent_attn, tokens)
    assert sums["agent_entropy"] == pytest.approx(math.log(2))
    assert sums["agent_uniform_entropy"] == pytest.approx(math.log(2) + math.log(1))
    assert sums["agent_max_weight"] == pytest.approx(0.5 + 1.0)
    # "a . b . c . </s>" with 4 = a, 5 = ., 6 = b, 7 = c, eos 2, pad 1; after-reading states: steps 2, 4, 6
    target = torch.tensor([[4, 5, 6, 5, 7, 5, 2]])
    states = torch.zeros(1, 7, 2)
    states[0, 2], states[0, 4] = torch.tensor([1.0, 0.0]), torch.tensor([0.0, 1.0])
    states[0, 6] = torch.tensor([1.0, 1.0])
    ends = stats.end_cosine_sums(states, target, torch.tensor([5]), pad=1, eos=2, state="after")
    assert ends["end_pairs_1"] == 2 and ends["end_cos_1"] == pytest.approx(0.0 + math.sqrt(0.5))
    assert ends["end_pairs_2"] == 1 and ends["end_cos_2"] == pytest.approx(math.sqrt(0.5))
    report = stats.means({"nll": 3 * math.log(2), "end_cos_1": 1.0, "end_pairs_1": 2, "entropy": 6.0}, count=3)
    assert report == {"end_cos_1": 0.5, "end_pairs_1": 2, "nll_bits": 1.0, "entropy": 2.0}


@pytest.mark.slow
def test_cli_on_a_trained_checkpoint(trained):  # noqa: F811
    data, save, _ = trained
    whole = run([sys.executable, SCRIPT, save / "checkpoint_last.pt", data / "bin"])
    first = run([sys.executable, SCRIPT, save / "checkpoint_last.pt", data / "bin", "--max-batches", "1"])
    report, part = json.loads(whole.stdout), json.loads(first.stdout)
    assert report["split"] == "valid" and 0 < part["target_tokens"] < report["target_tokens"]
    assert 0 <= report["entropy"] <= report["uniform_entropy"] + 1e-4
    assert 0 < report["max_weight"] <= 1 and 0 <= report["attended_is_target"] <= 1
    # nll_bits is the per-token NLL fairseq-train logged for these weights (the validation after update 6)
    logged = re.findall(r"valid on 'valid' subset \| .*?nll_loss ([\d.]+)",
                        (save / "train_output.txt").read_text())
    assert len(logged) == 2 and report["nll_bits"] == pytest.approx(float(logged[-1]), abs=6e-4)

    missing = subprocess.run([sys.executable, str(SCRIPT), str(save / "checkpoint_last.pt"), str(data / "bin"),
                              "--split", "nosuch"], capture_output=True, text=True, env=command_env())
    assert missing.returncode == 2
    assert f"{data / 'bin'}: no split 'nosuch'" in missing.stderr
    too_long = subprocess.run([sys.executable, str(SCRIPT), str(save / "checkpoint_last.pt"), str(data / "bin"),
                               "--max-tokens", "20"], capture_output=True, text=True, env=command_env())
    assert too_long.returncode == 2
    assert re.search(r"document \d+ of split 'valid' has \d+ tokens, more than --max-tokens 20", too_long.stderr)
