"""The test runner: lifecycle, history, run store, scenarios, suites and the `highwater` CLI."""
