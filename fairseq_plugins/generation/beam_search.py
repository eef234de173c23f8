"""fairseq's beam search, step for step, in fewer tensor operations and without waiting for the device.

``search`` gives, for one model, the hypotheses that fairseq's ``SequenceGenerator._generate`` (fairseq 0.12,
``search.BeamSearch``) gives: the same tokens, scores, positional scores and attention, in the same order.  It
keeps fairseq's rules exactly: the 2 x beam best continuations of each document; an ``</s>`` among the first
beam of them finishes a hypothesis (its score divided by length^lenpen) until the document has beam finished
ones; the first beam continuations that do not end in ``</s>`` go on; at max_len only ``</s>`` is allowed.

What it does differently, all of it bookkeeping:
  * A step records what it chose (each new row's parent row, token and cumulative score, the attention) and
    moves on.  The finished hypotheses are picked from those records once, at the end, and their tokens,
    scores and attention read by following the parents back; fairseq copies every hypothesis's whole history
    at every step and builds the finished ones in Python, reading indices back from the device whenever a
    hypothesis ends.
  * The encoder output is not reordered at every step: the rows of one document all hold the same one.
  * A document whose beam is full leaves the batch when the search looks: at every step on a CPU, where
    looking costs nothing, every ``GPU_LOOK_EVERY`` steps on a GPU (each look waits for the device).  Until then
    its rows run on, but nothing they finish is kept.

A decoder may offer ``reorder_within_documents(incremental_state, new_order)``, a ``reorder_incremental_state``
for orders that keep every row within its document (every step's but the one where documents leave); the
project's decoders do (modules/step_state.py), others get fairseq's call.
"""
import math
from dataclasses import dataclass
from typing import Dict, List, Optional, Tuple

import torch
import torch.nn.functional as F
from fairseq.search import BeamSearch
from torch import Tensor

GPU_LOOK_EVERY = 8  # on a GPU, steps between two checks for finished documents (each check waits for it)


@dataclass
class BeamOptions:
    """The settings of fairseq's ``SequenceGenerator`` that the search reads (``of(generator)``)."""
    beam: int
    max_len_a: float
    max_len_b: int
    max_len: int  # the model's limit (fairseq's ``self.max_len``)
    min_len: int
    normalize_scores: bool
    len_penalty: float
    unk_penalty: float
    temperature: float
    eos: int
    pad: int
    unk: int

    @classmethod
    def of(cls, generator) -> "BeamOptions":
        return cls(beam=generator.beam_size, max_len_a=generator.max_len_a, max_len_b=generator.max_len_b,
                   max_len=generator.max_len, min_len=generator.min_len,
                   normalize_scores=generator.normalize_scores, len_penalty=generator.len_penalty,
                   unk_penalty=generator.unk_penalty, temperature=generator.temperature, eos=generator.eos,
                   pad=generator.pad, unk=generator.unk)


def applies(generator, sample, prefix_tokens, constraints) -> bool:
    """Whether ``search`` does what ``generator._generate`` would: plain beam search with one model and none of
    the options it leaves to fairseq (prefix tokens, constraints, --match-source-len, a language model,
    suppressed tokens, sampling or diverse beam search)."""
    model = generator.model
    return ("src_tokens" in sample["net_input"] and type(generator.search) is BeamSearch and model.models_size == 1
            and model.has_encoder() and model.has_incremental_states() and prefix_tokens is None and constraints is None
            and not generator.match_source_len and generator.lm_model is None
            and generator.token_indices_to_suppress is None)


@dataclass
class StepRecord:
    """What step j chose: from the R_j rows it read (bsz_j documents x beam), the R_{j+1} rows that go on."""
    attn: Optional[Tensor]  # R_j x S: the attention of step j's rows
    ended: Tensor  # bsz_j x k: which candidates end in </s> (those among the first beam may finish)
    candidate_rows: Tensor  # bsz_j x k: the candidates' rows (of step j)
    candidate_scores: Tensor  # bsz_j x k: their cumulative log-probabilities
    documents: List[int]  # bsz_j: each document's index in the batch
    parents: Optional[Tensor] = None  # R_{j+1}: the row (of step j) each new row continues
    tokens: Optional[Tensor] = None  # R_{j+1}: the token it appends
    scores: Optional[Tensor] = None  # R_{j+1}: its cumulative log-probability


