"""The wire protocol: framing (framing.py), API keys and message shapes (apis.py), error codes."""
