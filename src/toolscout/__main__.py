"""``python -m toolscout`` runs the command line."""

from toolscout.cli.app import main

main()
