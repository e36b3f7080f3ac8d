"""``python -m ablate`` runs the ablate command."""

from ablate.cli.main import main

main()
