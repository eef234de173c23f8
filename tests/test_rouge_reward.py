"""scoring/rouge_reward.py: the batched ROUGE reward equals the project's exact ROUGE (rouge_python) on the same
ids, for every type, every prefix and both LCS implementations."""
import random

import pytest
import torch

from fairseq_plugins.scoring.rouge_python import RougeScorer
from fairseq_plugins.scoring.rouge_reward import (
    RougeReward,
    lcs_prefixes_bits,
    lcs_prefixes_torch,
    parse_reward,
)

PAD, EOS, UNK = 1, 2, 3
TYPES = ("rouge1", "rouge2", "rouge3", "rougeL")
SCORER = RougeScorer(stem=False, rouge_types=TYPES)


def words(ids, side):
    """The ids as the words rouge_python scores: w<id>; each <unk> a word of its own (it matches nothing)."""
    out = []
    for position, token in enumerate(ids):
        if token in (PAD, EOS):
            continue
        out.append(f"unk{side}{position}" if token == UNK else f"w{token}")
    return " ".join(out)


def random_row(rng, width, vocab, allow_inner_specials):
    """Ids of one summary, right-padded to width: words from a small vocabulary (many repeats), some <unk>,
    usually a final </s>; with allow_inner_specials, also padding and </s> inside (they are not counted)."""
    length = rng.randint(0, width - 1)
    row = [rng.choice(vocab) if rng.random() > 0.1 else UNK for _ in range(length)]
    if allow_inner_specials and row and rng.random() < 0.3:
        row.insert(rng.randint(0, len(row)), rng.choice([PAD, EOS]))
    if rng.random() < 0.8:
        row.append(EOS)
    return (row + [PAD] * width)[:width]


def random_batch(seed, size=40, width=14, vocab_size=5, inner=True):
    rng = random.Random(seed)
    vocab = list(range(4, 4 + vocab_size))
    hyp = torch.tensor([random_row(rng, width, vocab, inner) for _ in range(size)])
    ref = torch.tensor([random_row(rng, width + 3, vocab, inner) for _ in range(size)])
    return hyp, ref


def expected(hyp_row, ref_row, rouge_type):
    return SCORER.score(words(ref_row, "r"), words(hyp_row, "h"))[rouge_type].fmeasure


@pytest.mark.parametrize("backend", ["torch", "bits"])
@pytest.mark.parametrize("rouge_type", TYPES)
def test_reward_equals_rouge_python(backend, rouge_type):
    seen = []
    for seed in range(3):
        hyp, ref = random_batch(seed, vocab_size=3 + seed * 3)
        reward = RougeReward({rouge_type: 1.0}, PAD, EOS, UNK, lcs_backend=backend)(hyp, ref)
        want = [expected(h, r, rouge_type) for h, r in zip(hyp.tolist(), ref.tolist())]
        assert reward.dtype == torch.float64
        assert reward.tolist() == want  # the same floating-point operations: identical values
        seen += want
    assert sum(0 < w < 1 for w in seen) >= 5 and 0.0 in seen  # the cases are not trivial


def test_weighted_mix_is_the_weighted_sum():
    hyp, ref = random_batch(7)
    weights = parse_reward("rouge1=0.25, rouge2=0.25,rougeL=0.5")
    assert weights == {"rouge1": 0.25, "rouge2": 0.25, "rougeL": 0.5}
    reward = RougeReward(weights, PAD, EOS, UNK)(hyp, ref)
    want = [sum(w * expected(h, r, t) for t, w in weights.items()) for h, r in zip(hyp.tolist(), ref.tolist())]
    torch.testing.assert_close(reward, torch.tensor(want, dtype=torch.float64), rtol=0, atol=1e-15)


@pytest.mark.parametrize("rouge_type", ["rouge1", "rouge2", "rougeL"])
def test_prefix_scores_are_the_scores_of_the_prefixes(rouge_type):
    """Column k: the first k counted tokens (</s> and padding dropped) scored against the whole reference."""
    hyp, ref = random_batch(11, size=12, inner=False)
    scores, lengths = RougeReward({rouge_type: 1.0}, PAD, EOS, UNK).prefix_scores(hyp, ref)
    for row, (h, r) in enumerate(zip(hyp.tolist(), ref.tolist())):
        counted = [t for t in h if t not in (PAD, EOS)]
        assert lengths[row] == len(counted)
        for k in range(scores.size(1)):
            assert scores[row, k].item() == expected(counted[:k], r, rouge_type), (row, k)


def test_unk_never_matches_and_markers_match_themselves():
    marker = 40  # an <oov-K> id: the same word within one document
    reward = RougeReward({"rougeL": 1.0}, PAD, EOS, UNK)
    hyp = torch.tensor([[UNK, 5, EOS], [marker, 5, EOS], [UNK, UNK, EOS]])
    ref = torch.tensor([[UNK, 5, EOS], [marker, 5, EOS], [UNK, UNK, EOS]])
    assert reward(hyp, ref).tolist() == [0.5, 1.0, 0.0]


def test_empty_hypothesis_or_reference_scores_zero():
    reward = RougeReward({"rouge1": 1.0, "rouge2": 1.0, "rougeL": 1.0}, PAD, EOS, UNK)
    hyp = torch.tensor([[EOS, PAD, PAD], [4, 5, EOS], [EOS, PAD, PAD]])
    ref = torch.tensor([[4, 5, EOS], [EOS, PAD, PAD], [EOS, PAD, PAD]])
    assert reward(hyp, ref).tolist() == [0.0, 0.0, 0.0]


