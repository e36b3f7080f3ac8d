"""Planning and executing a run: the one execution path, the scheduler, merge and recover."""
