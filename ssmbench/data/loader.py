"""Old home of the dataset reader, kept so that `from ssmbench.data.loader import ...` (README) keeps working.

The reader is `ssmbench.data.read.loader` (a folder path) and `ssmbench.open_dataset` (a name or a path).
"""

from __future__ import annotations

from .folder.checks import DamagedDataError as DamagedDataError
from .folder.checks import check_folder as check_folder
from .hub.open import open_dataset as open_dataset
from .read.loader import TRANSFORMS as TRANSFORMS
from .read.loader import FolderDataset as FolderDataset
from .read.loader import check_shard_files as check_shard_files
from .read.loader import collate as collate
from .read.loader import open_folder as open_folder
from .read.samplers import EvalShardSampler as EvalShardSampler
from .read.samplers import ShardAwareSampler as ShardAwareSampler
