from fairseq_plugins.criterions import focal_copy_coverage  # noqa: F401
from fairseq_plugins.criterions import self_critical_rouge  # noqa: F401
from fairseq_plugins.criterions import semantic_cohesion  # noqa: F401  (also self_critical_cohesion)
