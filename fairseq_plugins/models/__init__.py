from fairseq_plugins.models import pgn_lstm  # noqa: F401
from fairseq_plugins.models import global_gate_gru  # noqa: F401
from fairseq_plugins.models import dca_lstm  # noqa: F401
