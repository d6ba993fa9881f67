"""What a reader loads: `import ssmbench`, `ssmbench.open_dataset` and `ssmbench.data.read` never load the builder
(`ssmbench.data.make*`) or the downloader (`ssmbench.data.hub.download`, `.transfer`), checked on `sys.modules`
in a fresh interpreter (issue 27: a researcher who only reads data imports neither)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

HEAVY = ("ssmbench.data.make", "ssmbench.data.hub.download", "ssmbench.data.hub.transfer")


def loaded_after(code: str) -> dict[str, list[str]]:
    """{"data": the ssmbench.data modules loaded after running `code` in a fresh interpreter, "heavy": those of
    them that belong to the builder or the downloader}."""
    probe = (f"{code}\nimport json, sys\nmods = sorted(m for m in sys.modules if m.startswith('ssmbench.data'))\n"
             f"print(json.dumps({{'data': mods, 'heavy': [m for m in mods if m.startswith({HEAVY!r})]}}))")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True,
                         env={**os.environ, "PYTHONSAFEPATH": "1"}).stdout
    return json.loads(out.strip().splitlines()[-1])


def test_the_probe_sees_the_builder_when_it_is_loaded():
    assert "ssmbench.data.make.generate" in loaded_after("import ssmbench.data.make.generate")["heavy"]
    assert "ssmbench.data.hub.transfer" in loaded_after("import ssmbench.data.hub.download")["heavy"]


@pytest.mark.parametrize("code", [
    "import ssmbench; ssmbench.open_dataset",
    "import ssmbench.data; ssmbench.data.open_dataset, ssmbench.data.Manifest",
    "from ssmbench.data.read import loader, streaming, samplers, columns, chunk_rows, ring",
    "from ssmbench.data.read.loader import FolderDataset, open_folder",
    "from ssmbench.data import EvalShardSampler, ShardAwareSampler",  # the README's import
    "from ssmbench.data import TaskStream",  # the README's import
    "from ssmbench.data.loader import EvalShardSampler, ShardAwareSampler",  # the old home, kept
    "from ssmbench.data.streaming import TaskStream",  # the old home, kept
])
def test_importing_the_reader_loads_neither_builder_nor_downloader(code):
    loaded = loaded_after(code)
    assert loaded["data"] and not loaded["heavy"]


def test_import_ssmbench_data_loads_no_part_of_it():
    assert loaded_after("import ssmbench.data")["data"] == ["ssmbench.data"]


def test_opening_and_reading_a_folder_by_path_loads_neither(tiny_shift):
    code = (f"import ssmbench\nds = ssmbench.open_dataset({str(tiny_shift)!r}, 'val', transform='numpy')\n"
            "assert len(ds) > 0 and ds[0]['inputs'].ndim == 2")
    loaded = loaded_after(code)
    assert "ssmbench.data.read.loader" in loaded["data"] and not loaded["heavy"]
