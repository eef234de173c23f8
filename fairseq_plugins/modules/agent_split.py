"""Splitting each source document into M contiguous paragraphs, one per encoder agent (Celikyilmaz et al. 2018).

The paper gives each of its M agents one paragraph of the document (800 tokens split across 3 agents for
CNN/DM, at paragraph or sentence boundaries where possible).  The split is computed here, inside the model, from
the token ids alone: vectorised over the batch, deterministic, and so identical in training, ``fairseq-generate``,
``fairseq-interactive``, ``generate.sh`` and the hub API, with no change to preprocessing.

Units.  A document's content tokens (everything but the final ``</s>`` that fairseq appends) are cut into units:
  * ``tokens``: every token is a unit;
  * ``sentences``: a sentence ends after a boundary token (``. ! ?``, the full-width ``。！？``, a paragraph
    separator the data may have: any set of tokens, given as text and looked up in the dictionary); a run of
    boundary tokens (``! ?``, ``. . .``) ends one sentence, at its last token; text after the last boundary is
    the last sentence.  A document with fewer than M sentences (no boundary at all, or a short text) is split
    into token units instead, so that every agent gets text whenever the document has at least M tokens.
Groups.  The units are dealt out to the M agents in order, as M contiguous groups:
  * token units: near-equal chunks, the first ``Q mod M`` agents one token longer (``near_equal_groups``);
  * sentences: groups of near-equal length in tokens (a sentence goes to the agent whose share of the document
    holds its middle), with every agent getting at least one sentence (``balanced_sentence_groups``).  Balancing
    tokens rather than counting sentences keeps the longest agent, which sets the padded width S_a and the
    number of sequential LSTM steps, close to S / M: on 3,000-token CNN/DM documents, groups of equal sentence
    counts made the longest agent 40% longer than that.
With fewer units than agents (a document of fewer than M tokens) the first ones get one unit each and the others
none: such an *empty agent* has no token, and the model must mask it (attention, messages).
``</s>``: the final ``</s>`` always belongs to the last agent (so the last agent is never empty).

Layout (``AgentLayout``): agent a of document b holds source positions ``start[b, a] .. start[b, a] +
lengths[b, a] - 1``; the agents' tokens are gathered into a B x M x S_a tensor (S_a the longest agent of the
batch, right-padded), and ``flat_index`` maps every source position back to its place in the flattened
M x S_a layout, so that per-agent values (attention, copy weights) can be read in source order with one gather.
Nothing is S x S: every tensor here has B x S or B x M x S_a entries (M x S_a <= M x S, and about S when the
agents are balanced).
"""
from dataclasses import dataclass
from typing import Optional

import torch
from torch import Tensor

SPLIT_MODES = ("sentences", "tokens")
DEFAULT_BOUNDARIES = ". ! ? 。 ！ ？"


@dataclass
class AgentLayout:
    """Where each agent's paragraph lies in a batch of right-padded sources (B documents, M agents).

    tokens: B x M x S_a, each agent's token ids, right-padded with ``pad``.
    lengths: B x M, the number of tokens of each agent (0 for an empty agent).
    start: B x M, the source position of each agent's first token.
    flat_index: B x S, for each source position, its index in the flattened M x S_a layout (0 at padding).
    source_padding: B x S, True at source padding.
    """

    tokens: Tensor
    lengths: Tensor
    start: Tensor
    flat_index: Tensor
    source_padding: Tensor

    @property
    def padding_mask(self) -> Tensor:
        """B x M x S_a, True where an agent has no token."""
        positions = torch.arange(self.tokens.size(2), device=self.tokens.device)
        return positions.view(1, 1, -1) >= self.lengths.unsqueeze(2)


def agents_to_source(values: Tensor, flat_index: Tensor, source_padding: Tensor) -> Tensor:
    """Per-agent values in source order, 0 at padding: B x T x M x S_a -> B x T x S.

    flat_index, source_padding: B x S, from ``AgentLayout``."""
    bsz, steps = values.shape[:2]
    flat = values.reshape(bsz, steps, -1)  # B x T x (M*S_a)
    index = flat_index.unsqueeze(1).expand(bsz, steps, flat_index.size(1))  # B x T x S
    return flat.gather(2, index).masked_fill(source_padding.unsqueeze(1), 0.0)  # B x T x S


