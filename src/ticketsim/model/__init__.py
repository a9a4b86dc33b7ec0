"""Models: the networks that feed the fused score (scoring/fused.py) shared by every row of the paper's Table 5."""
