from fairseq_plugins.optim import adagrad_acc  # noqa: F401
