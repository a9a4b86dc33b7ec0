"""A bundle: the folder a search loads (manifest, the scorer over its files). A search never enters training/."""
