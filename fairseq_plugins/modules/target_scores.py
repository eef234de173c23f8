"""log P(target) of a teacher-forced output, for any model: what the ML losses (criterions/) and the
attention statistics (viz/attention_stats.py) score."""
import torch

PROB_EPS = 1e-12  # P(w_t) is floored here before the log: P is exactly 0 for an uncopyable marker


def target_log_probs(model, net_output, target):
    """log P(target) per position, B x T, with gradient: the model's exact ``get_target_log_probs`` (the
    project's models compute See eq 9 in log space, so a word of probability 1e-20 still gets a gradient), else
    the log of ``get_target_probs`` floored at PROB_EPS, else fairseq's ``get_normalized_probs``."""
    if hasattr(model, "get_target_log_probs"):
        return model.get_target_log_probs(net_output, target).float()
    if hasattr(model, "get_target_probs"):
        return torch.log(model.get_target_probs(net_output, target).float().clamp(min=PROB_EPS))
    log_probs = model.get_normalized_probs(net_output, log_probs=True)  # B x T x V
    return log_probs.gather(2, target.unsqueeze(2)).squeeze(2).float()
