"""The execution gateway: token verification, policy re-check, validation, audit."""
