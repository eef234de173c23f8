"""``dca_lstm``: deep communicating agents for abstractive summarization (Celikyilmaz, Bosselut, He & Choi, NAACL
2018, "Deep Communicating Agents for Abstractive Summarization", arXiv 1803.10357).

The document is split into M paragraphs, one per encoder agent; the agents share their parameters and exchange
messages between their encoder layers; one LSTM decoder attends to the words of each agent and then to the
agents.  Equation numbers are those of our notes on the paper (../shared/papers/DCA_AND_PAULUS.md); (~) marks
a number the notes infer, [U] a choice the paper leaves open (our reading; an option where cheap).

Split (modules/agent_split.py).  Inside the model, from the token ids: M contiguous near-equal groups of
sentences (``--agent-split sentences``, boundaries ``--agent-boundaries``, default ``. ! ? 。 ！ ？``; a document
with fewer than M sentences is cut into token chunks), or M near-equal token chunks (``--agent-split tokens``).
Training, fairseq-generate, fairseq-interactive, generate.sh and the hub API therefore split identically.  The
``</s>`` that fairseq appends to every source belongs to the last agent.  A document shorter than M units leaves
agents empty: they are masked out of the messages and of the agent attention.

Encoder (modules/agent_encoder.py), all agents as one batch of B*M sequences:
    h^(1)   = W1 BiLSTM(e)                                local layer, directions projected to H [U]
    z^(k)_a = mean_{m != a} h^(k)_{m, I_m}                 message: the OTHER agents' last states
    h^(k+1) = W2 BiLSTM(tanh(W3 h^(k) + W4 z^(k)))        Celikyilmaz eq 7 without v1 (``--message-v1``: v1 an
                                                          H x H matrix)
``--contextual-layers K`` (paper: 2), ``--no-communication`` (z = 0: the paper's ablation).

Decoder (modules/agent_attention.py), one LSTM layer:
    s_0     = h^(K)_{1, I_1}                             the first agent's last top-layer state (the first
                                                         non-empty agent when the first is empty); its cell
                                                         ``--decoder-init-cell agent``: a projection of that
                                                         agent's final top-layer cells (both directions) [U];
                                                         ``zeros``: 0
    s_t     = LSTM(y_{t-1}, s_{t-1})                     no input feeding (the paper has none)
    l_a^t, c_a^t                                          word attention inside each agent (~Celikyilmaz eqs 8-9)
    g^t, c*_t                                             agent attention, document context (~Celikyilmaz eqs 10-11)
    P_voc   = softmax(V'(V [s_t; c*_t] + b) + b')        (~Celikyilmaz eq 12; "MLP" read as See et al.'s two linear
                                                          layers [U])
    P_voc   = softmax(V'(V [s_t; c*_t; c*_{t-1}] + b) + b'),  c*_0 = 0
                                                          contextual agent attention (~Celikyilmaz eq 13, form [U];
                                                          on by default, ``--no-contextual-agent-attention``)
    p_a^t   = sigmoid(v5^T c_a^t + v6^T s_t + v7^T y_t + b)   one generation switch per agent (~Celikyilmaz eq 14,
                                                              form [U])
    P^a(w)  = p_a^t P_voc(w) + (1 - p_a^t) sum_{i: x_{a,i} = w} l_{a,i}^t            (~Celikyilmaz eq 15)
    P(w)    = sum_a g_a^t P^a(w)                          over the document's extended vocabulary (~Celikyilmaz eq 16)
The multi-agent pointer is modules/copy_mixture.py's ``merge_copy_sources`` read through
``ExtendedVocabularyOutput``'s ``copy_weights`` route; ``--no-copy`` gives P(w) = P_voc(w).  As in pgn_lstm,
``</s>`` (which fairseq appends to the source, in the last agent) is never copied: that agent's attention on it
is spread over the agent's other words (``--eos-attention renormalise``, the default) or joins its generation
share (``generate``, a pointer sentinel), and an agent holding nothing else generates only.

Outputs: the P_voc logits (B x T x V_reg) and ``extra``:
    attn [B x T x S]: g_a^t l_{a,i}^t at each source position (right-padded order), rows summing to 1: the
        document-level attention the hub API, the visualiser and the generator's alignments read;
    decoder_states B x T x H (s_t, for semantic_cohesion); src_tokens B x S (right-padded);
    agent_attn B x T x M (g^t); word_attn B x T x M x S_a (l^t);
    with copying: p_gen B x T x 1 (sum_a g_a p_a, the weight of P_voc), agent_p_gen B x T x M (p_a^t) and
    copy_weights B x T x S (g_a (1 - p_a) l_{a,i} at each source position).
No coverage: the paper's model has none, so focal_copy_coverage's coverage term is 0 for this model.

Cost: the recurrence is the LSTM alone, so training runs it as one call over the summary; the attention of all
steps follows (scores step by step in cache).  Time and memory are linear in the document length (no S x S
tensor): see scripts/bench/dca_scale.py.
"""
import logging
from typing import Dict

