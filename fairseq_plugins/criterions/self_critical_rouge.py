"""``self_critical_rouge``: self-critical policy-gradient training with a ROUGE reward, mixed with the ML loss.

Rennie et al. (2017)'s self-critical sequence training as Paulus et al. (2018) use it for summarization.  For
each document x of the batch:
    y^s   a summary sampled from the model's own final distribution, token by token (free running; for a
          pointer model over the extended vocabulary, a sampled marker fed back as the model feeds markers);
    y^g   the greedy (argmax) summary, the baseline;
    L_rl  = (r(y^g) - r(y^s)) * sum_t log p(y^s_t | y^s_<t, x)                         (Paulus eq 15)
    L     = gamma L_rl + (1 - gamma) L_ml,   gamma = 0.9984 by default                  (Paulus eq 16)
Minimising L_rl raises the probability of a sample that beats the greedy baseline and lowers that of one that
does not (tests/test_self_critical_rouge.py checks the direction with one SGD step).  The reward factor is a
constant: no gradient flows through the rewards, the greedy summary or the sampling.

The reward r is ROUGE on token ids against the batch's reference (scoring/rouge_reward.py): ROUGE-L F1 by
default (``--rl-reward rougeL``), or rouge1, rouge2 or a weighted mix (``rouge1=0.5,rougeL=0.5``).  It equals
the project's exact ROUGE (rouge_python, no stemming) on the same ids, each summary one sentence; ``</s>`` and
padding are not counted, a marker matches itself (the same word of the same document), ``<unk>`` matches
nothing.

How a batch is computed (one encoder pass shared by the decode of y^s and y^g and two teacher-forced passes),
the two mixes of Paulus eq 16 and how dropout is handled: ``SelfCriticalRougeCriterion.forward``.  The baseline
y^g may be decoded with n-gram blocking (``decode``); sentence-level rewards: ``sentence_rewards``; the ML part
is a replaceable criterion (the class docstring); what is logged: ``reduce_metrics``.  Why some of these
defaults are what they are (the unblocked baseline, scoring y^s with a separate pass, the mix): docs/design.md.
"""
import contextlib
import logging
import math
import os
import time
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple

import torch
from torch import Tensor

from fairseq import metrics
from fairseq.criterions import FairseqCriterion, register_criterion
from fairseq.models import FairseqEncoderDecoderModel
from fairseq.dataclass import ChoiceEnum

from fairseq_plugins.criterions.focal_copy_coverage import FocalCopyCoverageConfig, FocalCopyCoverageCriterion
from fairseq_plugins.criterions.nonfinite import NonFinitePolicy
from fairseq_plugins.generation.ngram_blocking import NGramBlocker, ignore_ids
from fairseq_plugins.generation.sampling import FreeRun, encoder_input, sample_and_greedy, teacher_forcing_input
from fairseq_plugins.modules.target_scores import target_log_probs
from fairseq_plugins.modules.training_switches import dropout_off, own_predictions_off
from fairseq_plugins.scoring.rouge_reward import LCS_BACKENDS, RougeReward, parse_reward
from fairseq_plugins.text.markers import marker_index

logger = logging.getLogger(__name__)

RL_NORMALIZATION = ChoiceEnum(["sequence", "token"])
RL_MIX = ChoiceEnum(["paper", "averages"])