class Beams:
    """The live rows of a search: their tokens, cumulative scores, the candidates fairseq ignores, and
    tensors that depend only on the batch's size."""

    def __init__(self, bsz: int, beam: int, tokens: Tensor):
        self.beam = beam
        self.tokens = tokens  # R x (max_len + 2)
        self.documents = list(range(bsz))
        self.scores: Optional[Tensor] = None  # R   (None before the first step)
        device = tokens.device
        self.ignored = torch.zeros(bsz, 2 * beam, dtype=torch.bool, device=device)  # bsz x 2beam (cands_to_ignore)
        self.finished = torch.zeros(bsz, dtype=torch.long, device=device)  # bsz: hypotheses ended so far
        self.ranks: Dict[int, Tuple[Tensor, Tensor]] = {}  # k: candidate_ranks(k)
        self.offsets = torch.arange(0, bsz * beam, beam, device=device).unsqueeze(1)  # bsz x 1: first rows

    def choose(self, lprobs: Tensor, attn: Optional[Tensor], step: int, eos: int) -> StepRecord:
        """One step of fairseq's ``BeamSearch`` and of ``_generate``'s choice of the rows that go on.

        lprobs: R x V; attn: R x S (or None), kept in the record.  Updates the scores and ``ignored``; returns
        the step's record, whose parents, tokens and scores are the new rows'."""
        bsz, beam, vocab = len(self.documents), self.beam, lprobs.size(1)
        if step == 0:  # every row of a document is the same: its first one
            flat = lprobs.view(bsz, beam * vocab)[:, :vocab]  # bsz x V
        else:
            flat = (lprobs + self.scores.unsqueeze(1)).view(bsz, beam * vocab)  # bsz x (beam V)   cumulative
        k = min(2 * beam, flat.size(1) - 1)  # as fairseq: never all of them
        cand_scores, cand_indices = torch.topk(flat, k=k)  # bsz x k
        cand_rows = torch.div(cand_indices, vocab, rounding_mode="trunc") + self.offsets  # bsz x k
        cand_tokens = cand_indices.fmod(vocab)  # bsz x k
        ends = cand_tokens.eq(eos) & cand_scores.ne(-math.inf)  # bsz x k
        ignored = self.ignored if k == self.ignored.size(1) else self.ignored[:, :k]  # bsz x k
        ended = ends > ignored  # bsz x k   ends and is not ignored (only the first beam may finish)
        # The first beam candidates that neither end nor are ignored go on (fairseq's active_mask).
        goes_on, stops = self.candidate_ranks(k, lprobs.device)
        ranked, active = torch.topk(torch.where(ends | ignored, stops, goes_on), k=beam, dim=1,
                                    largest=False)  # bsz x beam
        self.ignored = F.pad(ranked.ge(2 * beam), (0, beam))  # bsz x 2beam
        self.scores = cand_scores.gather(1, active).view(-1)  # R
        self.finished += ended[:, :beam].sum(dim=1)
        return StepRecord(attn=attn, ended=ended, candidate_rows=cand_rows, candidate_scores=cand_scores,
                          documents=self.documents, parents=cand_rows.gather(1, active).view(-1),
                          tokens=cand_tokens.gather(1, active).view(-1), scores=self.scores)

    def candidate_ranks(self, k: int, device) -> Tuple[Tensor, Tensor]:
        """k candidates' ranks if they go on (0..k-1) and if they stop (2beam..2beam+k-1)."""
        if k not in self.ranks:
            rank = torch.arange(k, device=device)
            self.ranks[k] = (rank, rank + 2 * self.beam)
        return self.ranks[k]

    def finished_documents(self) -> Optional[Tensor]:
        """The documents that go on (bsz' indices) when some have their beam of finished hypotheses, else None;
        an empty tensor when all have.  Waits for the device."""
        if int(self.finished.max()) < self.beam:
            return None
        return (self.finished < self.beam).nonzero().squeeze(1)

    def keep(self, record: StepRecord, keep: Tensor) -> None:
        """Only the documents ``keep`` go on: the record's new rows and this state shrink to them."""
        bsz, beam = len(self.documents), self.beam

        def rows(tensor):
            return tensor.view(bsz, beam).index_select(0, keep).view(-1)

        record.parents, record.tokens, record.scores = rows(record.parents), rows(record.tokens), rows(record.scores)
        self.scores = record.scores
        self.ignored, self.finished = self.ignored.index_select(0, keep), self.finished.index_select(0, keep)
        self.documents = [self.documents[i] for i in keep.tolist()]
        self.offsets = self.offsets[: len(self.documents)]

    def advance(self, record: StepRecord, step: int) -> None:
        """The token buffer follows the new rows."""
        self.tokens = self.tokens.index_select(0, record.parents)
        self.tokens[:, step + 1] = record.tokens