def boundary_ids(dictionary, words: str, option: str = "--agent-boundaries") -> Tensor:
    """The dictionary ids of the space-separated ``words`` that are in the dictionary (1-D LongTensor).

    Raises ValueError naming ``option`` when none of them is: the split would then never see a boundary."""
    unk = dictionary.unk()
    ids = sorted({dictionary.index(word) for word in words.split()} - {unk})
    if not ids:
        raise ValueError(f"{option} {words!r}: none of these tokens is in the dictionary "
                         f"({len(dictionary)} entries), so no document could be split at a sentence boundary; "
                         f"give tokens the data has, or use --agent-split tokens")
    return torch.tensor(ids, dtype=torch.long)


def near_equal_groups(units: Tensor, counts: Tensor, num_groups: int) -> Tensor:
    """The group (0..M-1) of unit q when Q units are dealt into M contiguous near-equal groups, the first
    ``Q mod M`` groups one unit larger.

    units: B x S unit indices (any value where ``counts`` is 0); counts: B, Q per document.  Returns B x S."""
    base = (counts // num_groups).unsqueeze(1)  # B x 1
    extra = (counts % num_groups).unsqueeze(1)  # B x 1: groups with base + 1 units
    cut = extra * (base + 1)  # units in the larger groups
    in_large = units // (base + 1)
    in_small = extra + (units - cut) // base.clamp(min=1)
    return torch.where(units < cut, in_large, in_small).clamp(min=0, max=num_groups - 1)


def sentence_units(src_tokens: Tensor, content: Tensor, boundaries: Tensor):
    """Sentence index of every content token and the number of sentences Q.  B x S, B.

    A sentence ends at a boundary token not followed by another boundary token; the content after the last
    boundary (if any) is the last sentence."""
    is_boundary = torch.isin(src_tokens, boundaries.to(src_tokens.device)) & content  # B x S
    next_is_boundary = torch.cat([is_boundary[:, 1:], is_boundary.new_zeros(is_boundary.size(0), 1)], dim=1)
    ends = (is_boundary & ~next_is_boundary).long()  # B x S: last token of a sentence
    sentence = ends.cumsum(dim=1) - ends  # B x S: sentences ended strictly before each token
    num_content = content.sum(dim=1)  # B
    last = (num_content - 1).clamp(min=0).unsqueeze(1)  # B x 1
    count = torch.where(num_content > 0, sentence.gather(1, last).squeeze(1) + 1, torch.zeros_like(num_content))
    return sentence, count


def balanced_sentence_groups(sentence: Tensor, content: Tensor, counts: Tensor, num_groups: int) -> Tensor:
    """The group (0..M-1) of every token when the Q sentences of each document are dealt into M contiguous groups
    of near-equal length in tokens, each group with at least one sentence (needs Q >= M where used).

    Sentence q goes to t_q = floor(M * middle_q / n) (n content tokens), and then, in order,
        a_q = min(t_q, a_{q-1} + 1)  (no group skipped)  =  q + min(0, min_{p <= q} (t_p - p)),
        a_q = max(a_q, q - (Q - M))  (enough sentences left for the groups after),
    which is non-decreasing by steps of 0 or 1 from a_0 = 0 to a_{Q-1} = M - 1.

    sentence: B x S sentence index of every token; content: B x S; counts: B, Q.  Returns B x S."""
    bsz, src_len = sentence.shape
    positions = torch.arange(src_len, device=sentence.device).unsqueeze(0).expand(bsz, src_len)  # B x S
    index = sentence.masked_fill(~content, 0).clamp(max=src_len - 1)  # B x S
    big = torch.full((bsz, src_len), src_len, dtype=torch.long, device=sentence.device)
    start = big.scatter_reduce(1, index, positions.masked_fill(~content, src_len), "amin")  # B x Q': first token
    end = torch.full_like(big, -1).scatter_reduce(1, index, positions.masked_fill(~content, -1), "amax") + 1
    num_content = content.sum(dim=1, keepdim=True).clamp(min=1)  # B x 1: n
    target = (num_groups * (start + end) // (2 * num_content)).clamp(max=num_groups - 1)  # B x Q': t_q
    order = positions  # q = 0..S-1 (only q < Q is read)
    skipless = order + (target - order).cummin(dim=1).values.clamp(max=0)  # a_q <= a_{q-1} + 1
    groups = torch.maximum(skipless, order - (counts.unsqueeze(1) - num_groups))  # B x Q'
    return groups.gather(1, index).clamp(min=0, max=num_groups - 1)  # B x S


def split_agents(src_tokens: Tensor, pad: int, eos: int, num_agents: int, mode: str = "sentences",
                 boundaries: Optional[Tensor] = None) -> AgentLayout:
    """The agents' paragraphs of a batch of sources (see the module docstring).

    Args:
        src_tokens: B x S, right-padded (``utils.convert_padding_direction``), each ending in ``</s>`` as fairseq
            collates them (a source without a final ``</s>`` is split the same way, all of it content).
        pad, eos: the dictionary's padding and ``</s>`` ids.
        num_agents: M >= 1.
        mode: "sentences" (groups of sentences of near-equal length, token chunks for a document with fewer
            than M sentences) or "tokens" (token chunks always).
        boundaries: 1-D ids of the sentence-boundary tokens (needed for "sentences").
    Returns:
        an ``AgentLayout``.
    """
    if mode not in SPLIT_MODES:
        raise ValueError(f"unknown --agent-split {mode!r} (choose from {', '.join(SPLIT_MODES)})")
    if num_agents < 1:
        raise ValueError(f"--num-agents must be >= 1, not {num_agents}")
    bsz, src_len = src_tokens.shape
    device = src_tokens.device
    source_padding = src_tokens.eq(pad)  # B x S
    lengths = (~source_padding).sum(dim=1)  # B
    positions = torch.arange(src_len, device=device).unsqueeze(0).expand(bsz, src_len)  # B x S
    last_token = src_tokens.gather(1, (lengths - 1).clamp(min=0).unsqueeze(1)).squeeze(1)  # B
    num_content = lengths - (last_token.eq(eos) & (lengths > 0)).long()  # B: tokens before the final </s>
    content = positions < num_content.unsqueeze(1)  # B x S

    agent = near_equal_groups(positions, num_content, num_agents)  # B x S: token chunks
    if mode == "sentences":
        if boundaries is None:
            raise ValueError("--agent-split sentences needs boundary tokens (--agent-boundaries)")
        sentence, num_sentences = sentence_units(src_tokens, content, boundaries)
        by_sentence = num_sentences >= num_agents  # B: enough sentences to give every agent one
        grouped = balanced_sentence_groups(sentence, content, num_sentences, num_agents)  # B x S
        agent = torch.where(by_sentence.unsqueeze(1), grouped, agent)
    agent = torch.where(content, agent, torch.full_like(agent, num_agents - 1))  # the final </s>: last agent
    agent = agent.masked_fill(source_padding, num_agents)  # padding: a sentinel group, dropped below
    agent_lengths = torch.zeros(bsz, num_agents + 1, dtype=torch.long, device=device)
    agent_lengths = agent_lengths.scatter_add(1, agent, torch.ones_like(agent))[:, :num_agents]  # B x M
    start = agent_lengths.cumsum(dim=1) - agent_lengths  # B x M: agents are contiguous and in order

    width = max(int(agent_lengths.max()), 1)  # S_a
    offsets = torch.arange(width, device=device).view(1, 1, width)
    index = start.unsqueeze(2) + offsets  # B x M x S_a: source position of each agent slot
    valid = offsets < agent_lengths.unsqueeze(2)  # B x M x S_a
    tokens = src_tokens.gather(1, index.clamp(max=src_len - 1).view(bsz, -1)).view(bsz, num_agents, width)
    tokens = tokens.masked_fill(~valid, pad)  # B x M x S_a

    own = agent.clamp(max=num_agents - 1)  # B x S
    flat_index = own * width + (positions - start.gather(1, own))  # B x S
    flat_index = flat_index.masked_fill(source_padding, 0)
    return AgentLayout(tokens, agent_lengths, start, flat_index, source_padding)