@dataclass
class SelfCriticalRougeConfig(FocalCopyCoverageConfig):
    rl_gamma: float = field(
        default=0.9984, metadata={"help": "gamma of Paulus eq 16, L = gamma L_rl + (1 - gamma) L_ml (Paulus et al.: "
                                          "0.9984; 0 = the ML loss alone, 1 = RL alone)"})
    rl_reward: str = field(
        default="rougeL", metadata={"help": "reward: rougeL, rouge1, rouge2 ... (F1 on token ids), or a weighted "
                                            "mix such as rouge1=0.5,rougeL=0.5"})
    rl_mix: RL_MIX = field(
        default="paper", metadata={"help": "paper: Paulus eq 16 on L_rl and L_ml both summed over the summary's "
                                           "tokens, averaged over documents; averages: gamma mixes L_rl's and the "
                                           "ML part's own averages"})
    rl_normalization: RL_NORMALIZATION = field(
        default="sequence", metadata={"help": "sequence: Paulus eq 15 summed over each summary's steps, averaged over "
                                              "documents (the paper); token: averaged over sampled tokens (only "
                                              "with --rl-mix averages)"})
    rl_max_len_a: float = field(
        default=0.0, metadata={"help": "decode y^s and y^g up to a * source length + b tokens (this is a)"})
    rl_max_len_b: int = field(default=100, metadata={"help": "... and this is b (Paulus et al.: 100)"})
    rl_baseline_block_ngram: int = field(
        default=0, metadata={"help": "decode the greedy baseline y^g with n-gram blocking, as beam search with "
                                     "--block-ngram-repeat N decodes at test time (a baseline that cannot loop "
                                     "to the length limit); 0 (default): plain argmax, as Paulus et al."})
    rl_dropout: bool = field(
        default=False, metadata={"help": "keep dropout on while sampling and scoring y^s (default off: the "
                                         "sampled and the differentiated distribution are the same)"})
    rl_score_in_sampling: bool = field(
        default=False, metadata={"help": "score y^s in the decoder steps that sample it (with gradient) instead of "
                                         "a teacher-forced pass over it: no second pass, no padding to the "
                                         "longest sample, but the output layer's graph step by step (slower "
                                         "with a large vocabulary: docs/design.md)"})
    rl_sentence_rewards: bool = field(
        default=False, metadata={"help": "sentence-level (intermediate) rewards and baselines (Celikyilmaz et "
                                         "al. 2018) instead of one reward per summary"})
    rl_sentence_end: str = field(
        default=". ! ? 。 ！ ？", metadata={"help": "tokens that end a sentence, space-separated (those in the "
                                                 "dictionary are used)"})
    rl_lcs_backend: ChoiceEnum(list(LCS_BACKENDS)) = field(
        default="auto", metadata={"help": "ROUGE-L's LCS: bits (bit-parallel, CPU), torch (batched, any "
                                          "device) or auto"})
    rl_log_samples: int = field(
        default=0, metadata={"help": "every N updates, log the first document's sample, greedy summary and "
                                     "reference as text (0 = never)"})
    rl_oov_file: Optional[str] = field(
        default=None, metadata={"help": "the training split's .oov file, to show copied OOV words in logged "
                                        "samples (default: DATA/../tok/train.oov)"})
    rl_timing: bool = field(
        default=False, metadata={"help": "log seconds per update spent decoding, rewarding and in the forward "
                                         "passes (t_encode, t_decode, t_reward, t_ml, t_rl)"})


class PhaseTimer:
    """Seconds spent in named phases (only when enabled)."""

    def __init__(self, enabled: bool):
        self.enabled = enabled
        self.seconds: Dict[str, float] = {}

    @contextlib.contextmanager
    def __call__(self, name: str):
        start = time.perf_counter() if self.enabled else 0.0
        yield
        if self.enabled:
            self.seconds[name] = self.seconds.get(name, 0.0) + time.perf_counter() - start


class Overridden:
    """A config read through ``getattr`` with some values replaced (what fairseq's ``build_criterion`` reads)."""

    def __init__(self, cfg, **values):
        self._cfg, self._values = cfg, values

    def __getattr__(self, name):
        values = self.__dict__.get("_values", {})
        return values[name] if name in values else getattr(self.__dict__["_cfg"], name)


def shares_encoder(model) -> bool:
    """Is the model's forward ``decoder(prev, encoder_out=encoder(src))``, so one encoder pass can serve the
    decode and both teacher-forced passes?  (fairseq's encoder-decoder models and every model of the project.)"""
    return isinstance(model, FairseqEncoderDecoderModel) and type(model).forward is FairseqEncoderDecoderModel.forward


def forward(model, net_input, prev_output_tokens: Tensor, encoder_out=None):
    """The model's teacher-forced output for ``prev_output_tokens``, from ``encoder_out`` when given."""
    if encoder_out is None:
        return model(**dict(net_input, prev_output_tokens=prev_output_tokens))
    return model.decoder(prev_output_tokens, encoder_out=encoder_out)


