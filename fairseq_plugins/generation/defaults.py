"""The generation settings a decoding falls back on, stated once.

``FAIRSEQ_GENERATION``   fairseq-generate's and fairseq-interactive's own defaults for what a config's GEN_ARGS
                         leave out, with generate.sh's ``--batch-size 32``: the base of every hub decoding.
``DEFAULT_GENERATION``   configs/scitldr_small.conf's GEN_ARGS (the default config): how the hub and generate.sh
                         decode a model directory that records no config (tests/test_run_config.py holds the
                         two equal).
``VALIDATION_GENERATION`` greedy decoding of ``--eval-rouge`` / ``--eval-accuracy`` unless ``--eval-gen-args``
                         says otherwise.
The summarization task's own search options (``--block-ngram-repeat``, ``--coverage-penalty``...) default to
off in its config (tasks/summarization.py).
"""
DEFAULT_BATCH_SIZE = 32
FAIRSEQ_GENERATION = {"beam": 5, "max_len_a": 0, "max_len_b": 200, "min_len": 1, "lenpen": 1.0,
                      "batch_size": DEFAULT_BATCH_SIZE}
DEFAULT_GENERATION = dict(FAIRSEQ_GENERATION, max_len_b=60, min_len=5, block_ngram_repeat=3, block_immediate_repeat=1)
VALIDATION_GENERATION = {"beam": 1, "max_len_a": 0, "max_len_b": 100}