import torch
import torch.nn.functional as F
from torch import Tensor

from fairseq import utils
from fairseq.models import FairseqEncoder, FairseqEncoderDecoderModel, register_model, register_model_architecture

from fairseq_plugins.modules.agent_attention import AgentAttention, AgentWordAttention
from fairseq_plugins.modules.agent_encoder import AgentEncoder
from fairseq_plugins.modules.agent_split import DEFAULT_BOUNDARIES, SPLIT_MODES, agents_to_source, boundary_ids
from fairseq_plugins.modules.agent_split import split_agents
from fairseq_plugins.modules.beam_reorder import SOURCE_ROW, reorder_rows, source_rows
from fairseq_plugins.modules.copy_mixture import (DEFAULT_EOS_ATTENTION, GenerationSwitch, add_eos_attention_arg,
                                                  eos_attention_of, merge_copy_sources)
from fairseq_plugins.modules.extended_vocabulary import ExtendedVocabularyModel, ExtendedVocabularyOutput, MarkerAsUnk
from fairseq_plugins.modules.factories import (
    Dropout,
    LSTM,
    Linear,
    add_embedding_args,
    build_embeddings,
    common_defaults,
    flush_denormals,
    rnn_precision,
)
from fairseq_plugins.modules.step_state import StepStateDecoder
from fairseq_plugins.text.markers import first_marker_index

logger = logging.getLogger(__name__)

DEFAULT_MAX_POSITIONS = int(1e5)
INIT_CELL = ("agent", "zeros")


