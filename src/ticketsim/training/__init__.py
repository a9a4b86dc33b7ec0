"""Training: the one trainer, the one way to assemble a Siamese variant's training inputs and train it, the pipeline's
rows, the comparators, the self-supervised pairs, and model selection by cross-validation over queries."""
