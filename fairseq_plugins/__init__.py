"""fairseq ``--user-dir`` package: summarization models, criterions, generator and scorers.

Importing the package registers everything with fairseq:
    fairseq-train DATA --user-dir fairseq_plugins --arch pgn_lstm --criterion focal_copy_coverage ...
and allow-lists the classes a fairseq checkpoint holds, so checkpoints load with torch's safe
(``weights_only``) loading left on.
"""
from fairseq_plugins import checkpoint_safety

checkpoint_safety.allow_fairseq_checkpoints()

from fairseq_plugins import criterions, models, tasks  # noqa: E402,F401  (registration)
