"""The HTTP API: ``create_app(service)`` builds the FastAPI app over a ``Toolscout``.

Needs the ``server`` extra (FastAPI, uvicorn, prometheus_client).
"""
