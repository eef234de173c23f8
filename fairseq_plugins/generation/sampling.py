"""Free-running decoding for self-critical training: multinomial samples and greedy summaries, batched.

Written once over fairseq's encoder-decoder interface, so it works for every model of the project (and any
fairseq model with an encoder and a ``FairseqIncrementalDecoder``):
    encoder_out = model.encoder(src_tokens, src_lengths)                           (once)
    net_output  = model.decoder(prev_tokens, encoder_out, incremental_state=state)   (one step at a time)
    P_t         = model.get_normalized_probs(net_output, log_probs=False)           (the model's final P(w))
For a pointer model P_t is the distribution over the extended vocabulary (See eq 9), so a sampled
id at or above the first OOV marker is a copy of a source word of that document; it is fed back as its id,
and the model reads it as ``<unk>`` itself, as in beam search and teacher forcing.

At each step a row either draws y_t ~ P_t (``greedy`` False) or takes argmax_w P_t(w) (``greedy`` True).
Never chosen: padding and ``<s>`` (their probability is set to 0 and the rest renormalised, as fairseq's beam
search masks padding).  ``<unk>`` is an ordinary word here (the reward never matches it).  A row stops after
its ``</s>``, or without one after ``max_len`` tokens (no ``</s>`` is forced: every token of a row is the
model's own choice).  Finished rows leave the batch (fairseq's ``reorder_encoder_out`` and
``reorder_incremental_state``), so the steps cost what the unfinished rows need.

Gradient (``score=True``).  Without it nothing here records gradients: a criterion can score a sampled summary
afterwards with one ordinary teacher-forced forward pass, which gives the same probabilities because incremental
decoding equals the full forward pass (tested for every model).  With it the rows' own decoder steps keep their
graph and each row returns log p(y_t | y_<t, x) of its drawn tokens with gradient, and the decoder states of those
steps.  Each step computes one distribution, ``model.get_normalized_probs(log_probs=True)`` (exact in log space
for the project's models: what ``get_target_log_probs`` gives a loss), with gradient: the token is drawn from its
exponential without gradient and its log p is taken from it with gradient.  The probability differentiated is
then the one sampled with by construction (dropout masks included), and no second pass over the summary is needed.
As rows finish they leave the batch, so the graph (and its backward pass) covers each row's own length only, where
a teacher-forced pass over a batch of samples computes every row up to the longest one.

Blocking (``blocker``, an ``NGramBlocker``).  The greedy rows may be decoded as beam search decodes at test time
with ``--block-ngram-repeat N``: a continuation that would repeat an n-gram of the row gets probability 0 before
the argmax.  The sampling rows are never blocked (a sample is drawn from the model's own distribution, the one
the estimator differentiates).
"""
import math
from dataclasses import dataclass
from typing import Dict, List, Optional

import torch
from torch import Tensor

from fairseq_plugins.accelerated.step_gradient import share_each
from fairseq_plugins.generation.ngram_blocking import NGramBlocker


@dataclass
class FreeRun:
    """The summaries of one free-running decode.

    tokens: B x T ids, each row its summary, then ``</s>`` if it stopped by itself, then padding.
    lengths: B, the number of decoded tokens of each row (its ``</s>`` included).
    log_probs: B x T, log P_t(y_t) of each decoded token under the model's unrestricted distribution (0 after
        the row's end); with ``scored``, the same with gradient, from the steps that drew the tokens.
    nonfinite: B, True where the model's distribution was not finite at some step (the row then ended there
        with ``</s>``); such a batch cannot be trained on.
    scored: the run was decoded with ``score=True``: ``log_probs`` are what a teacher-forced pass would
        recompute (with gradient when it was enabled), and ``states`` the decoder states.
    states: B x T x H, with ``scored``: the decoder state of each decoded step (``extra["decoder_states"]``, the
        state that predicts y_t; 0 after the row's end), None when the model does not expose them.
    """
    tokens: Tensor
    lengths: Tensor
    log_probs: Tensor
    nonfinite: Tensor
    scored: bool = False
    states: Optional[Tensor] = None

    def summary_lengths(self, eos: int) -> Tensor:
        """B: the number of summary tokens, ``</s>`` not counted."""
        return self.lengths - self.tokens.eq(eos).any(dim=1).long()

    def select(self, rows: Tensor) -> "FreeRun":
        """The runs of ``rows`` (B'), trimmed to their longest row."""
        lengths = self.lengths.index_select(0, rows)
        width = int(lengths.max()) if lengths.numel() else 0
        states = None if self.states is None else self.states.index_select(0, rows)[:, :width]
        return FreeRun(self.tokens.index_select(0, rows)[:, :width], lengths,
                       self.log_probs.index_select(0, rows)[:, :width], self.nonfinite.index_select(0, rows),
                       self.scored, states)