class DCAEncoder(FairseqEncoder):
    """Splits each source into M agents and encodes them (modules/agent_split.py, modules/agent_encoder.py).

    Returns a dict of batch-first tensors:
        agent_states B x M x S_a x H (top layer, zero at padding), agent_padding B x M x S_a (True at padding),
        agent_lengths B x M, agent_tokens B x M x S_a, flat_index B x S and padding_mask B x S (to map per-agent
        values back to source positions), src_tokens B x S (right-padded), init_hidden B x H and init_cell
        B x 2H (the first non-empty agent's last top-layer state and final cells), source_row B.

    Args:
        dictionary, embed_tokens: source dictionary and embeddings.
        hidden_size: H (each BiLSTM direction, and the projected states).
        num_agents: M; contextual_layers: K.
        split: "sentences" or "tokens"; boundaries: 1-D ids of the sentence boundary tokens (sentences).
        communicate: exchange messages; message_v1: Celikyilmaz eq 7's v1 as an H x H matrix.
        num_regular: index of the first OOV marker (markers are embedded as ``<unk>``).
    """

    def __init__(self, dictionary, embed_tokens, hidden_size=256, num_agents=3, contextual_layers=2,
                 split="sentences", boundaries=None, communicate=True, message_v1=False, dropout_in=0.0,
                 dropout_out=0.0, num_regular=None, max_positions=DEFAULT_MAX_POSITIONS):
        super().__init__(dictionary)
        self.padding_idx = dictionary.pad()
        self.eos_idx = dictionary.eos()
        self.num_agents = num_agents
        self.split = split
        self.register_buffer("boundaries", boundaries if boundaries is not None else torch.zeros(0, dtype=torch.long),
                             persistent=False)
        self.embed_tokens = embed_tokens
        self.as_unk = MarkerAsUnk(num_regular or len(dictionary), dictionary.unk())
        self.dropout_in = Dropout(dropout_in)
        self.dropout_out = Dropout(dropout_out)
        self.agents = AgentEncoder(embed_tokens.embedding_dim, hidden_size, contextual_layers, communicate,
                                   message_v1, dropout_out)
        self.output_units = hidden_size
        self.max_source_positions = max_positions

    def forward(self, src_tokens: Tensor, src_lengths: Tensor, **unused):
        src_tokens = utils.convert_padding_direction(src_tokens, self.padding_idx, left_to_right=True)  # B x S
        layout = split_agents(src_tokens, self.padding_idx, self.eos_idx, self.num_agents, self.split,
                              self.boundaries if self.split == "sentences" else None)
        padding = layout.padding_mask  # B x M x S_a
        embedded = self.dropout_in(self.embed_tokens(self.as_unk(layout.tokens)))  # B x M x S_a x E
        encoded = self.agents(embedded, layout.lengths, padding)
        bsz = src_tokens.size(0)
        rows = torch.arange(bsz, device=src_tokens.device)
        first = (layout.lengths > 0).int().argmax(dim=1)  # B: the first non-empty agent
        return {
            "agent_states": self.dropout_out(encoded.states),  # B x M x S_a x H
            "agent_padding": padding,  # B x M x S_a
            "agent_lengths": layout.lengths,  # B x M
            "agent_tokens": layout.tokens,  # B x M x S_a
            "flat_index": layout.flat_index,  # B x S
            "padding_mask": layout.source_padding,  # B x S
            "src_tokens": src_tokens,  # B x S
            "init_hidden": encoded.layer_last[-1][rows, first],  # B x H   (h^(K)_{1, I_1})
            "init_cell": encoded.final_cells[rows, first],  # B x 2H
            SOURCE_ROW: source_rows(bsz, src_tokens.device),  # B
        }

    def reorder_encoder_out(self, encoder_out: Dict[str, Tensor], new_order: Tensor):
        return reorder_rows(encoder_out, new_order, source_only=encoder_out.keys())  # modules/beam_reorder.py

    def max_positions(self):
        return self.max_source_positions


