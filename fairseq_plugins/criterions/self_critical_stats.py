"""summ-rl-stats: what self-critical training sees of a checkpoint.  Decodes every document of a split as
``self_critical_rouge`` does in an update (one greedy summary y^g and one sample y^s, free running, dropout off)
and reports their rewards and lengths.

    summ-rl-stats CHECKPOINT [CHECKPOINT ...] --data BIN_DIR [--split valid] [--max-tokens 6000]
                  [--reward rougeL] [--max-len-a 0] [--max-len-b 100] [--baseline-block-ngram N] [--seed 1]

(``python -m fairseq_plugins.cli.rl_stats`` is the same command.)  Exit status: 0 success, 1 runtime failure,
2 usage or bad input.

One JSON line per checkpoint:
  documents        the split's documents,
  reward_greedy    mean reward of y^g (the baseline of Paulus eq 15; what the test-time decoding is closest to),
  reward_sample    mean reward of y^s (what Paulus eq 15's gradient raises in expectation),
  beat_baseline    share of documents with r(y^s) > r(y^g),
  greedy_len, sample_len            mean summary tokens (``</s>`` not counted),
  greedy_at_limit, sample_at_limit  share of summaries cut at the length limit (no ``</s>``),
with the rewards of the criterion (``--reward``: ROUGE F1 on token ids against the references, each summary one
sentence; scoring/rouge_reward.py).  Compared before and after RL fine-tuning it tells whether the policy
gradient improved the greedy decode or only the samples: docs/results/dca2018_cnndm_first_run.md has a run whose
samples improved while its greedy summaries ran to the length limit.  The figures equal the ``reward_greedy``,
``reward_sample``, ``greedy_len`` and ``sample_len`` fairseq logs when it validates a self-critical run on the
same split (tests/test_self_critical_rouge.py).
"""

import torch

from fairseq_plugins.criterions.self_critical_rouge import SelfCriticalRougeConfig, SelfCriticalRougeCriterion
from fairseq_plugins.text.textio import UserError

PROG = "summ-rl-stats"


def criterion(task, args) -> SelfCriticalRougeCriterion:
    """self_critical_rouge with this command's decoding and reward options (its ML part is not used)."""
    try:
        return SelfCriticalRougeCriterion(task, SelfCriticalRougeConfig(
            rl_reward=args.reward, rl_max_len_a=args.max_len_a, rl_max_len_b=args.max_len_b,
            rl_baseline_block_ngram=args.baseline_block_ngram, coverage_lambda=0.0))
    except ValueError as err:
        raise UserError(str(err)) from err


def split_stats(model, task, split: str, max_tokens: int, scr: SelfCriticalRougeCriterion) -> dict:
    """Sums over the split's batches, then means per document."""
    batches = task.get_batch_iterator(dataset=task.dataset(split), max_tokens=max_tokens,
                                      max_positions=None, ignore_invalid_inputs=False).next_epoch_itr(shuffle=False)
    sums = dict(documents=0, reward_greedy=0.0, reward_sample=0.0, beat_baseline=0, greedy_len=0, sample_len=0,
                greedy_at_limit=0, sample_at_limit=0)
    with torch.no_grad():
        for sample in batches:
            limit = scr.max_lengths(model, sample)  # B
            sampled, greedy = scr.decode(model, sample, scr.encode(model, sample))
            _, reward_s, reward_g = scr.reward_factors(sampled, greedy, sample["target"])  # B each
            for name, run in (("greedy", greedy), ("sample", sampled)):
                lengths = run.summary_lengths(scr.eos)  # B
                sums[f"{name}_len"] += int(lengths.sum())
                sums[f"{name}_at_limit"] += int((lengths >= limit).sum())
            sums["documents"] += int(reward_s.numel())
            sums["reward_greedy"] += float(reward_g.sum())
            sums["reward_sample"] += float(reward_s.sum())
            sums["beat_baseline"] += int((reward_s > reward_g).sum())
    if sums["documents"] == 0:
        raise UserError(f"split {split!r} has no documents")
    count = sums["documents"]
    return {key: (value if key == "documents" else round(value / count, 4)) for key, value in sums.items()}
