"""genq.PatchGuard: a dependency's patches are on only with the release they were tested on;
another installed release turns them off with one warning, and nothing turns them on again."""

from __future__ import annotations

import logging
from importlib.metadata import version

import pytest

import genq._redis_patches
from genq import PatchGuard, pinned
from genq._patch_guard import untested_version

LOGGER = "tests.patch_guard"
OFF = "the test's patches are off; the dependency's own path runs"


def guard(tested: dict[str, str], applied: list[bool] | None = None) -> PatchGuard:
    return PatchGuard(
        tested=tested,
        off_warning=OFF,
        logger=LOGGER,
        apply=None if applied is None else applied.append,
    )


def test_patch_guard_turns_the_patches_on_with_the_tested_release_and_warns_of_nothing(
    caplog: pytest.LogCaptureFixture,
) -> None:
    applied: list[bool] = []
    redis = guard({"redis": version("redis")}, applied)
    assert not redis.patched()  # off until checked
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        assert redis.check() is True
    assert caplog.records == []
    assert redis.patched() and redis.version_mismatch() is None
    assert applied == [True]


def test_patch_guard_another_release_turns_them_off_with_one_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    applied: list[bool] = []
    redis = guard({"redis": "0.0.1"}, applied)
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        assert redis.check() is False
    installed = version("redis")
    assert [(r.levelno, r.getMessage()) for r in caplog.records] == [
        (logging.WARNING, f"redis {installed} is not the tested 0.0.1: {OFF}")
    ]
    assert redis.version_mismatch() == f"redis {installed} is not the tested 0.0.1"
    assert redis.set_patched(True) is False  # no way on with an untested release
    assert not redis.patched()
    assert applied == [False, False]  # every switch takes the patches out, none puts them in


def test_patch_guard_set_patched_switches_them_and_apply_follows(
    caplog: pytest.LogCaptureFixture,
) -> None:
    applied: list[bool] = []
    redis = guard({"redis": version("redis")}, applied)
    redis.check()
    assert redis.set_patched(False) is False and not redis.patched()
    assert redis.set_patched(True) is True and redis.patched()
    assert applied == [True, False, True]


def test_patch_guard_reads_the_tested_releases_at_each_check() -> None:
    """The patched module's ``TESTED_VERSIONS`` is the guard's mapping: naming another release
    in it (as after an upgrade) turns the patches off at the next check, and back on after."""
    tested = {"redis": version("redis")}
    redis = guard(tested)
    assert redis.check()
    tested["redis"] = "0.0.1"
    assert redis.check() is False and not redis.patched()
    tested["redis"] = version("redis")
    assert redis.check() and redis.patched()


def test_patch_guard_names_the_first_distribution_that_differs() -> None:
    tested = {"redis": version("redis"), "hiredis": "0.0.1", "tenacity": "0.0.2"}
    assert untested_version(tested) == f"hiredis {version('hiredis')} is not the tested 0.0.1"
    assert guard(tested).check() is False


def test_patch_guard_is_what_genqs_redis_py_patches_answer_through() -> None:
    patches = genq._redis_patches
    assert patches.TESTED_VERSIONS is patches.GUARD.tested
    assert patches.patched() is patches.GUARD.patched() is True


def test_patch_guard_tests_the_release_genqs_own_metadata_pins() -> None:
    """The pinned release is the tested one: an upgrade is the pin's one line."""
    assert pinned("redis") == {"redis": "8.1.0"} == genq._redis_patches.TESTED_VERSIONS
    assert pinned("redis") == {"redis": version("redis")}


def test_patch_guard_keeps_a_dependency_genq_does_not_pin_exactly_off(
    caplog: pytest.LogCaptureFixture,
) -> None:
    tested = pinned("hiredis")  # comes with redis[hiredis]: genq pins no release of it
    assert tested == {"hiredis": "unpinned"}
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        assert guard(tested).check() is False
    assert [r.getMessage() for r in caplog.records] == [
        f"hiredis {version('hiredis')} is not the tested unpinned: {OFF}"
    ]