class DCADecoder(StepStateDecoder):
    """One-layer LSTM decoder with word and agent attention, contextual agent attention and the multi-agent
    pointer (module docstring).

    Args:
        dictionary, embed_tokens: target dictionary (extended vocabulary) and embeddings.
        encoder_hidden: H, the size of an agent state.
        hidden_size: decoder LSTM size (when it differs from H, s_0 comes through a learned projection).
        out_embed_dim: size of V's output (~Celikyilmaz eq 12); attention_dim: size inside both attentions' tanh.
        copy: the multi-agent pointer (~Celikyilmaz eqs 14-16); False: P(w) = P_voc(w).
        contextual_agent_attention: c*_{t-1} enters the output layer (~Celikyilmaz eq 13).
        init_cell: "agent" (projection of the first agent's final top-layer cells) or "zeros" [U].
        share_input_output_embed: V' is the regular part of the embedding matrix.
        num_regular: size of the regular vocabulary.
    """

    state_source_only = ("keys",)

    def __init__(self, dictionary, embed_tokens, encoder_hidden=256, hidden_size=256, out_embed_dim=256,
                 attention_dim=256, dropout_in=0.0, dropout_out=0.0, copy=True, contextual_agent_attention=True,
                 init_cell="agent", share_input_output_embed=False, num_regular=None,
                 max_positions=DEFAULT_MAX_POSITIONS, eos_attention=DEFAULT_EOS_ATTENTION):
        super().__init__(dictionary)
        if init_cell not in INIT_CELL:
            raise ValueError(f"unknown --decoder-init-cell {init_cell!r} (choose from {', '.join(INIT_CELL)})")
        embed_dim = embed_tokens.embedding_dim
        self.init_target_side(embed_tokens, num_regular, dropout_in, dropout_out, max_positions)
        self.hidden_size = hidden_size
        self.encoder_hidden = encoder_hidden
        self.copy = copy
        self.eos_attention = eos_attention
        self.contextual_agent_attention = contextual_agent_attention

        self.init_hidden = Linear(encoder_hidden, hidden_size) if encoder_hidden != hidden_size else None
        self.init_cell = Linear(2 * encoder_hidden, hidden_size) if init_cell == "agent" else None
        self.lstm = LSTM(embed_dim, hidden_size)
        self.word_attention = AgentWordAttention(encoder_hidden, hidden_size, attention_dim)
        self.agent_attention = AgentAttention(encoder_hidden, hidden_size, attention_dim)
        readout_inputs = hidden_size + encoder_hidden * (2 if contextual_agent_attention else 1)
        self.pre_output = Linear(readout_inputs, out_embed_dim)  # V, b   (~Celikyilmaz eqs 12-13)
        self.share_input_output_embed = share_input_output_embed
        if share_input_output_embed:
            if out_embed_dim != embed_dim:
                raise ValueError("--share-decoder-input-output-embed needs --decoder-out-embed-dim equal to the "
                                 f"decoder embedding size ({out_embed_dim} != {embed_dim})")
        else:
            self.output_projection = Linear(out_embed_dim, self.num_regular)  # V', b'
        self.switch = GenerationSwitch([encoder_hidden, hidden_size, embed_dim]) if copy else None  # v5, v6, v7, b
        self.extended_output = ExtendedVocabularyOutput(self.num_regular, len(dictionary), dictionary.unk(), copy)

    # ------------------------------------------------------------------ recurrent part
    def initial_state(self, encoder_out: Dict[str, Tensor]) -> Dict[str, Tensor]:
        hidden = encoder_out["init_hidden"]  # B x H   (s_0 = h^(K)_{1, I_1})
        if self.init_hidden is not None:
            hidden = self.init_hidden(hidden)  # B x H_dec
        if self.init_cell is not None:
            cell = self.init_cell(encoder_out["init_cell"])  # B x H_dec   [U]
        else:
            cell = hidden.new_zeros(hidden.shape)
        return {
            "hidden": hidden,  # B x H_dec
            "cell": cell,  # B x H_dec
            "document": hidden.new_zeros(hidden.size(0), self.encoder_hidden),  # B x H   (c*_{t-1}; c*_0 = 0)
            "keys": self.word_attention.project_keys(encoder_out["agent_states"]),  # B x M x S_a x A
            SOURCE_ROW: encoder_out[SOURCE_ROW],  # B
        }

    def extract_features(self, prev_output_tokens, encoder_out, incremental_state=None) -> Dict[str, Tensor]:
        """Runs the LSTM over the new tokens, then both attentions for all of them.  Returns, batch-first:
        states s_t B x T x H_dec, inputs y_t B x T x E, word_attn B x T x M x S_a, contexts c_a^t B x T x M x H,
        agent_attn B x T x M, document c*_t B x T x H and previous c*_{t-1} B x T x H."""
        state = self.load_state(encoder_out, incremental_state)
        tokens = self.new_tokens(prev_output_tokens, incremental_state)  # B x T (B x 1 incrementally)
        inputs = self.dropout_in(self.embed_tokens(self.as_unk(tokens)))  # B x T x E   (y_t)
        initial = (state["hidden"].unsqueeze(0), state["cell"].unsqueeze(0))  # 1 x B x H_dec each
        with rnn_precision(inputs):
            states, (hidden, cell) = self.lstm(inputs, initial)  # B x T x H_dec   (s_t)
        nonempty = encoder_out["agent_lengths"] > 0  # B x M
        word_attn, contexts = self.word_attention(state["keys"], encoder_out["agent_states"], states,
                                                  encoder_out["agent_padding"], nonempty)  # (~Celikyilmaz eqs 8-9)
        agent_attn, document = self.agent_attention(contexts, states, nonempty)  # (~Celikyilmaz eqs 10-11)
        previous = torch.cat([state["document"].unsqueeze(1), document[:, :-1]], dim=1)  # B x T x H   c*_{t-1}
        if incremental_state is not None:
            self.save_state(incremental_state, dict(state, hidden=hidden[0], cell=cell[0], document=document[:, -1]))
        return {"states": states, "inputs": inputs, "word_attn": word_attn, "contexts": contexts,
                "agent_attn": agent_attn, "document": document, "previous": previous}

    # ------------------------------------------------------------------ output part
    def forward(self, prev_output_tokens, encoder_out, incremental_state=None, **unused):
        steps = self.extract_features(prev_output_tokens, encoder_out, incremental_state)
        states, agent_attn, word_attn = steps["states"], steps["agent_attn"], steps["word_attn"]
        readout = [states, steps["document"]] + ([steps["previous"]] if self.contextual_agent_attention else [])
        features = self.dropout_out(self.pre_output(torch.cat(readout, dim=2)))  # B x T x out_dim
        logits = self.output_layer(features)  # B x T x V_reg   (~Celikyilmaz eqs 12-13, before the softmax)
        to_source = lambda values: agents_to_source(  # noqa: E731   B x T x M x S_a -> B x T x S
            values, encoder_out["flat_index"], encoder_out["padding_mask"])
        extra = {
            "attn": [to_source(agent_attn.unsqueeze(3) * word_attn)],  # B x T x S: g_a^t l_{a,i}^t
            "src_tokens": encoder_out["src_tokens"],  # B x S
            "decoder_states": states,  # B x T x H_dec
            "agent_attn": agent_attn,  # B x T x M
            "word_attn": word_attn,  # B x T x M x S_a
        }
        if self.copy:
            agents = agent_attn.size(2)
            expand = lambda x: x.unsqueeze(2).expand(-1, -1, agents, -1)  # noqa: E731   B x T x D -> B x T x M x D
            # (~Celikyilmaz eq 14)
            p_agent = self.switch(steps["contexts"], expand(states), expand(steps["inputs"])).squeeze(3)
            generate, copy, _ = merge_copy_sources(agent_attn, p_agent, word_attn, encoder_out["agent_tokens"],
                                                   uncopyable=self.dictionary.eos(),
                                                   eos_attention=self.eos_attention)  # (~Celikyilmaz eqs 15-16)
            extra["p_gen"] = generate  # B x T x 1: sum_a g_a p_a, the weight of P_voc
            extra["agent_p_gen"] = p_agent  # B x T x M
            extra["copy_weights"] = to_source(copy.view(word_attn.shape))  # B x T x S
        return logits, extra

    def output_layer(self, features: Tensor) -> Tensor:
        if self.share_input_output_embed:
            return F.linear(features, self.embed_tokens.weight[: self.num_regular])
        return self.output_projection(features)


