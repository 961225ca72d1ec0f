"""Discovery: the pipeline entitle → retrieve → select → inject, as plain functions.

Nothing here imports a concrete store, embedder or surface: backends are passed in.
"""
