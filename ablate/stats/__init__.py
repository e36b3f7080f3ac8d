"""Statistics of a report: small, typed, pure functions on scipy, each imported from its own module (nothing
here: ``ablate.stats.screening`` loads without scipy.stats). None returns a magic number: a value or a reason."""
