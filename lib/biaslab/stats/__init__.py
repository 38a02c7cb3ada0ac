"""Statistics: pure functions over pandas/numpy (no torch), each citing the paper and equation it implements."""