def search(generator, sample: Dict[str, Dict[str, Tensor]], bos_token: Optional[int] = None
           ) -> List[List[Dict[str, Tensor]]]:
    """Beam search over ``sample`` with ``generator``'s one model, options and n-gram blocker; fairseq's output
    (per document a list of hypothesis dicts, best first)."""
    options = BeamOptions.of(generator)
    model = generator.model.single_model
    src_tokens = sample["net_input"]["src_tokens"]
    bsz, src_len = src_tokens.size()[:2]
    beam = options.beam
    max_len = min(int(options.max_len_a * src_len + options.max_len_b), options.max_len - 1)
    assert options.min_len <= max_len, "min_len cannot be larger than max_len, please adjust these!"

    encoder_out = model.encoder.forward_torchscript(sample["net_input"])
    expand = torch.arange(bsz, device=src_tokens.device).repeat_interleave(beam)  # B*beam
    encoder_out = model.encoder.reorder_encoder_out(encoder_out, expand)
    incremental_state: Dict[str, Dict[str, Optional[Tensor]]] = {}
    tokens = src_tokens.new_full((bsz * beam, max_len + 2), options.pad)  # R x (max_len + 2)
    tokens[:, 0] = options.eos if bos_token is None else bos_token
    beams = Beams(bsz, beam, tokens)
    never = [options.pad] + ([options.unk] if options.unk_penalty == math.inf else [])  # an infinite penalty bans
    banned = torch.tensor(never + [options.eos], device=src_tokens.device)  # </s>, the last, only before min_len
    every = look_every(src_tokens.device)
    records: List[StepRecord] = []
    for step in range(max_len + 1):
        lprobs, attn = decoder_step(model, beams.tokens[:, : step + 1], encoder_out, incremental_state,
                                    options.temperature)
        lprobs = mask_impossible(lprobs, step, max_len, options, banned)
        if generator.repeat_ngram_blocker is not None:
            lprobs = generator.repeat_ngram_blocker(beams.tokens, lprobs, len(beams.documents), beam, step)
        record = beams.choose(lprobs, attn, step, options.eos)
        records.append(record)
        if step == max_len:
            break
        keep = beams.finished_documents() if (step + 1) % every == 0 else None
        if keep is not None and keep.numel() == 0:
            break
        if keep is not None:  # finished documents leave the batch
            beams.keep(record, keep)
            model.decoder.reorder_incremental_state_scripting(incremental_state, record.parents)
            encoder_out = model.encoder.reorder_encoder_out(encoder_out, record.parents)
        else:
            reorder_within_documents(model.decoder, incremental_state, record.parents)
        beams.advance(record, step)
    return finalize(records, bsz, options)


def look_every(device) -> int:
    """Steps between two checks for finished documents: every step on a CPU, ``GPU_LOOK_EVERY`` elsewhere."""
    return 1 if device.type == "cpu" else GPU_LOOK_EVERY


