"""summ-attention-stats: is a model using its attention?  Teacher-forces the reference summaries of a split and
reports how focused the attention over the source is, the per-token NLL, and how similar the decoder states at
sentence ends are.

    summ-attention-stats CHECKPOINT BIN_DIR [--split valid] [--max-tokens 4000] [--max-batches N]
                         [--cohesion-state after|word|separator]

(``python scripts/attention_stats.py`` is the same command.)  Exit status: 0 success, 1 runtime failure, 2 usage
or bad input.

CHECKPOINT is a fairseq checkpoint (train.sh's SAVE_DIR/checkpoint_best.pt, or fairseq's own lstm); BIN_DIR is
preprocess.sh's DATA_DIR/bin.  Over every target token (padding excluded) it prints, as one JSON line:
  entropy          mean entropy of the attention (nats),
  uniform_entropy  the same for a uniform attention over each source (mean ln S): entropy near it = no focus,
  max_weight       mean largest attention weight,
  attended_is_target  share of target tokens whose most-attended source token is that very token,
  nll_bits         the per-token NLL of the reference in bits: -log2 P(y_t) averaged over target tokens, P the
                   model's final distribution (with copying: over the extended vocabulary; floored at 1e-12 as
                   in the losses).  The same definition for every model and criterion, unlike fairseq's logged
                   ``loss``, which includes a criterion's other terms (coverage, focal weights, L_SEM),
and, for models that expose their decoder states and summaries with sentence ends (semantic_cohesion's
tokens, ``. ! ? 。 ！ ？ <q>``), at the states s'_q that ``--cohesion-state`` picks (semantic_cohesion's readings):
  end_cos_1        mean cos(s'_q, s'_{q-1}) over consecutive sentence ends, end_pairs_1 their number,
  end_cos_2        mean cos(s'_q, s'_{q-2}), end_pairs_2 their number,
and, for dca_lstm (its agent attention g^t over the M agents), per target token:
  agent_entropy    mean entropy of g^t (nats), agent_uniform_entropy the same for a uniform g^t over the
                   document's non-empty agents (mean ln M'), agent_max_weight the mean largest g_a^t: does the
                   decoder read all the agents, or one?
A model whose attention stays near uniform after training is a language model fed a mean of the source; the
controls of docs/results/song2020_no_copy_controls.md show how that looks and what fixed it there.
"""
import math
import os

import torch

import fairseq_plugins
from fairseq_plugins.modules.target_scores import target_log_probs
from fairseq_plugins.modules.sentence_states import pair_cosines
from fairseq_plugins.text.textio import UserError

PROG = "summ-attention-stats"


def batch_sums(attn: torch.Tensor, src_tokens: torch.Tensor, target: torch.Tensor, pad: int) -> dict:
    """Sums over the non-padding target tokens of one batch.  attn: B x T x S (rows sum to 1 over the source),
    src_tokens: B x S right-padded, target: B x T."""
    tokens = target.ne(pad)  # B x T
    source_length = src_tokens.ne(pad).sum(dim=1, keepdim=True).expand_as(target).float()  # B x T
    entropy = -(attn * attn.clamp_min(1e-30).log()).sum(dim=2)  # B x T
    attended = src_tokens.gather(1, attn.argmax(dim=2))  # B x T
    return {
        "tokens": int(tokens.sum()),
        "entropy": float(entropy[tokens].sum()),
        "uniform_entropy": float(source_length.log()[tokens].sum()),
        "max_weight": float(attn.max(dim=2).values[tokens].sum()),
        "attended_is_target": float(attended.eq(target)[tokens].sum()),
    }


def end_cosine_sums(states, target: torch.Tensor, end_ids: torch.Tensor, pad: int, eos: int, state: str) -> dict:
    """Sums of cos(s'_q, s'_{q-d}) and their counts, d = 1, 2, over one batch (states B x T x H)."""
    is_end = torch.isin(target, end_ids)  # B x T
    sums = {}
    for distance in (1, 2):
        cosine, pairs = pair_cosines(states, target, is_end, pad, eos, state, distance)  # B x P each
        sums[f"end_cos_{distance}"] = float((cosine * pairs).sum())
        sums[f"end_pairs_{distance}"] = int(pairs.sum())
    return sums


