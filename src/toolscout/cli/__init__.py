"""The command line: a thin layer over :class:`toolscout.Toolscout`."""
