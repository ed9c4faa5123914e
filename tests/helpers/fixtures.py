"""Fixture decorators the tests share."""
import pytest


def slow_fixture(func):
    """A session-scoped fixture that trains something: built once per run,
    and every test that uses it, directly or through another fixture, is
    marked ``slow`` (tests/conftest.py), so ``pytest -m "not slow"`` skips
    the training."""
    func.slow = True
    return pytest.fixture(scope="session")(func)