def encoder_input(net_input: Dict[str, Tensor]) -> Dict[str, Tensor]:
    """A batch's ``net_input`` without the teacher-forcing input: what the encoder takes."""
    return {key: value for key, value in net_input.items() if key != "prev_output_tokens"}


class StepScores:
    """With ``score=True``: each step's log p(y_t) (with gradient) and decoder states, gathered into B x T
    (x H) tensors at the end by one ``index_add`` each (rows leave the batch as they finish)."""

    def __init__(self, rows: int, steps: int):
        self.rows, self.steps = rows, steps
        self.positions: List[Tensor] = []
        self.log_probs: List[Tensor] = []
        self.states: List[Tensor] = []

    def add(self, log_probs: Tensor, net_output, active: Tensor, t: int) -> None:
        """The step's log p of the drawn tokens (R', with gradient) and the decoder states (R' x H) of rows
        ``active``."""
        self.positions.append(active * self.steps + t)  # R': the row's cell in the B x T grid
        self.log_probs.append(log_probs.float())  # R'
        states = net_output[1].get("decoder_states") if isinstance(net_output[1], dict) else None
        if states is not None:
            self.states.append(states[:, -1])  # R' x H

    def gathered(self, width: int):
        """(B x width log p, B x width x H states or None)."""
        positions = torch.cat(self.positions)  # N
        log_probs = torch.cat(self.log_probs)  # N
        grid = log_probs.new_zeros(self.rows * self.steps).index_add(0, positions, log_probs)  # B*T
        log_probs = grid.view(self.rows, self.steps)[:, :width]  # B x width
        if len(self.states) != len(self.positions):
            return log_probs, None
        states = torch.cat(self.states)  # N x H
        grid = states.new_zeros(self.rows * self.steps, states.size(1)).index_add(0, positions, states)
        return log_probs, grid.view(self.rows, self.steps, -1)[:, :width]  # B x width x H


def free_run(model, net_input: Dict[str, Tensor], greedy: Tensor, max_len: Tensor,
             source_rows: Optional[Tensor] = None, generator: Optional[torch.Generator] = None,
             encoder_out=None, score: bool = False, blocker: Optional[NGramBlocker] = None) -> FreeRun:
    """Decode one summary per row without teacher forcing.

    Args:
        model: a fairseq encoder-decoder model (``model.encoder``, an incremental ``model.decoder``,
            ``model.get_normalized_probs``); its train/eval mode is the caller's choice (dropout).
        net_input: the batch's ``net_input`` (``prev_output_tokens`` is ignored).
        greedy: R (bool), per row: argmax (True) or a sample (False).
        max_len: R, the most tokens a row may decode (at least 1).
        source_rows: R, the source document of each row (default: row r decodes document r); e.g.
            ``arange(B).repeat(2)`` decodes every document twice from one encoder pass.
        generator: the random generator of the samples (default: torch's global one).
        encoder_out: the batch's encoder output when the caller has it (e.g. with gradient, for its own
            teacher-forced passes); default: the encoder runs here.
        score: keep the graph of the decoder steps (when gradients are enabled) and return log p of the drawn
            tokens with gradient, and the decoder states (module docstring); otherwise nothing records gradients.
        blocker: n-gram blocking of the greedy rows (module docstring); default none.
    Returns:
        a ``FreeRun`` of R rows.
    """
    with torch.set_grad_enabled(score and torch.is_grad_enabled()):
        return decode_rows(model, net_input, greedy, max_len, source_rows, generator, encoder_out, score, blocker)


