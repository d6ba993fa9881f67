"""The test helpers themselves: a missing reference fixture skips locally and fails under CI=true."""

from __future__ import annotations

import pytest

import support


def test_missing_reference_skips_locally_and_fails_in_ci(monkeypatch, tmp_path):
    missing = tmp_path / "nowhere" / "reference_128.npz"
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception, match="reference fixtures not found"):
        support.require_reference(missing)
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="CI=true needs them"):
        support.require_reference(missing)
    missing.parent.mkdir()
    missing.write_bytes(b"")
    assert support.require_reference(missing) == missing