def agent_sums(agent_attn: torch.Tensor, tokens: torch.Tensor) -> dict:
    """Sums over the target tokens (``tokens`` B x T) of g^t's entropy, its uniform value and its largest weight.
    agent_attn: B x T x M, 0 for empty agents."""
    entropy = -(agent_attn * agent_attn.clamp_min(1e-30).log()).sum(dim=2)  # B x T
    uniform = agent_attn.gt(0).sum(dim=2).clamp(min=1).float().log()  # B x T
    return {"agent_entropy": float(entropy[tokens].sum()), "agent_uniform_entropy": float(uniform[tokens].sum()),
            "agent_max_weight": float(agent_attn.max(dim=2).values[tokens].sum())}


def attention_of(net_output, batch_size: int, target_length: int) -> torch.Tensor:
    """B x T x S from a decoder's second output: this project's models (``extra["attn"]``, a list) or fairseq's
    lstm (the tensor itself)."""
    extra = net_output[1]
    attn = extra if torch.is_tensor(extra) else (extra or {}).get("attn")
    if isinstance(attn, list):
        attn = attn[0] if attn else None
    if attn is None:
        raise UserError("the model returns no attention over the source")
    if attn.size(0) != batch_size or attn.size(1) != target_length:
        raise UserError(f"unexpected attention shape {tuple(attn.shape)} for {batch_size} summaries of "
                        f"{target_length} tokens")
    return attn.float()


def sample_sums(model, sample, pad: int, eos: int, end_ids: torch.Tensor, cohesion_state: str) -> dict:
    """Every sum of one batch: batch_sums, the NLL (nats), agent_sums and end_cosine_sums where they apply."""
    from fairseq import utils

    target = sample["target"]  # B x T
    net_output = model(**sample["net_input"])
    attn = attention_of(net_output, *target.shape)  # B x T x S
    src = utils.convert_padding_direction(sample["net_input"]["src_tokens"], pad, left_to_right=True)
    sums = batch_sums(attn, src, target, pad)
    sums["nll"] = float(-target_log_probs(model, net_output, target)[target.ne(pad)].sum())
    extra = net_output[1] if isinstance(net_output[1], dict) else {}
    if "agent_attn" in extra:
        sums.update(agent_sums(extra["agent_attn"].float(), target.ne(pad)))
    states = extra.get("decoder_states")
    if states is not None and len(end_ids):
        sums.update(end_cosine_sums(states, target, end_ids, pad, eos, cohesion_state))
    return sums


def means(totals: dict, count: int) -> dict:
    """Per-token means of the sums (the NLL in bits), and the sentence-end cosines per pair."""
    report = {}
    for distance in (1, 2):
        pairs = totals.pop(f"end_pairs_{distance}", 0)
        cosines = totals.pop(f"end_cos_{distance}", 0.0)
        if pairs:
            report.update({f"end_cos_{distance}": round(cosines / pairs, 4), f"end_pairs_{distance}": pairs})
    report["nll_bits"] = round(totals.pop("nll") / count / math.log(2), 4)
    report.update({key: round(value / count, 4) for key, value in totals.items()})
    return report


def load(checkpoint: str, bin_dir: str, split: str):
    from fairseq import checkpoint_utils

    for path, what in ((checkpoint, "checkpoint"), (bin_dir, "data directory")):
        if not os.path.exists(path):
            raise UserError(f"{path}: no such {what}")
    fairseq_plugins.register()  # the plugin models, and torch's safe loading of fairseq checkpoints
    models, _, task = checkpoint_utils.load_model_ensemble_and_task([checkpoint], arg_overrides={"data": bin_dir})
    try:
        task.load_dataset(split)
    except FileNotFoundError as err:
        raise UserError(f"{bin_dir}: no split {split!r} ({err})") from err
    return models[0].eval(), task
