"""The fused score g shared by training, evaluation, tuning, the index and the search (fused.py), its weights W and V
(weights.py), and its exact top k over an index's flat ticket vectors (topk.py)."""
