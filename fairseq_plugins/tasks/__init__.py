from fairseq_plugins.tasks import summarization  # noqa: F401
