"""`ssmbench.open_dataset(name or path, split)`: find the dataset folder (fetching it when it is missing), then read it.

A path opens that folder (`ssmbench.data.read.loader.open_folder`); a name is looked up in the data root and then
in the catalogues (`ssmbench.data.hub.get.resolve_dataset`), and downloaded or rebuilt when missing unless
`download=False`. Only a name that is not there loads the downloader.

Example (a 40-sample Shift build opened by its path)::

    >>> import tempfile
    >>> from ssmbench.data.make.generate import generate_dataset
    >>> from ssmbench.task_config import resolve_config
    >>> tmp = tempfile.TemporaryDirectory()
    >>> folder = generate_dataset("shift", resolve_config("shift", length=64)[1], out=tmp.name, n=40).path
    >>> len(open_dataset(folder, "validation")), len(open_dataset(folder.name, "train", data_root=tmp.name))
    (4, 32)
    >>> tmp.cleanup()
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..folder.splits import canonical_split
from ..read.loader import open_folder

if TYPE_CHECKING:
    import numpy as np

    from ..read.loader import FolderDataset

__all__ = ["open_dataset"]


def open_dataset(path: str | Path, split: str = "train", *, fields: Sequence[str] | None = None,
                 transform: str | Callable[[dict[str, np.ndarray]], Any] = "model", expect_task: str | None = None,
                 expect_config: Mapping[str, Any] | None = None, download: bool = True,
                 max_open_files: int = 16, data_root: str | Path | None = None) -> FolderDataset:
    """One split of a dataset folder as a map-style dataset (`ssmbench.data.read.loader` describes the items).

    `path` is a folder, or a dataset name looked up in the data root (`data_root`, else `$SSMBENCH_DATA`, else
    ./data) and then in the download catalogues (downloaded when missing, unless `download=False`). `fields`,
    `transform`, `expect_task`, `expect_config` and `max_open_files` are `open_folder`'s. `split` is train, val or
    test (`validation` and `valid` mean val, as for `ssmbench download --split`).
    """
    split = canonical_split(split, "split")
    folder = Path(path)
    if not folder.is_dir():
        from .get import resolve_dataset

        folder = resolve_dataset(path, download=download, split=split, data_root=data_root)
    return open_folder(folder, split, fields=fields, transform=transform, expect_task=expect_task,
                       expect_config=expect_config, max_open_files=max_open_files)
