"""Print the OpenAPI document: ``python -m toolscout.http.openapi > docs/openapi.json``."""

from __future__ import annotations

import json
import sys
from typing import Any


def document() -> dict[str, Any]:
    """The OpenAPI document (built from the routes; no service is opened)."""
    from toolscout.http.app import create_app

    doc: dict[str, Any] = create_app(None).openapi()
    return doc


def main() -> None:
    sys.stdout.write(json.dumps(document(), indent=2, sort_keys=True) + "\n")


if __name__ == "__main__":
    main()
