from fairseq_plugins.optim import adagrad_acc, foreach_adam  # noqa: F401
