"""A picture of a dataset's samples: images beside colour-coded masks, or sequences as line plots.

`render_preview(DIR)` reads `DIR/manifest.json` and the first shards of one split (HDF5, read-only, no file
locking) and writes a PNG, never into DIR: the build's own `preview.png` is pinned in the manifest, so a picture
drawn over it would fail `verify` and `publish` (default `./<name>-preview.png` in the working folder; a file in the
temporary folder when that folder is DIR or read-only). Only a build draws into its dataset (`preview.png`, via its
`.build/` folder).
Image tasks (`input_kind == "pixels"`, e.g. `pathfinder`) show each image above its mask (0 black, 1 blue,
2 orange) and, when given, the model's prediction; every other task plots a few sequences: value channels of the
inputs and the targets at the output positions (ListOps: token ids and subtree values). matplotlib is imported
inside the function and drawn through the Agg canvas only, so the caller's pyplot state and backend are never
touched.
"""

from __future__ import annotations

import errno
import json
import logging
import math
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from ...errors import ConfigError, DatasetError
from ..folder.splits import canonical_split

log = logging.getLogger(__name__)

PREVIEW_FILE = "preview.png"
"""The picture a build draws into its dataset folder (tasks with `card_preview`), pinned in the manifest's files."""
BUILD_PREVIEW_SAMPLES = 4
"""Samples in that picture (finalize draws `render_preview(root, n=4)`); `restore_preview` draws the same."""

MASK_COLOURS = ("#000000", "#3d8bff", "#ff9f1c")
"""Mask classes 0 (background, distractors, circles), 1 (main path), 2 (main path with circles at both ends)."""
MASK_LEGEND = "mask: black 0 background / distractor / circle, blue 1 main path, orange 2 path with circles at both ends"


def _read_rows(dataset_dir: Path, manifest: dict[str, Any], split: str, n: int) -> dict[str, np.ndarray]:
    """The first n rows of a split, every stored field, concatenated over shards in sample order."""
    import h5py

    try:
        import hdf5plugin  # noqa: F401  (repacked datasets use zstd)
    except ImportError:  # pragma: no cover - optional at read time
        pass
    splits = manifest.get("splits", {})
    split = canonical_split(split)
    if split not in splits or not splits[split].get("num_samples"):
        present = [s for s in ("val", "test", "train") if splits.get(s, {}).get("num_samples")]
        if not present:
            raise DatasetError(f"{dataset_dir}: the manifest lists no samples to preview")
        split = present[0]
    rows: dict[str, list[np.ndarray]] = {}
    need = n
    for shard in sorted(splits[split]["shards"], key=lambda s: s["sample_start"]):
        if need <= 0:
            break
        path = dataset_dir / shard["path"]
        if not path.is_file():
            raise DatasetError(f"{path}: shard listed in the manifest is missing")
        with h5py.File(path, "r", locking=False) as f:
            for name, ds in f.items():
                if isinstance(ds, h5py.Dataset) and ds.ndim >= 1:
                    rows.setdefault(name, []).append(ds[:min(need, ds.shape[0])])
            need -= min(need, f["inputs"].shape[0])
    out = {k: np.concatenate(v) for k, v in rows.items()}
    out["_split"] = np.array(split)
    return out