def test_lcs_implementations_agree_on_long_rows():
    """Longer than a machine word (the bit vector is a Python integer) and with many equal tokens."""
    generator = torch.Generator().manual_seed(0)
    hyp = torch.randint(4, 9, (6, 150), generator=generator)
    ref = torch.randint(4, 9, (6, 130), generator=generator)
    torch_lcs = lcs_prefixes_torch(hyp, ref)
    bits_lcs = torch.tensor(lcs_prefixes_bits(hyp.tolist(), ref.tolist()), dtype=torch.int32)
    assert torch.equal(torch_lcs, bits_lcs)
    hits = RougeReward({"rougeL": 1.0}, PAD, EOS, UNK)(hyp, ref)
    assert hits.tolist() == [expected(h, r, "rougeL") for h, r in zip(hyp.tolist(), ref.tolist())]


@pytest.mark.parametrize("spec, message", [
    ("rougeX", "unknown ROUGE type 'rougeX'"),
    ("rouge1=abc", "weight 'abc' of rouge1 is not a number"),
    ("rouge1=0", "must be a positive number"),
    ("rougeL,rougeL=2", "rougeL is given twice"),
])
def test_bad_reward_spec_names_the_option(spec, message):
    with pytest.raises(ValueError, match=f"--rl-reward.*{message}"):
        parse_reward(spec)


def test_the_bench_reports_rl_against_ml_with_issue_21s_target(capsys):
    """scripts/bench/reward_speed.py --updates: each run's RL/ML ratio, the pre-change path's with
    --score-in-sampling-too, and with --runs the medians, the RL one against the 2x target (met or MISSED)."""
    import sys
    from pathlib import Path

    from scripts.bench.reward_speed import RL_TARGET, print_medians, print_updates

    def result(ratio, in_sampling):
        speed = {"updates_per_s": 1.0, "summaries_per_s": 8.0, "target_words_per_s": 100.0}
        return {"ml": speed, "rl": speed, "rl_score_in_sampling": speed, "ratio": ratio,
                "ratio_score_in_sampling": in_sampling, "ml_seconds_per_update": 0.5, "batches": 2, "rounds": 1,
                "rl_phases": {"encode": 0.01, "decode": 0.4, "reward": 0.0, "ml_forward": 0.1, "rl_forward": 0.0,
                              "backward_step": 0.5},
                "sample_len": 12.0, "greedy_len": 11.0, "reference_len": 13.0}

    assert RL_TARGET == 2.0
    print_updates(result(2.5, 3.1))
    text = capsys.readouterr().out
    assert "RL update / ML update: 2.50x (target <= 2: MISSED)" in text
    assert "RL update with --rl-score-in-sampling / ML update: 3.10x" in text
    print_medians([result(1.9, 3.0), result(2.2, 3.4), result(1.7, 3.2)])
    text = capsys.readouterr().out
    assert "RL update / ML update, median of 3 runs: 1.90x (target <= 2: met) (runs 1.90, 2.20, 1.70)" \
        in text
    assert "RL update with --rl-score-in-sampling / ML update, median of 3 runs: 3.20x (runs 3.00, 3.40, 3.20)" \
        in text


@pytest.mark.slow
def test_the_floor_bench_times_each_part_and_adds_them_up(tmp_path):
    """scripts/bench/reward_speed.py --floor on a tiny pgn_lstm: the ML update, the teacher-forced pass over y^s,
    y^s scored in its own steps and the greedy decode are each timed (> 0 ms), and the floor is
    (ML + teacher-forced + greedy) / ML of the printed times, with the teacher-forced pass's padding share;
    without --data-bin it stops with a message."""
    import re
    import sys

    from conftest import run, slice_corpus

    raw = slice_corpus("csl", tmp_path / "raw", (("train", 40), ("valid", 5), ("test", 5)))
    run(["./preprocess.sh", "-c", "lcsts_char", raw, tmp_path / "data"])
    bench = [sys.executable, "scripts/bench/reward_speed.py", "--floor"]
    result = run([*bench, "--data-bin", tmp_path / "data" / "bin", "--arch", "pgn_lstm_small", "--batches", "2",
                  "--rounds", "1", "--max-tokens", "600", "--rl-args", "--rl-max-len-b 8", "--runs", "2"])
    parts = re.findall(r"an ML update (\d+) ms; over y\^s: a teacher-forced pass \(forward \+ backward\) (\d+) ms, "
                       r"decoded with gradient in its own steps (\d+) ms; the greedy decode (\d+) ms; "
                       r"padding: (\d+) % of", result.stdout)
    floors = [float(x) for x in re.findall(r"greedy decode\) / ML update: ([\d.]+)x \(target <= 2", result.stdout)]
    assert len(parts) == 2 and len(floors) == 2, result.stdout
    for (ml, forced, scored, greedy, padding), floor in zip(parts, floors):
        ml, forced, scored, greedy, padding = map(int, (ml, forced, scored, greedy, padding))
        assert min(ml, forced, scored, greedy) > 0 and 0 <= padding < 100
        assert floor == pytest.approx((ml + forced + greedy) / ml, abs=0.01 + 2.0 / ml)  # the ms are rounded
    assert re.search(r"floor, median of 2 runs: [\d.]+x", result.stdout)
    missing = run(bench, check=False)
    assert missing.returncode != 0 and "--floor needs --data-bin" in missing.stderr
