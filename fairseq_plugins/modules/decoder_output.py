"""The decoders' second output, ``extra``: every key, stated once with its shape, who writes and who reads it.

A decoder of this project returns ``(logits, extra)`` as fairseq's do, with the P_vocab logits B x T x V_reg
first and this dict second.  B: rows (documents, or hypotheses in a beam), T: decoder steps, S: source
positions (right-padded, ending in ``</s>``), H: decoder hidden size, M: agents, S_a: tokens per agent.
``tests/test_decoder_output.py`` holds the models' outputs, and every key the package reads from ``extra``, to
this table.
"""
from dataclasses import dataclass
from typing import Tuple


@dataclass(frozen=True)
class OutputKey:
    """One key of ``extra``: its shape (dimension letters as above; ``[...]`` a list of one tensor, fairseq's
    convention for ``attn``), what it holds, and the package modules that write and read it."""

    name: str
    shape: str
    meaning: str
    writers: Tuple[str, ...]
    readers: Tuple[str, ...]


MODELS = ("models/pgn_lstm.py", "models/global_gate_gru.py", "models/dca_lstm.py")

KEYS = {key.name: key for key in (
    OutputKey("attn", "[B x T x S]", "the attention over the source a^t (See eq 2; for dca_lstm g_a^t l_{a,i}^t "
              "in source order)", MODELS,
              ("modules/extended_vocabulary.py", "criterions/focal_copy_coverage.py", "generation/beam_search.py",
               "inference/hub.py", "viz/attention_stats.py")),
    OutputKey("src_tokens", "B x S", "the source ids the copy mixture scatters onto (See eq 9)", MODELS,
              ("modules/extended_vocabulary.py",)),
    OutputKey("decoder_states", "B x T x H", "s_t of the top decoder layer (the states of L_SEM and of RL samples)",
              MODELS, ("criterions/semantic_cohesion.py", "generation/sampling.py", "viz/attention_stats.py")),
    OutputKey("coverage", "B x T x S", "c^t, the attention summed over the steps before t (See eq 10)",
              ("models/pgn_lstm.py",), ("criterions/focal_copy_coverage.py", "inference/hub.py")),
    OutputKey("p_gen", "B x T x 1", "the weight of P_vocab in P(w) (See eq 8; dca_lstm: sum_a g_a p_a)", MODELS,
              ("modules/extended_vocabulary.py", "criterions/focal_copy_coverage.py", "inference/hub.py")),
    OutputKey("p_gen_logit", "B x T x 1", "the logit of p_gen, so log p_gen is exact in the log-space mixture",
              ("models/pgn_lstm.py", "models/global_gate_gru.py"), ("modules/extended_vocabulary.py",)),
    OutputKey("copy_weights", "B x T x S", "the copy mass of every source position, replacing (1 - p_gen) a^t "
              "(~Celikyilmaz eq 16)", ("models/dca_lstm.py",), ("modules/extended_vocabulary.py",)),
    OutputKey("agent_attn", "B x T x M", "the attention over the agents g^t (~Celikyilmaz eq 10)",
              ("models/dca_lstm.py",), ("viz/attention_stats.py",)),
    OutputKey("word_attn", "B x T x M x S_a", "each agent's attention over its tokens l_a^t (~Celikyilmaz eq 8)",
              ("models/dca_lstm.py",), ()),
    OutputKey("agent_p_gen", "B x T x M", "each agent's generation probability p_a^t (~Celikyilmaz eq 14)",
              ("models/dca_lstm.py",), ()),
)}


def dimensions(shape: str) -> Tuple[str, ...]:
    """The dimension letters of a declared shape: "[B x T x S]" -> ("B", "T", "S")."""
    return tuple(shape.strip("[]").split(" x "))
