"""Neutral helpers every stage uses: errors and exit codes, specs, files, processes, git, slugs, pricing."""