@register_model("dca_lstm")
class DCALSTMModel(ExtendedVocabularyModel, FairseqEncoderDecoderModel):
    """Deep communicating agents.  See the module docstring for the equations."""

    @staticmethod
    def add_args(parser):
        # fmt: off
        parser.add_argument("--dropout", type=float, metavar="D", help="dropout probability")
        parser.add_argument("--dropout-in", type=float, metavar="D", help="dropout on embeddings")
        parser.add_argument("--dropout-out", type=float, metavar="D", help="dropout on LSTM outputs")
        parser.add_argument("--num-agents", type=int, metavar="M", help="encoder agents, one paragraph each (paper: 3)")
        parser.add_argument("--contextual-layers", type=int, metavar="K",
                            help="contextual (communicating) BiLSTM layers above the local one (paper: 2)")
        parser.add_argument("--agent-split", choices=SPLIT_MODES,
                            help="sentences: M contiguous near-equal groups of sentences (token chunks for a "
                                 "document with fewer than M sentences); tokens: M near-equal token chunks")
        parser.add_argument("--agent-boundaries", type=str, metavar="TOKENS",
                            help="space-separated tokens that end a sentence or paragraph for --agent-split "
                                 f"sentences (default: {DEFAULT_BOUNDARIES!r}; those in the dictionary are used)")
        parser.add_argument("--no-communication", action="store_true",
                            help="agents exchange no messages (the paper's no-communication ablation)")
        parser.add_argument("--message-v1", action="store_true",
                            help="Celikyilmaz eq 7's v1 as an H x H matrix after the tanh (default: v1 dropped) "
                                 "[interpretation]")
        parser.add_argument("--no-contextual-agent-attention", action="store_true",
                            help="the output layer does not read the previous step's document context "
                                 "(~Celikyilmaz eq 13)")
        parser.add_argument("--no-copy", action="store_true", help="no multi-agent pointer: P(w) = P_voc(w)")
        parser.add_argument("--copy", dest="no_copy", action="store_false", default=False,
                            help="the multi-agent pointer (the default): P(w) = ~Celikyilmaz eq 16")
        add_eos_attention_arg(parser)
        parser.add_argument("--decoder-init-cell", choices=INIT_CELL,
                            help="decoder's initial cell: agent (projection of the first agent's final cells) or "
                                 "zeros [interpretation]")
        parser.add_argument("--encoder-hidden-size", type=int, metavar="N",
                            help="agent BiLSTM size per direction, and of the projected agent states")
        parser.add_argument("--decoder-hidden-size", type=int, metavar="N", help="decoder LSTM size")
        parser.add_argument("--decoder-out-embed-dim", type=int, metavar="N",
                            help="size of V's output (~Celikyilmaz eq 12)")
        parser.add_argument("--attention-dim", type=int, metavar="N",
                            help="size inside the word and agent attentions' tanh (default: decoder hidden size)")
        parser.add_argument("--share-decoder-input-output-embed", action="store_true",
                            help="use the decoder embeddings as V' (~Celikyilmaz eq 12)")
        # fmt: on
        add_embedding_args(parser, pretrained=True)

    @classmethod
    def build_model(cls, args, task):
        base_architecture(args)
        flush_denormals()
        if args.num_agents < 1:
            raise ValueError(f"--num-agents must be >= 1, not {args.num_agents}")
        if args.contextual_layers < 0:
            raise ValueError(f"--contextual-layers must be >= 0, not {args.contextual_layers}")
        src_dict, tgt_dict = task.source_dictionary, task.target_dictionary
        num_regular = first_marker_index(tgt_dict)
        encoder_embed, decoder_embed = build_embeddings(args, src_dict, tgt_dict)
        boundaries = boundary_ids(src_dict, args.agent_boundaries) if args.agent_split == "sentences" else None
        encoder = DCAEncoder(
            src_dict, encoder_embed, hidden_size=args.encoder_hidden_size, num_agents=args.num_agents,
            contextual_layers=args.contextual_layers, split=args.agent_split, boundaries=boundaries,
            communicate=not args.no_communication, message_v1=args.message_v1, dropout_in=args.dropout_in,
            dropout_out=args.dropout_out, num_regular=first_marker_index(src_dict),
            max_positions=getattr(args, "max_source_positions", DEFAULT_MAX_POSITIONS),
        )
        decoder = DCADecoder(
            tgt_dict, decoder_embed, encoder_hidden=encoder.output_units, hidden_size=args.decoder_hidden_size,
            out_embed_dim=args.decoder_out_embed_dim, attention_dim=args.attention_dim,
            dropout_in=args.dropout_in, dropout_out=args.dropout_out, copy=not args.no_copy,
            contextual_agent_attention=not args.no_contextual_agent_attention, init_cell=args.decoder_init_cell,
            share_input_output_embed=args.share_decoder_input_output_embed, num_regular=num_regular,
            max_positions=getattr(args, "max_target_positions", DEFAULT_MAX_POSITIONS),
            eos_attention=args.eos_attention,
        )
        logger.info("dca_lstm: %d agents (%s split), %d contextual layers, communication=%s, copy=%s, caa=%s",
                    args.num_agents, args.agent_split, args.contextual_layers, not args.no_communication,
                    decoder.copy, decoder.contextual_agent_attention)
        return cls(encoder, decoder)