def decoder_step(model, tokens: Tensor, encoder_out, incremental_state, temperature: float):
    """One step of the decoder, as fairseq's ``EnsembleModel.forward_decoder`` runs it for one model.  Returns
    log P of the next token (R x V) and the attention (R x S, or None)."""
    decoder_out = model.decoder.forward(tokens, encoder_out=encoder_out, incremental_state=incremental_state)
    extra = decoder_out[1] if len(decoder_out) > 1 else None
    attn = None
    if extra is not None:
        attn = extra if isinstance(extra, Tensor) else extra["attn"]
        if attn is not None and not isinstance(attn, Tensor):
            attn = attn[0]
        if attn is not None:
            attn = attn[:, -1, :]  # R x S
    logits = decoder_out[0]
    logits = logits if logits.size(1) == 1 else logits[:, -1:, :]  # R x 1 x V
    if temperature != 1.0:
        logits = logits.div_(temperature)
    lprobs = model.get_normalized_probs((logits, extra), log_probs=True, sample=None)  # R x 1 x V
    return lprobs[:, -1, :], attn


def mask_impossible(lprobs: Tensor, step: int, max_len: int, options: BeamOptions, banned: Tensor) -> Tensor:
    """fairseq's rules on a step's log-probabilities (R x V), in place: NaN is -inf, never ``<pad>``, the
    ``<unk>`` penalty, no ``</s>`` before min_len, only ``</s>`` at max_len."""
    lprobs = torch.nan_to_num_(lprobs, nan=-math.inf, posinf=math.inf, neginf=-math.inf)
    if options.unk_penalty != 0 and options.unk_penalty != math.inf:  # an infinite one is in ``banned``
        lprobs[:, options.unk] -= options.unk_penalty
    lprobs.index_fill_(1, banned if step < options.min_len else banned[:-1], -math.inf)
    if step >= max_len:
        lprobs[:, : options.eos] = -math.inf
        lprobs[:, options.eos + 1:] = -math.inf
    return lprobs


def reorder_within_documents(decoder, incremental_state, new_order: Tensor) -> None:
    """The decoder's state reordered by ``new_order``, which keeps every row within its document."""
    within = getattr(decoder, "reorder_within_documents", None)
    if within is not None:
        within(incremental_state, new_order)
    else:
        decoder.reorder_incremental_state_scripting(incremental_state, new_order)


# ---------------------------------------------------------------------------------------------- the end
def finalize(records: List[StepRecord], bsz: int, options: BeamOptions) -> List[List[Dict[str, Tensor]]]:
    """The finished hypotheses of each document, best first, in fairseq's format."""
    picked = pick_finished(records, bsz, options.beam)  # (document, step, row of that step, flat index)
    finalized: List[List[Dict[str, Tensor]]] = [[] for _ in range(bsz)]
    if not picked:
        return finalized
    paths = Paths(records)
    steps = [step for _, step, _, _ in picked]
    token_index, attn_index = paths.indices([(step, row) for _, step, row, _ in picked])
    candidate_scores = flat_cat([record.candidate_scores for record in records])  # all steps, flat
    picked_index = candidate_scores.new_tensor([index for *_, index in picked], dtype=torch.long)  # H
    eos_scores = candidate_scores[picked_index]  # H
    last = token_index.new_tensor(steps).unsqueeze(1)  # H x 1
    tokens = paths.tokens[token_index].scatter_(1, last, options.eos)  # H x (T + 1)
    cumulative = paths.scores[token_index].scatter_(1, last, eos_scores.unsqueeze(1))  # H x (T + 1)
    positional = torch.cat([cumulative[:, :1], cumulative[:, 1:] - cumulative[:, :-1]], dim=1)  # H x (T + 1)
    scores = normalized(eos_scores, steps, options)  # H
    attention = paths.attention(attn_index)  # H x S x (T + 1), or None
    for h, (document, step, _, _) in enumerate(picked):
        finalized[document].append({
            "tokens": tokens[h, : step + 1], "score": scores[h],
            "attention": attention[h, :, : step + 1] if attention is not None else torch.empty(0),
            "alignment": torch.empty(0), "positional_scores": positional[h, : step + 1],
        })
    values = scores.tolist()
    start = 0
    for document, hypos in enumerate(finalized):  # best first, sorted as fairseq sorts them
        order = torch.sort(torch.tensor(values[start: start + len(hypos)]), descending=True)[1].tolist()
        finalized[document] = [hypos[i] for i in order]
        start += len(hypos)
    return finalized