def decode_rows(model, net_input, greedy: Tensor, max_len: Tensor, source_rows: Optional[Tensor],
                generator: Optional[torch.Generator], encoder_out, score: bool,
                blocker: Optional[NGramBlocker] = None) -> FreeRun:
    """``free_run``'s loop (its arguments)."""
    dictionary = model.decoder.dictionary
    pad, eos, bos = dictionary.pad(), dictionary.eos(), dictionary.bos()
    if encoder_out is None:
        encoder_out = model.encoder(**encoder_input(net_input))
    if source_rows is not None:
        encoder_out = model.encoder.reorder_encoder_out(encoder_out, source_rows)
    encoder_out = share_each(encoder_out)  # with gradient: every step adds into one buffer (step_gradient.py)
    rows = greedy.size(0)
    device = greedy.device
    max_len = max_len.to(device).clamp(min=1)
    steps = int(max_len.max()) if rows else 0
    tokens = torch.full((rows, steps), pad, dtype=torch.long, device=device)  # R x T
    log_probs = torch.zeros(rows, steps, device=device)  # R x T
    lengths = torch.zeros(rows, dtype=torch.long, device=device)  # R
    nonfinite = torch.zeros(rows, dtype=torch.bool, device=device)  # R
    scores = StepScores(rows, steps) if score else None
    active = torch.arange(rows, device=device)  # the rows still decoding, in the decoder's batch order
    prefix = torch.full((rows, 1), eos, dtype=torch.long, device=device)  # decoder input so far (starts with </s>)
    incremental_state: Dict[str, Dict[str, Optional[Tensor]]] = {}
    drawn = (~greedy).nonzero().squeeze(1)  # the sampling rows' positions in the decoder's batch
    for t in range(steps):
        net_output = model.decoder(prefix, encoder_out=encoder_out, incremental_state=incremental_state)
        log_dist = model.get_normalized_probs(net_output, log_probs=True)[:, -1, :]  # R' x V (with score: grad)
        with torch.no_grad():
            probs = log_dist.detach().float().exp()  # R' x V: one distribution, drawn from and scored
            allowed = probs if blocker is None else blocked(probs, blocker, tokens[active, :t], greedy[active])
            choice, bad = choose(allowed, drawn, pad, eos, bos, generator)  # R' each
            chosen_prob = probs.gather(1, choice.unsqueeze(1)).squeeze(1)  # R'
        if scores is not None:
            scores.add(log_dist.gather(1, choice.unsqueeze(1)).squeeze(1), net_output, active, t)  # R'
        tokens[active, t] = choice
        log_probs[active, t] = torch.log(chosen_prob.clamp(min=torch.finfo(probs.dtype).tiny))
        lengths[active] = t + 1
        nonfinite[active] |= bad
        done = choice.eq(eos) | (t + 1 >= max_len[active])  # R'
        finished = int(done.sum())  # the loop's one wait for the device per step: stop, or shrink the batch
        if finished == done.numel():
            break
        prefix = torch.cat([prefix, choice.unsqueeze(1)], dim=1)  # R' x (t+2)
        if finished:  # finished rows leave the batch
            keep = (~done).nonzero().squeeze(1)  # R''
            active, prefix = active[keep], prefix[keep]
            drawn = (~greedy[active]).nonzero().squeeze(1)
            encoder_out = share_each(model.encoder.reorder_encoder_out(encoder_out, keep))
            model.decoder.reorder_incremental_state_scripting(incremental_state, keep)
    width = int(lengths.max()) if rows else 0
    if scores is None:
        return FreeRun(tokens[:, :width], lengths, log_probs[:, :width], nonfinite)
    scored, states = scores.gathered(width)  # R x T, R x T x H
    return FreeRun(tokens[:, :width], lengths, scored, nonfinite, scored=True, states=states)


def blocked(probs: Tensor, blocker: NGramBlocker, generated: Tensor, rows: Tensor) -> Tensor:
    """``probs`` (R' x V) with every continuation that would repeat an n-gram of ``generated`` (R' x t, the
    tokens so far) at 0 in the rows ``rows`` (R' bool); a copy, the model's own probabilities stay as they are."""
    index = rows.nonzero().squeeze(1)  # G: only these rows are blocked
    banned = blocker.block(generated[index], probs.new_zeros(index.numel(), probs.size(1))).isinf()  # G x V
    allowed = probs.clone()
    allowed[index] = probs[index].masked_fill(banned, 0.0)
    return allowed


