"""Building cell environments and running sessions in them without reaching the user's files."""