def sentence_rewards(tokens: Tensor, lengths: Tensor, prefix: Tensor, is_end: Tensor) -> Tuple[Tensor, Tensor]:
    """Intermediate rewards of each sentence of each summary, and the sentence of every token.

    With ``--rl-sentence-rewards`` (Celikyilmaz et al. 2018's intermediate rewards) a summary is cut into sentences
    after each token of ``--rl-sentence-end``; sentence q of y^s earns r(y^s_1..q) - r(y^s_1..q-1) (prefixes scored
    against the whole reference by the same reward), the baseline of that sentence is the same difference for the
    q-th sentence of y^g (0 when y^g has fewer), and each token of the sentence (the final ``</s>`` belongs to the
    last sentence) is weighed by (baseline - earned) instead of (r(y^g) - r(y^s)).  The sentence rewards of a
    summary add up to its reward, so a one-sentence summary gets exactly Paulus eq 15.  How the baseline is split
    by sentence is our reading (the DCA paper does not give its form).

    Args:
        tokens: B x T decoded tokens (the summary's counted tokens first, then ``</s>``/padding).
        lengths: B, the number of summary tokens (``</s>`` not counted).
        prefix: B x (N+1), the reward of every prefix (RougeReward.prefix_scores), N >= max(lengths).
        is_end: B x T, True at tokens that end a sentence.
    Returns:
        rewards B x Q (r(o_1..q) - r(o_1..q-1) for q < the summary's sentence count, 0 beyond) and the
        sentence index of every position, B x T (positions after the summary belong to its last sentence).
    """
    bsz, width = tokens.shape
    positions = torch.arange(width, device=tokens.device).unsqueeze(0)  # 1 x T
    inside = positions < lengths.unsqueeze(1)  # B x T
    ends = is_end & inside  # B x T
    before = ends.long().cumsum(dim=1) - ends.long()  # B x T: sentence ends strictly before each token
    last_is_end = ends.gather(1, (lengths - 1).clamp(min=0).unsqueeze(1)).squeeze(1) & (lengths > 0)  # B
    count = (ends.sum(dim=1) + (~last_is_end).long()).clamp(min=1)  # B: sentences (an empty summary has one)
    sentence = torch.minimum(before, (count - 1).unsqueeze(1))  # B x T
    width_q = int(count.max())
    boundary = lengths.unsqueeze(1).expand(bsz, width_q).clone()  # B x Q: prefix length at each sentence end
    end_rows, end_cols = ends.nonzero(as_tuple=True)
    boundary[end_rows, sentence[end_rows, end_cols]] = end_cols + 1
    reached = prefix.gather(1, boundary)  # B x Q: r(o_1..q)
    earlier = torch.cat([prefix[:, :1], reached[:, :-1]], dim=1)  # B x Q: r(o_1..q-1) (r of nothing first)
    within = torch.arange(width_q, device=tokens.device).unsqueeze(0) < count.unsqueeze(1)  # B x Q
    return (reached - earlier) * within, sentence


