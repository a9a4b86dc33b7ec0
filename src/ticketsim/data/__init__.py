"""Data intake: every source becomes the same three validated tables (see tables.py)."""
