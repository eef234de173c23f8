"""Building blocks shared by the architectures, one concept per module, each with its paper's equations."""
