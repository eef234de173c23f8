from fairseq_plugins.models import pgn_lstm  # noqa: F401
