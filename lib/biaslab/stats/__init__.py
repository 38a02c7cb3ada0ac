"""Statistics: pure functions over pandas/numpy, each citing the paper and equation it implements."""
