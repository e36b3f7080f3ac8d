"""Grading a run's outcomes: execution checks, the judge, dev/holdout splits, the runner's grading hook."""
