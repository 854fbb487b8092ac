"""Static HTML reports for runs, the results index and a small results server."""
