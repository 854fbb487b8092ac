"""The verdict: the PySpark checker and a single-process reference checker for tests and benchmarks."""
