from fairseq_plugins.criterions import focal_copy_coverage  # noqa: F401
