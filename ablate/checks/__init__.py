"""The check kinds a task's ``[[checks]]`` tables may use: one module per kind, listed in :mod:`.registry`."""