def normalized(eos_scores: Tensor, steps: List[int], options: BeamOptions) -> Tensor:
    """The hypotheses' scores divided by length^lenpen (fairseq's ``--lenpen``), each by the same Python number
    as fairseq divides it by, so that every device rounds them as there."""
    if not options.normalize_scores:
        return eos_scores
    scores = eos_scores.clone()
    for step in sorted(set(steps)):
        group = eos_scores.new_tensor([h for h, s in enumerate(steps) if s == step], dtype=torch.long)
        scores[group] = eos_scores[group] / (step + 1) ** options.len_penalty
    return scores


def pick_finished(records: List[StepRecord], bsz: int, beam: int) -> List[tuple]:
    """The hypotheses that finish, in fairseq's order: by document, and within one by step, then by candidate;
    each document keeps its first ``beam``.  Each is (document, step, row of that step, index into the
    steps' candidates, flat)."""
    ended = flat_cat([record.ended for record in records]).tolist()
    rows = flat_cat([record.candidate_rows for record in records]).tolist()
    picked: List[List[tuple]] = [[] for _ in range(bsz)]
    start = 0
    for step, record in enumerate(records):
        width = record.ended.size(1)
        for d, document in enumerate(record.documents):
            for index in range(start + d * width, start + d * width + beam):
                if ended[index] and len(picked[document]) < beam:
                    picked[document].append((document, step, rows[index], index))
        start += len(record.documents) * width
    return [hypothesis for hypos in picked for hypothesis in hypos]


def flat_cat(tensors: List[Tensor]) -> Tensor:
    """The tensors (each n_j x k_j) flattened and joined, in one operation when they are equally wide."""
    if len({t.size(1) for t in tensors}) == 1:
        return torch.cat(tensors).view(-1)
    return torch.cat([t.reshape(-1) for t in tensors])


class Paths:
    """The steps' records flattened (one tensor each), and the flat positions of a row's history."""

    def __init__(self, records: List[StepRecord]):
        self.parents = torch.cat([record.parents for record in records]).tolist()
        self.tokens = torch.cat([record.tokens for record in records])
        self.scores = torch.cat([record.scores for record in records])
        self.starts = [0]  # flat start of the rows step j made (the rows of step j + 1)
        self.attn_starts = [0]  # flat start of step j's attention rows
        for record in records:
            self.starts.append(self.starts[-1] + record.parents.numel())
            self.attn_starts.append(self.attn_starts[-1] + (0 if record.attn is None else record.attn.size(0)))
        self.attn = [record.attn for record in records]

    def indices(self, ends: List[tuple]):
        """For hypotheses ending at (step t, row r of step t): flat indices (H x (T + 1)) of their tokens and
        cumulative scores at steps 0..t-1 (column t and beyond: anything), and of their attention at steps 0..t
        (beyond: anything)."""
        longest = max(step for step, _ in ends)
        token_index = [[0] * (longest + 1) for _ in ends]
        attn_index = [[0] * (longest + 1) for _ in ends]
        for h, (step, row) in enumerate(ends):
            attn_index[h][step] = self.attn_starts[step] + row
            for j in range(step - 1, -1, -1):  # row is a row of step j + 1
                flat = self.starts[j] + row
                token_index[h][j] = flat
                row = self.parents[flat]
                attn_index[h][j] = self.attn_starts[j] + row
        device = self.tokens.device
        return (torch.tensor(token_index, device=device, dtype=torch.long),
                torch.tensor(attn_index, device=device, dtype=torch.long))

    def attention(self, attn_index: Tensor) -> Optional[Tensor]:
        """H x S x (T + 1) float attention along the paths, or None when the model gives none."""
        if any(attn is None for attn in self.attn):
            return None
        flat = torch.cat(self.attn).float()  # (sum_j R_j) x S
        return flat[attn_index].transpose(1, 2)  # H x S x (T + 1)
