"""Searching the knowledge base: the flat ticket vectors in one exact L1 index, top-k with BM25, reasons, the end-user figure."""
