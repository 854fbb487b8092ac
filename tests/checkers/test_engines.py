"""The checker's engine protocol (checkers/engines.py): both engines have its members, and a name that is
no engine is refused naming the known ones. The engines' findings are compared elsewhere
(test_properties.py, test_honest_input.py); here, the protocol itself."""
from __future__ import annotations

import inspect

import pytest

from checkers.engines import ENGINES, Engine, ReferenceEngine, SparkEngine, open_engine


def test_the_reference_engine_is_an_engine_and_its_info_names_it():
    engine = open_engine("reference")
    assert isinstance(engine, Engine) and isinstance(engine, ReferenceEngine)
    assert engine.info == {"engine": "reference", "master": None}
    engine.close()


def test_the_spark_engine_has_the_protocols_methods_with_its_signatures():
    for name in ("analyze", "close"):
        assert inspect.signature(getattr(SparkEngine, name)) == inspect.signature(getattr(ReferenceEngine, name))
    assert SparkEngine.name == "spark" and ReferenceEngine.name == "reference"
    assert set(ENGINES) == {SparkEngine.name, ReferenceEngine.name}


def test_an_unknown_engine_is_refused_naming_the_known_ones():
    with pytest.raises(ValueError, match=r"unknown engine 'pandas' \(known: spark, reference\)"):
        open_engine("pandas")
