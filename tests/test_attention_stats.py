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

from test_eval_rouge import USER_DIR, run, trained  # noqa: F401  (the module-scoped trained pgn_lstm_small)

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
                              "--split", "nosuch"], capture_output=True, text=True)
    assert missing.returncode == 2
    assert f"{data / 'bin'}: no split 'nosuch'" in missing.stderr
    too_long = subprocess.run([sys.executable, str(SCRIPT), str(save / "checkpoint_last.pt"), str(data / "bin"),
                               "--max-tokens", "20"], capture_output=True, text=True)
    assert too_long.returncode == 2
    assert re.search(r"document \d+ of split 'valid' has \d+ tokens, more than --max-tokens 20", too_long.stderr)
