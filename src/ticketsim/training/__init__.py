"""Training: the one trainer, the one way to prepare and train a Siamese variant, the pipeline's rows, the
comparators, the self-supervised pairs, and model selection by cross-validation over queries."""
