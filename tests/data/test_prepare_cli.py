"""The `prepare` Typer command: options, bindings, summary, one-line errors."""

from __future__ import annotations

import typer
from typer.testing import CliRunner

from flowkit.cli.prepare import prepare
from flowkit.data.dataset import LatentDataset
from flowkit.errors import DataError


def _app() -> typer.Typer:
    app = typer.Typer()
    app.command()(prepare)
    return app


def test_cli_prepare_prints_summary_and_applies_bindings(tmp_path, small_corpus):
    out = tmp_path / "s.zarr"
    result = CliRunner().invoke(_app(), [str(small_corpus), "--out", str(out), "--workers", "1", "--quiet",
                                         "--align", "energy", "-b", "prepare.max_seconds = 1.05"])
    assert result.exit_code == 0, result.output
    assert "accepted" in result.output and "too_long" in result.output and "real time" in result.output
    ds = LatentDataset.open([out], None, require_units=True)
    assert len(ds) == 2
    assert all(s.units_estimated for s in ds.segments)


def test_cli_prepare_bad_input_raises_data_error(tmp_path):
    result = CliRunner().invoke(_app(), [str(tmp_path / "nothing"), "--out", str(tmp_path / "s.zarr"), "--quiet"])
    assert isinstance(result.exception, DataError)
    assert "not an input flowkit can read" in str(result.exception)
