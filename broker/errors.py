"""The project's root error and its one ConfigError.

`HighwaterError` is every error a command reports as one line and an exit code: each subclass says which
exit code it means (`exit_code`; rundir/exits.py names the codes and maps errors to them). It is defined
here, in the lowest layer, so that the broker's own errors and the harness's share one root.

`ConfigError` is a bad setting anywhere: broker.json, controller.json, a test file, a flag. Its message is
one line naming where (file:line, or the flag) and the key.
"""
from __future__ import annotations


class HighwaterError(Exception):
    """An error a command reports as one line and an exit code (`exit_code`; 254, rundir/exits.EXIT_USAGE,
    by default: the input was wrong). Subclasses that mean something else set their own."""

    exit_code = 254


class ConfigError(HighwaterError, ValueError):
    """A bad setting. The message is one line naming where (file:line or flag) and the key."""


class StateError(ValueError):
    """A state machine (the controller's, a partition replica's) cannot take what it was given: an action
    its state does not allow, or a stored state of the wrong shape. The message says what."""
