"""Evaluation: recall@k, nDCG, MRR, latency and tokens saved over any tools/queries set."""