@register_criterion("self_critical_rouge", dataclass=SelfCriticalRougeConfig)
class SelfCriticalRougeCriterion(NonFinitePolicy, FairseqCriterion):
    """gamma L_rl + (1 - gamma) L_ml (Paulus eqs 15-16); see the module docstring.

    The ML part (``ml_criterion_class``, by default ``focal_copy_coverage`` with all its options, so coverage
    keeps working) is a composed criterion built from this criterion's config.  Anything with its
    ``compute_loss(model, sample, net_output) -> (loss, sample_size, term sums)`` and
    ``reduce_terms(logging_outputs)`` can replace it, e.g. ``class SelfCriticalCohesion(SelfCriticalRougeCriterion):
    ml_criterion_class = SemanticCohesionCriterion`` registered with a config that adds its options:
    L = gamma L_rl + (1 - gamma) L_mle-sem, no copy of this code.
    """

    ml_criterion_class = FocalCopyCoverageCriterion  # the ML part (replaceable: see the class docstring)
    nonfinite_name = "self_critical_rouge"
    nonfinite_logger = logger

    def __init__(self, task, cfg: SelfCriticalRougeConfig):
        super().__init__(task)
        if not 0.0 <= cfg.rl_gamma <= 1.0:
            raise ValueError(f"--rl-gamma must be in [0, 1] (Paulus eq 16), not {cfg.rl_gamma}")
        if cfg.rl_max_len_a < 0 or cfg.rl_max_len_b < 0 or (cfg.rl_max_len_a == 0 and cfg.rl_max_len_b < 1):
            raise ValueError(f"--rl-max-len-a {cfg.rl_max_len_a} --rl-max-len-b {cfg.rl_max_len_b}: a summary "
                             f"must be allowed at least one token (both >= 0, and b >= 1 when a is 0)")
        if cfg.rl_baseline_block_ngram < 0:
            raise ValueError(f"--rl-baseline-block-ngram must be >= 0 (0: no blocking), not "
                             f"{cfg.rl_baseline_block_ngram}")
        if cfg.rl_log_samples < 0:
            raise ValueError(f"--rl-log-samples must be >= 0, not {cfg.rl_log_samples}")
        if cfg.rl_mix == "paper" and cfg.rl_normalization != "sequence":
            raise ValueError("--rl-normalization token averages L_rl over sampled tokens, which only --rl-mix "
                             "averages does; --rl-mix paper sums both terms over each summary")
        self.cfg = cfg
        self.paper_mix = cfg.rl_mix == "paper"
        self.ml = self.build_ml_criterion(cfg, task)
        self.init_nonfinite(task, cfg.on_nonfinite)
        dictionary = task.target_dictionary
        self.dictionary = dictionary
        self.pad, self.eos = dictionary.pad(), dictionary.eos()
        self.gamma = cfg.rl_gamma
        self.per_sequence = cfg.rl_normalization == "sequence"
        self.reward = RougeReward(parse_reward(cfg.rl_reward), self.pad, self.eos, dictionary.unk(),
                                  lcs_backend=cfg.rl_lcs_backend)
        self.sentence_end = self.sentence_end_ids(cfg, dictionary) if cfg.rl_sentence_rewards else None
        self.blocker = (NGramBlocker(cfg.rl_baseline_block_ngram, ignore_ids(dictionary, None))
                        if cfg.rl_baseline_block_ngram else None)
        self.oov_file = cfg.rl_oov_file or self.default_oov_file(task)
        self._oov_words: Optional[List[List[str]]] = None
        self.calls = 0  # training forward calls in this process (for --rl-log-samples without an update number)

    @classmethod
    def build_ml_criterion(cls, cfg, task) -> FairseqCriterion:
        """The ML part, built from this criterion's config (which has all of its options); with ``--rl-mix
        paper`` its loss is the sum over the batch's target tokens (``--loss-average token``)."""
        if cfg.rl_mix == "paper":
            cfg = Overridden(cfg, loss_average="token")
        return cls.ml_criterion_class.build_criterion(cfg, task)

    @staticmethod
    def sentence_end_ids(cfg, dictionary) -> Tensor:
        words = cfg.rl_sentence_end.split()
        ids = [dictionary.index(w) for w in words if dictionary.index(w) != dictionary.unk()]
        if not ids:
            raise ValueError(f"--rl-sentence-end {cfg.rl_sentence_end!r}: none of these tokens is in the target "
                             f"dictionary, so no summary could have more than one sentence")
        return torch.tensor(ids)

    @staticmethod
    def default_oov_file(task) -> Optional[str]:
        data = getattr(getattr(task, "cfg", None), "data", None)
        if not data:
            return None
        return os.path.join(os.path.dirname(os.path.abspath(data.split(os.pathsep)[0])), "tok", "train.oov")

    # ------------------------------------------------------------------ the objective
    def forward(self, model, sample, reduce=True):
        """(loss, sample size, logging output) of one batch, the same code for every architecture:

        0. the encoder runs once, with gradient (``encode``); the steps that read the source share its output;
        1. y^s and y^g are decoded together, 2B rows, without gradient, through fairseq's incremental decoding
           (generation/sampling.py) from that encoder output; up to ``--rl-max-len-a`` * source length +
           ``--rl-max-len-b`` tokens (``decode``);
        2. both are rewarded in one batched call (``reward_factors``);
        3. the ML part runs its own teacher-forced decoder pass on the reference (``ml_loss``);
        4. y^s is scored with one ordinary teacher-forced decoder pass (prev_output_tokens built from y^s), which
           gives p(y^s_t | y^s_<t, x) with gradient (``score_sample``): the probability it was sampled with,
           since incremental decoding equals the full forward pass and both read the same encoder output.  A
           subclass may add a per-summary term of y^s from that same pass to L_rl (``sample_penalty``;
           self_critical_cohesion's L_SEM).
        The gradients of steps 3 and 4 meet in the one encoder pass.  A model whose forward is not
        ``decoder(encoder(...))`` (``shares_encoder``) runs its own full passes in steps 1, 3 and 4 instead.
        ``--rl-score-in-sampling`` replaces steps 1 and 4: y^s is sampled with gradient, so the steps that draw
        y^s_t keep their graph and give log p(y^s_t) and the decoder states; y^g is then decoded on its own
        without gradient.

        Dropout: by default (``--rl-dropout`` off) the encoder pass and steps 1 and 4 run with dropout off, so
        the distribution sampled from and the one differentiated are the same network; the ML part's decoder
        pass keeps the model's dropout (its shared encoder has none).  Dropout is switched off module by module
        (``modules/training_switches.py``), never with ``model.eval()``, so every module with parameters stays
        in training mode (cuDNN's recurrent backward requires it).  A model that feeds back its own predictions
        in training (``--own-prediction-prob``) does so in the ML part only.

        The mix of Paulus eq 16 (``--rl-mix``):
          ``paper`` (default): Paulus eqs 14-16 as written.  L_ml = -sum_t log p(y*_t | ...) and L_rl are both
              sums over the summary's tokens; L = gamma L_rl + (1 - gamma) L_ml is formed per document and
              averaged over the batch's documents (sample_size = documents).  The ML part contributes its
              per-token terms summed over the summary (focal and coverage terms, and lambda L_SEM for
              self_critical_cohesion), whatever its ``--loss-average``; ``--rl-normalization`` must be
              ``sequence``.
          ``averages``: each part is first brought to an average: L_rl per document (``--rl-normalization
              sequence``) or per sampled token (``token``), the ML part as its ``--loss-average`` says (by
              default its mean over the summary's steps); gamma then mixes the averages.  With the ML mean over
              T tokens a document's loss is g_a L_rl + (1 - g_a) L_ml / T: the paper's form up to a constant,
              with g_p = g_a T / (g_a T + 1 - g_a), and conversely g_a = g_p / (g_p + T (1 - g_p)).
        """
        timer = PhaseTimer(self.cfg.rl_timing)
        target = sample["target"]  # B x R
        with timer("encode"):
            encoder_out = self.encode(model, sample)  # with gradient, shared by the three passes below
        with timer("decode"):
            sampled, greedy = self.decode(model, sample, encoder_out)
        with timer("reward"):
            factor, reward_s, reward_g = self.reward_factors(sampled, greedy, target)  # B x T, B, B
        with timer("ml"):
            ml_loss, sample_size, ml_terms = self.ml_loss(model, sample, encoder_out)
        with timer("rl"):
            log_p, net_output = self.score_sample(model, sample, sampled, encoder_out)  # B x T, 0 after the end
            rl_sum = (factor.to(log_p.dtype) * log_p).sum()  # Paulus eq 15, summed over the batch
            penalty, penalty_terms = self.sample_penalty(model, net_output, sampled)
            rl_sum = rl_sum + penalty  # a subclass's per-summary term of y^s (0 here)
            ml_terms.update(penalty_terms)
        rl_norm = target.size(0) if self.per_sequence else int(sampled.lengths.sum())
        if self.paper_mix:  # per document: gamma L_rl + (1 - gamma) L_ml, both sums over the summary
            sample_size = target.size(0)
            loss = self.gamma * rl_sum + (1.0 - self.gamma) * ml_loss  # Paulus eq 16
        else:  # averages of like kind, at the ML part's sample size
            loss = self.gamma * rl_sum * (sample_size / rl_norm) + (1.0 - self.gamma) * ml_loss  # Paulus eq 16

        logging_output = self.make_logging_output(
            loss, ml_loss, rl_sum, rl_norm, sample, sample_size, ml_terms, sampled, greedy, reward_s, reward_g,
            timer.seconds)
        bad_decode = int(sampled.nonfinite.sum() + greedy.nonfinite.sum())
        if not torch.isfinite(loss) or bad_decode:
            terms = {"rl_loss": rl_sum, "ml_loss": ml_loss, **ml_terms, "reward_sample": reward_s.sum(),
                     "nonfinite_decode_rows": bad_decode}
            return self.handle_nonfinite(model, sample, loss if bad_decode == 0 else loss * float("nan"), terms,
                                         logging_output)
        if model.training:
            self.calls += 1
            self.maybe_log_sample(sample, sampled, greedy, reward_s, reward_g)
        return loss, sample_size, logging_output

    def encode(self, model, sample):
        """The batch's encoder output, with gradient, computed once per update (dropout off unless
        --rl-dropout); None for a model whose forward is not ``decoder(encoder(...))``, which then runs its
        own passes."""
        if not shares_encoder(model):
            return None
        with dropout_off(model.encoder, not self.cfg.rl_dropout):
            return model.encoder(**encoder_input(sample["net_input"]))

    def decode(self, model, sample, encoder_out=None) -> Tuple[FreeRun, FreeRun]:
        """y^s and y^g of every document (dropout off unless --rl-dropout), from ``encoder_out`` when given, else
        from an encoder pass here; without gradient, except that with --rl-score-in-sampling and the update's
        shared ``encoder_out`` y^s is sampled with gradient and carries log p(y^s_t) and its decoder states
        (``FreeRun.scored``).

        y^s is sampled from the model's own final distribution, token by token (for a pointer model over the
        extended vocabulary, a sampled marker fed back as the model feeds markers); padding and ``<s>`` are never
        sampled (their probability is set to 0 and the rest renormalised); a row that reaches the length limit
        ends without ``</s>``.  y^g is the argmax summary, or with ``--rl-baseline-block-ngram N`` the argmax under
        n-gram blocking, as beam search decodes at test time with ``--block-ngram-repeat N`` (Rennie et al.'s
        baseline is the test-time decoding).  The samples are never blocked."""
        with dropout_off(model, not self.cfg.rl_dropout):
            return sample_and_greedy(model, sample["net_input"], self.max_lengths(model, sample),
                                     encoder_out=encoder_out, blocker=self.blocker,
                                     score=encoder_out is not None and self.cfg.rl_score_in_sampling)

    def max_lengths(self, model, sample) -> Tensor:
        """B: a * source length + b tokens per document, at least 1, at most the decoder's positions."""
        src_lengths = sample["net_input"]["src_lengths"]
        limit = (self.cfg.rl_max_len_a * src_lengths.double() + self.cfg.rl_max_len_b).floor().long()
        max_positions = model.max_decoder_positions() if hasattr(model, "max_decoder_positions") else None
        if max_positions:
            limit = limit.clamp(max=max_positions - 1)
        return limit.clamp(min=1)

    def rewards(self, hyps: Tensor, target: Tensor) -> Tuple[Tensor, Tensor]:
        """Prefix rewards (B' x (N+1)) and counted lengths (B') of hypotheses against their references."""
        return self.reward.prefix_scores(hyps, target)

    def reward_factors(self, sampled: FreeRun, greedy: FreeRun, target: Tensor) -> Tuple[Tensor, Tensor, Tensor]:
        """The factor of each sampled token's log p in Paulus eq 15 (B x T: r(y^g) - r(y^s), minus the usual
        advantage, or its per-sentence form with --rl-sentence-rewards) and the rewards r(y^s), r(y^g) (B each,
        float64).  No gradient."""
        bsz = target.size(0)
        width = max(sampled.tokens.size(1), greedy.tokens.size(1))
        both = torch.cat([self.padded(sampled.tokens, width), self.padded(greedy.tokens, width)])  # 2B x T
        prefix, lengths = self.rewards(both, target.repeat(2, 1))  # 2B x (N+1), 2B
        reward = prefix.gather(1, lengths.unsqueeze(1)).squeeze(1)  # 2B
        reward_s, reward_g = reward[:bsz], reward[bsz:]
        if self.sentence_end is None:
            factor = (reward_g - reward_s).unsqueeze(1).expand(bsz, sampled.tokens.size(1))  # Paulus eq 15's factor
            return factor, reward_s, reward_g
        is_end = torch.isin(both, self.sentence_end.to(both.device))  # 2B x T
        per_sentence, sentence = sentence_rewards(both, lengths, prefix, is_end)  # 2B x Q, 2B x T
        earned, baseline = per_sentence[:bsz], per_sentence[bsz:]  # B x Q each; 0 beyond a summary's sentences
        index = sentence[:bsz, :sampled.tokens.size(1)]  # B x T
        factor = (baseline - earned).gather(1, index)  # B x T: per-sentence factor of Paulus eq 15
        return factor, reward_s, reward_g

    def padded(self, tokens: Tensor, width: int) -> Tensor:
        return torch.cat([tokens, tokens.new_full((tokens.size(0), width - tokens.size(1)), self.pad)], dim=1)

    def ml_loss(self, model, sample, encoder_out=None):
        """The ML part on the reference: (loss summed over the batch, sample size, term sums)."""
        prev = sample["net_input"]["prev_output_tokens"]
        return self.ml.compute_loss(model, sample, forward(model, sample["net_input"], prev, encoder_out))

    def sample_log_probs(self, model, sample, sampled: FreeRun, encoder_out=None) -> Tensor:
        """log p(y^s_t | y^s_<t, x) with gradient, from one teacher-forced pass over y^s: B x T, 0 after each
        sample's last decoded token (its </s> included)."""
        return self.score_sample(model, sample, sampled, encoder_out)[0]

    def score_sample(self, model, sample, sampled: FreeRun, encoder_out=None):
        """``sample_log_probs`` and the net_output over y^s it comes from: for a ``scored`` sample, its own
        log-probabilities and ``(None, {"decoder_states": B x T x H})`` from the sampling steps; otherwise one
        teacher-forced pass."""
        tokens = sampled.tokens  # B x T
        decoded = torch.arange(tokens.size(1), device=tokens.device).unsqueeze(0) < sampled.lengths.unsqueeze(1)
        if sampled.scored:
            return sampled.log_probs * decoded, (None, {"decoder_states": sampled.states})
        prev = teacher_forcing_input(tokens, self.pad, self.eos)  # B x T
        with dropout_off(model, not self.cfg.rl_dropout), own_predictions_off(model):
            net_output = forward(model, sample["net_input"], prev, encoder_out)
            log_p = target_log_probs(model, net_output, tokens)  # B x T
        return log_p * decoded, net_output

    def sample_penalty(self, model, net_output, sampled: FreeRun) -> Tuple[Tensor, Dict[str, Tensor]]:
        """A term of the sampled summaries added to L_rl's batch sum (per-summary sums, normalised with it), and
        its logged sums: none here (0, {}); self_critical_cohesion adds lambda L_SEM(y^s).  ``net_output`` is
        y^s's decoder output from ``score_sample``: ``(None, {"decoder_states": B x T x H})`` from the sampling
        steps, or the teacher-forced pass's."""
        return sampled.tokens.new_zeros((), dtype=torch.float32), {}

    # ------------------------------------------------------------------ logging
    def make_logging_output(self, loss, ml_loss, rl_sum, rl_norm, sample, sample_size, ml_terms, sampled, greedy,
                            reward_s, reward_g, seconds) -> dict:
        """Always the same keys in the same order (workers all-reduce them as one flat buffer)."""
        logging_output = {
            "loss": loss.data, "ntokens": sample["ntokens"], "nsentences": sample["target"].size(0),
            "sample_size": sample_size, "ml_loss": ml_loss.data, "rl_loss": rl_sum.data, "rl_norm": rl_norm,
            "rl_docs": sample["target"].size(0),
            "reward_sample": float(reward_s.sum()), "reward_greedy": float(reward_g.sum()),
            "beat_baseline": int((reward_s > reward_g).sum()),
            "sample_len": int(sampled.summary_lengths(self.eos).sum()),
            "greedy_len": int(greedy.summary_lengths(self.eos).sum()),
        }
        logging_output.update({name: value.data for name, value in ml_terms.items()})
        if self.cfg.rl_timing:
            for phase in ("encode", "decode", "reward", "ml", "rl"):
                logging_output[f"t_{phase}"] = float(seconds.get(phase, 0.0))
        if self.logging_skips:
            logging_output["nonfinite_skipped"] = 0
        return logging_output

    @classmethod
    def reduce_metrics(cls, logging_outputs) -> None:
        """Logged per update: loss = gamma rl_loss + (1 - gamma) ml_loss (all three in base 2, like fairseq's
        loss; per document with ``--rl-mix paper``, as averaged with ``averages``; the per-token nll_loss is logged
        either way), reward_sample and reward_greedy (mean F1 of y^s and y^g), beat_baseline (share of documents
        with r(y^s) > r(y^g)), sample_len and greedy_len (mean summary tokens, ``</s>`` not counted), the ML part's
        terms (nll_loss, ppl, focal, coverage, p_gen), and with ``--rl-timing`` the seconds each update spends in
        the encoder (t_encode), decoding (t_decode), rewarding (t_reward), the ML decoder pass (t_ml) and the
        teacher-forced pass over y^s (t_rl; 0 with --rl-score-in-sampling).  In validation the same is computed
        without gradient: keep the best checkpoint by ``--best-checkpoint-metric reward_greedy
        --maximize-best-checkpoint-metric``.  Non-finite losses follow ``--on-nonfinite`` as in
        focal_copy_coverage (criterions/nonfinite.py); a decode that met a non-finite distribution counts as a
        non-finite loss."""
        total = lambda key: sum(log.get(key, 0) for log in logging_outputs)  # noqa: E731
        sample_size, docs = total("sample_size"), total("rl_docs")
        ln2 = math.log(2)
        metrics.log_scalar("loss", total("loss") / max(sample_size, 1) / ln2, sample_size, round=3)
        metrics.log_scalar("rl_loss", total("rl_loss") / max(total("rl_norm"), 1) / ln2, docs, round=4)
        metrics.log_scalar("ml_loss", total("ml_loss") / max(sample_size, 1) / ln2, sample_size, round=3)
        for key in ("reward_sample", "reward_greedy", "beat_baseline", "sample_len", "greedy_len"):
            metrics.log_scalar(key, total(key) / max(docs, 1), docs, round=4 if "len" not in key else 2)
        cls.ml_criterion_class.reduce_terms(logging_outputs)
        for key in ("t_encode", "t_decode", "t_reward", "t_ml", "t_rl"):
            if any(key in log for log in logging_outputs):
                metrics.log_scalar(key, total(key), 1, round=4)
        cls.reduce_nonfinite(logging_outputs)

    @staticmethod
    def logging_outputs_can_be_summed() -> bool:
        return True

    def maybe_log_sample(self, sample, sampled: FreeRun, greedy: FreeRun, reward_s: Tensor, reward_g: Tensor):
        """``--rl-log-samples N``: every N updates, the first document's y^s, y^g and reference as text, a copied
        OOV marker shown with the source word it stands for (``<oov-0=word>``, from DATA/tok/train.oov or
        ``--rl-oov-file``)."""
        every = self.cfg.rl_log_samples
        step = self.current_update if self.current_update is not None else self.calls
        if every <= 0 or step % every != 0:
            return
        logger.info("%s", self.sample_text(sample, sampled, greedy, reward_s, reward_g, document=0))

    def sample_text(self, sample, sampled: FreeRun, greedy: FreeRun, reward_s: Tensor, reward_g: Tensor,
                    document: int = 0) -> str:
        """Document ``document`` of the batch: its sample, greedy summary and reference, as text."""
        doc_id = int(sample["id"][document])
        oov = self.oov_words(doc_id)
        where = f"update {self.current_update}" if self.current_update is not None else f"call {self.calls}"
        lines = [f"self_critical_rouge sample at {where}, dataset id {doc_id}: reward {reward_s[document]:.4f} "
                 f"(sample) vs {reward_g[document]:.4f} (greedy)"
                 + ("" if oov is not None else f"; OOV words unknown ({self.oov_file or 'no .oov file'} "
                                               f"not found): markers shown as ids")]
        for name, tokens in (("sample", sampled.tokens[document]), ("greedy", greedy.tokens[document]),
                             ("reference", sample["target"][document])):
            lines.append(f"  {name:>9}: {self.render(tokens.tolist(), oov)}")
        return "\n".join(lines)

    def render(self, ids: List[int], oov_words: Optional[List[str]]) -> str:
        """Token ids as text: ``</s>`` and padding dropped; a copied OOV marker shown with the source word it
        stands for (``<oov-K=word>``) when the document's OOV words are known."""
        words = []
        for token in ids:
            if token in (self.pad, self.eos):
                continue
            word = self.dictionary[token]
            k = marker_index(word)
            if k is not None and oov_words is not None:
                word = f"<oov-{k}={oov_words[k] if k < len(oov_words) else '?'}>"
            words.append(word)
        return " ".join(words)

    def oov_words(self, doc_id: int) -> Optional[List[str]]:
        """The OOV words of training document ``doc_id`` (line ``doc_id`` of the .oov file), None if unknown."""
        if self._oov_words is None:
            if not self.oov_file or not os.path.isfile(self.oov_file):
                return None
            with open(self.oov_file, encoding="utf-8") as f:
                self._oov_words = [line.rstrip("\n").split("\t") if line.strip("\n") else [] for line in f]
        return self._oov_words[doc_id] if doc_id < len(self._oov_words) else None
