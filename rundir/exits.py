"""Exit codes and the root error, defined once for every command.

Exit codes follow Jepsen: 0 valid, 1 anomalies found, 2 unknown (something could not be checked or the
run was interrupted), 254 bad arguments or configuration, 255 internal error. Where several runs make
one exit code (`run --test-count`, suites), the worst wins: 255 > 254 > 1 > 2 > 0 (`worst`).

`HighwaterError` is the root of the errors a command reports as one line: each subclass says which exit
code it means, so every command maps errors to exit codes the same way (`exit_code_of`).
"""
from __future__ import annotations

EXIT_VALID = 0
EXIT_INVALID = 1
EXIT_UNKNOWN = 2
EXIT_USAGE = 254
EXIT_INTERNAL = 255

# exit code -> rank, for combining several into one; a code not listed (a signal's, say) ranks with
# internal errors
SEVERITY = {EXIT_VALID: 0, EXIT_UNKNOWN: 1, EXIT_INVALID: 2, EXIT_USAGE: 3, EXIT_INTERNAL: 4}


# the root error lives in the lowest layer (broker/errors.py) so the broker's errors share it
from broker.errors import HighwaterError  # noqa: E402  (exit_code is EXIT_USAGE)


def exit_code_of(exc: BaseException) -> int:
    """The exit code an error means: its own for a HighwaterError, EXIT_INTERNAL for anything else."""
    return exc.exit_code if isinstance(exc, HighwaterError) else EXIT_INTERNAL


def worst(codes) -> int:
    """The one exit code for several: internal error > bad configuration/setup > invalid > unknown >
    valid. No codes at all is unknown: nothing was checked."""
    codes = list(codes)
    if not codes:
        return EXIT_UNKNOWN
    return max(codes, key=lambda c: (SEVERITY.get(c, SEVERITY[EXIT_INTERNAL]), c))
