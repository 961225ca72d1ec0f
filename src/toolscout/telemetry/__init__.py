"""Telemetry: the discovery log, false-negative signals and learned aliases."""
