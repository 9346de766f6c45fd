"""`skillbank compare`: two evaluations of the same items, with paired statistics per family."""