def choose(probs: Tensor, drawn: Tensor, pad: int, eos: int, bos: int, generator: Optional[torch.Generator]):
    """Each row's token from its distribution (R' x V): argmax, or a draw for the rows ``drawn``; never padding
    or ``<s>``; ``</s>`` where the distribution is not finite or leaves nothing.  Returns (choice R', bad R').

    A NaN or an infinity shows in a row's maximum, a negative value in its minimum (vectorised reductions,
    much faster than ``torch.aminmax`` or ``isfinite().all()``: docs/design.md).  The argmax runs only when some row is
    greedy; a dead row's draw is discarded."""
    rows = probs.size(0)
    bad = ~(probs.amax(dim=1) < math.inf) | ~(probs.amin(dim=1) >= 0.0)  # R' (NaN fails every comparison)
    allowed = probs.clone()  # R' x V
    allowed[:, pad] = 0.0
    if bos != eos:
        allowed[:, bos] = 0.0
    dead = bad | ~(allowed.amax(dim=1) > 0.0)  # R': broken, or nothing left to choose from
    if drawn.numel() == rows:
        choice = draw(allowed, generator)  # R'
    else:
        choice = allowed.argmax(dim=1)  # R'
        if drawn.numel():
            choice[drawn] = draw(allowed[drawn], generator)
    return choice.masked_fill_(dead, eos), bad


def draw(probs: Tensor, generator: Optional[torch.Generator] = None) -> Tensor:
    """One token per row, w with probability probs[w] / sum(probs): R x V (non-negative, each row > 0) -> R.

    By the inverse of the cumulative distribution, in float64: the first w whose cumulative mass exceeds
    u * total, u uniform in [0, 1), the product kept below the total (a guard of R values).  The cumulative
    sum never decreases, so the w found has probability > 0.  A row that is not a distribution (all 0, NaN)
    gets some id below V, for the caller to discard.  (torch.multinomial draws one exponential variate per
    vocabulary entry, which is slower: docs/design.md.)"""
    cumulative = probs.double().cumsum(dim=1)  # R x V
    total = cumulative[:, -1:]  # R x 1
    u = torch.rand(total.shape, generator=generator, dtype=torch.float64, device=probs.device) * total  # R x 1
    u = torch.minimum(u, torch.nextafter(total, torch.zeros_like(total)))  # R x 1: u < total
    choice = torch.searchsorted(cumulative, u, right=True).squeeze(1)  # R: first w with cumulative[w] > u
    return choice.clamp_(max=probs.size(1) - 1)


def sample_and_greedy(model, net_input: Dict[str, Tensor], max_len: Tensor,
                      generator: Optional[torch.Generator] = None, encoder_out=None, score: bool = False,
                      blocker: Optional[NGramBlocker] = None):
    """y^s (a sample) and y^g (the greedy summary, with ``blocker``'s n-gram blocking when given) of every
    document from one encoder pass (``encoder_out``, else computed here).  ``max_len``: B.  Returns (FreeRun of
    the samples, FreeRun of the greedy summaries).

    Without ``score`` both are decoded together as 2B rows, without gradient.  With ``score`` the samples are
    decoded with gradient (``free_run``'s ``score``), and the greedy summaries on their own without: in one
    batch the backward pass would also run over the greedy rows."""
    bsz = max_len.size(0)
    device = max_len.device
    documents = torch.arange(bsz, device=device)
    if score:
        if encoder_out is None:
            encoder_out = model.encoder(**encoder_input(net_input))
        sampled = free_run(model, net_input, torch.zeros(bsz, dtype=torch.bool, device=device), max_len,
                           generator=generator, encoder_out=encoder_out, score=True)
        greedy = free_run(model, net_input, torch.ones(bsz, dtype=torch.bool, device=device), max_len,
                          encoder_out=encoder_out, blocker=blocker)
        return sampled, greedy
    greedy = torch.cat([torch.zeros(bsz, dtype=torch.bool, device=device),
                        torch.ones(bsz, dtype=torch.bool, device=device)])
    run = free_run(model, net_input, greedy, max_len.repeat(2), source_rows=documents.repeat(2),
                   generator=generator, encoder_out=encoder_out, blocker=blocker)
    return run.select(documents), run.select(documents + bsz)


def teacher_forcing_input(tokens: Tensor, pad: int, eos: int) -> Tensor:
    """The decoder input that reproduces ``tokens`` under teacher forcing, as fairseq collates a target:
    ``</s>`` then the tokens shifted right by one, padding where the target is padding.  B x T -> B x T."""
    shifted = torch.cat([tokens.new_full((tokens.size(0), 1), eos), tokens[:, :-1]], dim=1)  # B x T
    return shifted.masked_fill(tokens.eq(pad), pad)