def render_preview(dataset_dir: Path, n: int = 8, out: Path | None = None, predictions: np.ndarray | None = None,
                   split: str = "val") -> Path:
    """Write a PNG grid of the first `n` samples of `split` (default `DIR/preview.png`); returns its path.

    Args:
        dataset_dir: a dataset folder with `manifest.json` (README: The dataset folder).
        n: number of samples to show.
        out: where to write the PNG, outside DIR (ConfigError otherwise; only the build's `.build/` folder is
            allowed); by default `<name>-preview.png` in the working folder, or, when the working folder is DIR or
            read-only, a file in the temporary folder (the returned path says where).
        predictions: optional predicted classes (n, S, S) or (n, S*S), or logits with a trailing class axis, for
            image tasks; predicted values shaped like the targets for sequence tasks.
        split: train, val or test (another name is a ConfigError with a did-you-mean); when that split is empty,
            the first non-empty one of val / test / train.
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    dataset_dir = Path(dataset_dir)
    manifest_path = dataset_dir / "manifest.json"
    if not manifest_path.is_file():
        raise DatasetError(f"{dataset_dir}: no manifest.json; not a dataset folder")
    manifest = json.loads(manifest_path.read_text())
    if out is not None:
        refuse_inside(dataset_dir, Path(out))
    if n < 1:
        raise DatasetError(f"preview needs n >= 1, got {n}")
    rows = _read_rows(dataset_dir, manifest, split, n)
    asked, n = n, int(rows["inputs"].shape[0])
    spec = manifest.get("spec", {})
    shown = f"first {n} samples" if n == asked else f"all {n} samples (of {asked} asked for)"
    title = f"{manifest.get('name', dataset_dir.name)} · {rows['_split']} · {shown}"
    if spec.get("input_kind") == "pixels" or (rows["inputs"].ndim == 3 and rows["inputs"].shape[1:] ==
                                               rows.get("targets", np.empty((0, 0))).shape[1:]):
        fig = _image_grid(Figure, rows, n, predictions, title)
    else:
        fig = _sequence_plots(Figure, rows, n, predictions, title, spec)
    FigureCanvasAgg(fig)
    if out is not None:
        return _save(fig, Path(out))
    name = f"{manifest.get('name', dataset_dir.name)}-preview.png"
    here = Path.cwd()
    if not _inside(dataset_dir, here):
        try:
            return _save(fig, here / name)
        except OSError as exc:
            if exc.errno not in (errno.EACCES, errno.EPERM, errno.EROFS):
                raise
    # the working folder is the dataset or read-only (a shared mount): the temporary folder instead
    fallback = Path(tempfile.gettempdir()) / f"ssmbench-{name}"
    log.info("writing the preview to %s (choose the file with --out)", fallback)
    return _save(fig, fallback)


def _inside(folder: Path, path: Path) -> bool:
    return path.resolve() == folder.resolve() or folder.resolve() in path.resolve().parents


def refuse_inside(dataset_dir: Path, out: Path) -> None:
    """ConfigError (exit 2) for a preview file inside the dataset it draws, except the build's `.build/` folder:
    the dataset's files are pinned by its manifest (its own `preview.png` too)."""
    if _inside(dataset_dir, out) and not _inside(dataset_dir / ".build", out):
        raise ConfigError("--out", f"{out} is inside the dataset folder {dataset_dir}, whose files its manifest pins "
                          "(a picture there fails `verify`)", "write it elsewhere, e.g. --out preview.png")


def _save(fig: Any, out: Path) -> Path:
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=fig.dpi, metadata={"Software": None})
    return out


def _as_classes(pred: np.ndarray, n: int, side: int) -> np.ndarray:
    pred = np.asarray(pred)[:n]
    if pred.ndim in (3, 4) and pred.shape[-1] == 3 and pred.shape[1:-1] in ((side * side,), (side, side)):
        pred = pred.argmax(-1)
    return pred.reshape(pred.shape[0], side, side)


def _image_grid(Figure: Any, rows: dict[str, np.ndarray], n: int, predictions: np.ndarray | None, title: str) -> Any:
    from matplotlib.colors import ListedColormap

    images, masks = rows["inputs"], rows["targets"]
    side = images.shape[-1]
    preds = _as_classes(predictions, n, side) if predictions is not None else None
    per = 3 if preds is not None else 2
    cols = min(n, 4)
    groups = math.ceil(n / cols)
    panel = 2.6
    dpi = max(72, min(200, int(math.ceil(min(side, 320) / panel))))
    fig = Figure(figsize=(panel * cols, panel * per * groups + 0.6), dpi=dpi, layout="constrained")
    cmap = ListedColormap(MASK_COLOURS)
    for i in range(n):
        g, c = divmod(i, cols)
        panels = [("image", images[i], "gray", 255), ("mask", masks[i], cmap, 2)]
        if preds is not None:
            panels.append(("prediction", preds[i], cmap, 2))
        for j, (name, arr, cm, vmax) in enumerate(panels):
            ax = fig.add_subplot(per * groups, cols, (g * per + j) * cols + c + 1)
            ax.imshow(arr, cmap=cm, vmin=0, vmax=vmax, interpolation="nearest")
            ax.set_xticks([])
            ax.set_yticks([])
            if c == 0:
                ax.set_ylabel(name, fontsize=8)
            if j == 0:
                label = ""
                if "label" in rows:
                    label = " · connected" if int(rows["label"][i]) else " · not connected"
                ax.set_title(f"#{i}{label}", fontsize=8)
    fig.suptitle(f"{title}\n{MASK_LEGEND}", fontsize=8)
    return fig


