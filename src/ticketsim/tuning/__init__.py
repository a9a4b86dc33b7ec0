"""The Optuna search of the final variant's W, V and hidden size: the search, its shared study, its output file."""
