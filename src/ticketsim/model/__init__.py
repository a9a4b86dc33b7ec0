"""Models: the similarity metric shared by every row of the paper's Table 5, and the networks that feed it."""
