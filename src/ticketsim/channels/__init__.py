"""Representation channels: per-component vectors of every ticket and query (E = SumEMB, T = DocNADE, ...)."""