@register_model_architecture("dca_lstm", "dca_lstm")
def base_architecture(args):
    args.dropout = getattr(args, "dropout", 0.1)
    args.encoder_embed_dim = getattr(args, "encoder_embed_dim", 128)
    args.encoder_hidden_size = getattr(args, "encoder_hidden_size", 256)
    args.decoder_embed_dim = getattr(args, "decoder_embed_dim", args.encoder_embed_dim)
    args.decoder_hidden_size = getattr(args, "decoder_hidden_size", args.encoder_hidden_size)
    args.decoder_out_embed_dim = getattr(args, "decoder_out_embed_dim", args.decoder_hidden_size)
    args.attention_dim = getattr(args, "attention_dim", None) or args.decoder_hidden_size
    args.num_agents = getattr(args, "num_agents", 3)
    args.contextual_layers = getattr(args, "contextual_layers", 2)
    args.agent_split = getattr(args, "agent_split", "sentences")
    args.agent_boundaries = getattr(args, "agent_boundaries", None) or DEFAULT_BOUNDARIES
    args.no_communication = getattr(args, "no_communication", False)
    args.message_v1 = getattr(args, "message_v1", False)
    args.no_contextual_agent_attention = getattr(args, "no_contextual_agent_attention", False)
    args.no_copy = getattr(args, "no_copy", False)
    args.eos_attention = eos_attention_of(args)
    args.decoder_init_cell = getattr(args, "decoder_init_cell", "agent")
    common_defaults(args)


