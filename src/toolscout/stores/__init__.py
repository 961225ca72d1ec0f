"""Storage: the store protocols (``stores.base``) and their implementations.

Core code imports only :mod:`toolscout.stores.base`. A concrete backend
(``stores.memory``, ``stores.sqlite``, ``stores.postgres``) is chosen in one
place, :func:`toolscout.stores.open_store`, and imported lazily there.
"""
