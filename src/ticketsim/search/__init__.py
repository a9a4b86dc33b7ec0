"""Searching the knowledge base: the metric folded into one exact L1 index, top-k with BM25, reasons, the end-user figure."""
