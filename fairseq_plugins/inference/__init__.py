"""Summaries from Python (hub), model packages and int8 decoders."""
