"""Text side of the pipeline: raw-format readers, tokenization, OOV markers, restoration after generation."""
