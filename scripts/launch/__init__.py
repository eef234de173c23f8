"""The training launchers' per-process Python (torchrun_train.sh, scripts/slurm/): fairseq_worker, checkpoint_guard."""
