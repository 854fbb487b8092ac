"""Cluster backends (local processes, Docker containers, SSH hosts) behind one interface (base.py)."""