def _sequence_plots(Figure: Any, rows: dict[str, np.ndarray], n: int, predictions: np.ndarray | None, title: str,
                    spec: dict[str, Any]) -> Any:
    k = min(n, 4)
    fig = Figure(figsize=(10, 2.2 * k + 0.6), dpi=100, layout="constrained")
    x, y = rows["inputs"], rows.get("targets")
    for i in range(k):
        ax = fig.add_subplot(k, 1, i + 1)
        xi = np.asarray(x[i])
        if xi.ndim == 1:  # tokens
            length = int(rows["lengths"][i]) if "lengths" in rows else xi.shape[0]
            ax.step(np.arange(length), xi[:length], where="mid", lw=0.6, color="0.4", label="token id")
            if y is not None:
                yi = np.asarray(y[i])[:length]
                at = np.flatnonzero(yi != spec.get("ignore_index", -100))
                ax2 = ax.twinx()
                ax2.plot(at, yi[at], "o", ms=2, color="C1", label="target")
                if predictions is not None:
                    ax2.plot(at, np.asarray(predictions[i])[:length][at], "x", ms=2, color="C2", label="prediction")
                ax2.set_ylabel("value", fontsize=7)
        else:
            t_len = xi.shape[0]
            value_channels = xi.shape[1] - 2 if xi.shape[1] > 2 else xi.shape[1]  # last two: cos / sin position
            for ch in range(min(value_channels, 3)):
                ax.plot(np.arange(t_len), xi[:, ch], lw=0.6, label=f"input {ch}")
            if y is not None:
                yi = np.asarray(y[i]).reshape(np.asarray(y[i]).shape[0], -1)
                pos = np.arange(t_len - yi.shape[0], t_len)  # outputs align with the last l_output positions
                for ch in range(min(yi.shape[1], 3)):
                    ax.plot(pos, yi[:, ch], lw=0.8, label=f"target {ch}")
                if predictions is not None:
                    pi = np.asarray(predictions[i]).reshape(yi.shape[0], -1)
                    ax.plot(pos, pi[:, 0], "--", lw=0.8, label="prediction")
        ax.set_title(f"#{i}", fontsize=8)
        ax.tick_params(labelsize=7)
        ax.legend(fontsize=6, loc="upper left")
    fig.suptitle(title, fontsize=9)
    return fig


def preview_problem(root: Path) -> str:
    """`verify`'s line for a dataset whose preview.png is missing or not the one its manifest pins."""
    return (f"{PREVIEW_FILE}: missing or not the image the manifest pins (drawn over by an older `ssmbench preview`?); "
            f"restore it with `ssmbench card {root}`")


def restore_preview(root: Path, manifest: dict[str, Any]) -> bool:
    """Draw a dataset's pinned preview.png again when it is missing or changed; True when it was rewritten.

    The picture is a pure function of the shards (deterministic bytes with this matplotlib); when the redrawn bytes
    still differ from the pin (another matplotlib than the build's), a DatasetError says how else to restore it."""
    from ...plain import file_sha256
    from ..folder.atomic import atomic_write_bytes

    pinned = next((f for f in manifest.get("files") or [] if f.get("path") == PREVIEW_FILE), None)
    target = Path(root) / PREVIEW_FILE
    if pinned is None or (target.is_file() and file_sha256(target) == pinned["sha256"]):
        return False
    drawn = render_preview(Path(root), n=BUILD_PREVIEW_SAMPLES, out=Path(root) / ".build" / PREVIEW_FILE)
    try:
        if file_sha256(drawn) != pinned["sha256"]:
            import matplotlib

            raise DatasetError(f"{target}: redrawn, the preview still differs from the one the manifest pins (a "
                               f"matplotlib other than this {matplotlib.__version__} drew it)", "fetch the folder "
                               "again (`ssmbench get` / `download`) or rebuild it (`ssmbench generate ... --overwrite`)")
        atomic_write_bytes(target, drawn.read_bytes())
    finally:
        drawn.unlink(missing_ok=True)
    return True
