"""Turning session transcripts and the CLI's stdout into metrics, and reading the user's own history."""
