"""Decoding: the beam-search generator with n-gram blocking and a coverage penalty, and free-running decoding
(sampling, greedy) for self-critical training."""
