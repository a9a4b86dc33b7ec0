"""One evaluation module for every model: similarity and ranking measures, and the rerank and retrieve protocols."""
