"""rundir/exits.py: the exit codes, how several combine, and the root error every command maps the same
way."""
from __future__ import annotations

import pytest

from rundir.exits import (EXIT_INTERNAL, EXIT_INVALID, EXIT_UNKNOWN, EXIT_USAGE, EXIT_VALID, HighwaterError,
                          exit_code_of, worst)


@pytest.mark.parametrize("codes, expected", [
    ([], EXIT_UNKNOWN), ([EXIT_VALID, EXIT_VALID], EXIT_VALID), ([EXIT_VALID, EXIT_UNKNOWN], EXIT_UNKNOWN),
    ([EXIT_UNKNOWN, EXIT_INVALID], EXIT_INVALID), ([EXIT_INVALID, EXIT_USAGE], EXIT_USAGE),
    ([EXIT_USAGE, EXIT_INTERNAL, EXIT_VALID], EXIT_INTERNAL), ([EXIT_VALID, 130], 130),
])
def test_worst(codes, expected):
    assert worst(codes) == expected


def test_exit_code_of_a_highwater_error_is_its_own_and_anything_else_is_internal():
    class Interrupted(HighwaterError):
        exit_code = EXIT_UNKNOWN
    assert exit_code_of(HighwaterError("bad key")) == EXIT_USAGE
    assert exit_code_of(Interrupted("stopped")) == EXIT_UNKNOWN
    assert exit_code_of(KeyError("bug")) == EXIT_INTERNAL


def test_every_error_a_command_reports_as_one_line_has_the_one_root():
    from broker.errors import ConfigError
    from checkers.jvm_archive import SparkSetupError
    from clusters.base import ClusterError
    from rundir.formats import FormatError
    from rundir.settings import SettingError
    errors = [SparkSetupError, ConfigError, ClusterError, ConfigError, FormatError, SettingError]
    assert [e.__name__ for e in errors if not issubclass(e, HighwaterError)] == []
    assert {e.exit_code for e in errors} == {EXIT_USAGE}
    assert exit_code_of(FormatError("history.jsonl", 3, "not JSON")) == EXIT_USAGE
    assert issubclass(ConfigError, ValueError) and issubclass(ClusterError, RuntimeError)   # old catchers still work
