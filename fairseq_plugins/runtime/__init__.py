"""What the shell scripts and training runs rely on: config records, the training log, time budgets, checkpoints."""