@register_model_architecture("dca_lstm", "dca_lstm_celikyilmaz2018")
def dca_lstm_celikyilmaz2018(args):
    """Celikyilmaz et al. (2018) on CNN/DM: 3 agents over sentence groups, 1 local + 2 contextual layers, message
    passing, contextual agent attention and the multi-agent pointer.  Sizes (embeddings 128, hidden 256) are See
    et al.'s, which the paper compares with; the paper's own appendix sizes were not available to us [U].  The
    800-token input and the 100-token output are set by the config (configs/dca_cnndm.conf, whose preprocessing is
    cnndm_small's; the paper's 50k vocabulary is ``summ-prepare --vocab-size 50000``)."""
    args.num_agents = getattr(args, "num_agents", 3)
    args.contextual_layers = getattr(args, "contextual_layers", 2)
    args.agent_split = getattr(args, "agent_split", "sentences")
    args.encoder_embed_dim = getattr(args, "encoder_embed_dim", 128)
    args.encoder_hidden_size = getattr(args, "encoder_hidden_size", 256)
    args.decoder_hidden_size = getattr(args, "decoder_hidden_size", 256)
    base_architecture(args)


@register_model_architecture("dca_lstm", "dca_lstm_small")
def dca_lstm_small(args):
    """A CPU-sized model for quick experiments: 3 agents, 2 contextual layers, emb 64, hidden 128, shared
    embeddings (the sizes of pgn_lstm_small)."""
    args.encoder_embed_dim = getattr(args, "encoder_embed_dim", 64)
    args.encoder_hidden_size = getattr(args, "encoder_hidden_size", 128)
    args.decoder_hidden_size = getattr(args, "decoder_hidden_size", 128)
    args.share_all_embeddings = getattr(args, "share_all_embeddings", True)
    base_architecture(args)
