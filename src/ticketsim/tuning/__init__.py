"""Tuning: the Optuna study of the final variant's W, V and hidden size: its trials (tuner), its shared storage
(study), its output file (output)."""
