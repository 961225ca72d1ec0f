"""``python -m toolscout`` runs the command line."""

from toolscout.cli import main

main()
