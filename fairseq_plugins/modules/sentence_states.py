"""The decoder's state at the end of each summary sentence, and the cosines of consecutive ones: the operands of
Celikyilmaz et al.'s semantic cohesion loss L_SEM = sum_{q=2}^{Q} cos(s'_q, s'_{q-1}) (the loss itself, its
forms and which state is s'_q: criterions/semantic_cohesion.py's docstring).  Read by that criterion and by
summ-attention-stats (viz/attention_stats.py).
"""
import torch
import torch.nn.functional as F
from torch import Tensor

COHESION_STATES = ("after", "word", "separator")
DEFAULT_SENTENCE_END = ". ! ? 。 ！ ？ <q>"
COSINE_EPS = 1e-8


def sentence_end_steps(target: Tensor, is_end: Tensor, pad: int, eos: int, state: str = "after"):
    """The decoder step whose state is s'_q, for every sentence of every summary.

    Args:
        target: B x T target tokens (``</s>`` then padding after each summary).
        is_end: B x T, True at sentence-ending tokens.
        state: "after", "word" or "separator" (module docstring).
    Returns:
        steps B x T (the step of s'_q, at the position of the sentence's last token) and ends B x T (True at
        the last token of each sentence whose state exists).
    """
    if state not in COHESION_STATES:
        raise ValueError(f"unknown --cohesion-state {state!r} (choose from {', '.join(COHESION_STATES)})")
    steps_total = target.size(1)
    valid = target.ne(pad)  # B x T
    content = valid & target.ne(eos)  # B x T: summary tokens
    after = lambda x: torch.cat([x[:, 1:], x.new_zeros(x.size(0), 1)], dim=1)  # noqa: E731  x[t+1], 0 at the end
    end_token = is_end & content  # B x T
    run_end = end_token & ~after(end_token)  # B x T: the last end token of a run
    unterminated = content & ~after(content) & ~end_token  # B x T: last word of a last sentence without an end
    positions = torch.arange(steps_total, device=target.device).unsqueeze(0).expand_as(target)  # B x T
    if state == "after":
        offset = (run_end | unterminated).long()  # s_{e+1}; s_{w+1} predicts </s>
    else:
        run_length = run_lengths(end_token)  # B x T: at a run's last token, the run's length
        first = 1 if state == "separator" else 0
        offset = torch.where(run_end, first - run_length, unterminated.long() * first)  # s_{w+1} or s_w
    steps = positions + offset  # B x T
    exists = (steps >= 0) & (steps < steps_total)  # B x T
    exists &= valid.gather(1, steps.clamp(0, steps_total - 1))  # the chosen step is one of the summary's steps
    return steps.clamp(0, steps_total - 1), (run_end | unterminated) & exists


def run_lengths(flags: Tensor) -> Tensor:
    """B x T: at each True position, the number of consecutive Trues ending there (0 elsewhere)."""
    counts = flags.long().cumsum(dim=1)  # B x T
    last_false = torch.where(flags, torch.zeros_like(counts), counts).cummax(dim=1).values  # B x T
    return torch.where(flags, counts - last_false, torch.zeros_like(counts))


def sentence_end_states(states: Tensor, target: Tensor, is_end: Tensor, pad: int, eos: int, state: str = "after"):
    """s'_1..s'_Q of each summary, padded to the batch's largest Q: (B x Q x H float, Q per summary B)."""
    steps, ends = sentence_end_steps(target, is_end, pad, eos, state)  # B x T each
    count = ends.sum(dim=1)  # B: Q
    width = int(count.max()) if count.numel() else 0
    order = torch.sort((~ends).int(), dim=1, stable=True).indices[:, :width]  # B x Q: sentence ends first, in order
    chosen = steps.gather(1, order)  # B x Q: the step of s'_q
    return states.gather(1, chosen.unsqueeze(2).expand(-1, -1, states.size(2))).float(), count  # B x Q x H


def pair_cosines(states: Tensor, target: Tensor, is_end: Tensor, pad: int, eos: int, state: str = "after",
                 distance: int = 1):
    """cos(s'_q, s'_{q-distance}) for q = distance+1..Q: (B x (Q-distance) cosines, B x (Q-distance) mask)."""
    ends_states, count = sentence_end_states(states, target, is_end, pad, eos, state)  # B x Q x H, B
    width = ends_states.size(1)
    if width <= distance:
        empty = states.new_zeros(target.size(0), 0, dtype=torch.float32)
        return empty, empty.bool()
    cosine = F.cosine_similarity(ends_states[:, distance:], ends_states[:, :-distance], dim=2, eps=COSINE_EPS)
    pairs = torch.arange(distance, width, device=target.device).unsqueeze(0) < count.unsqueeze(1)  # B x (Q-d)
    return cosine, pairs


def delimiter_ids(dictionary, words: str, option: str = "--cohesion-sentence-end") -> Tensor:
    """Dictionary ids of the space-separated ``words`` it has; ValueError naming ``option`` when it has none."""
    ids = sorted({dictionary.index(word) for word in words.split()} - {dictionary.unk()})
    if not ids:
        raise ValueError(f"{option} {words!r}: none of these tokens is in the target dictionary, so no summary "
                         f"could have more than one sentence and L_SEM would always be 0")
    return torch.tensor(ids, dtype=torch.long)
