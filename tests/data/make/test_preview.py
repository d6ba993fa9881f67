"""`ssmbench preview`: PNG grids of images beside colour-coded masks, and sequence plots for the other tasks."""

from __future__ import annotations

import json
from pathlib import Path

import h5py
import numpy as np
import pytest
from matplotlib.image import imread

from ssmbench.data.make.preview import MASK_COLOURS, render_preview
from ssmbench.errors import DatasetError


def _folder(root: Path, fields: dict[str, np.ndarray], input_kind: str, split: str = "val",
            per_shard: int = 3) -> Path:
    """A minimal dataset folder in the README's layout: manifest.json plus shards of `split`."""
    n = len(fields["inputs"])
    shards = []
    for k, lo in enumerate(range(0, n, per_shard)):
        hi = min(lo + per_shard, n)
        rel = f"{split}/shard-{k:05d}.h5"
        (root / split).mkdir(parents=True, exist_ok=True)
        with h5py.File(root / rel, "w") as f:
            for name, arr in fields.items():
                f.create_dataset(name, data=arr[lo:hi])
            f.create_dataset("sample_id", data=np.arange(lo, hi))
        shards.append({"path": rel, "sample_start": lo, "sample_stop": hi})
    splits = {s: {"num_samples": 0, "shards": []} for s in ("train", "val", "test")}
    splits[split] = {"num_samples": n, "shards": shards}
    manifest = {"name": root.name, "task": "x", "spec": {"input_kind": input_kind, "ignore_index": -100},
                "splits": splits}
    (root / "manifest.json").write_text(json.dumps(manifest))
    return root


def _images(n: int = 6, side: int = 40) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    inputs = np.zeros((n, side, side), dtype=np.uint8)
    targets = np.zeros((n, side, side), dtype=np.uint8)
    inputs[:, 10:12, 5:30] = 230
    targets[:, 10:12, 5:30] = 1
    targets[::2, 20:22, 5:30] = 2
    inputs[::2, 20:22, 5:30] = 255
    inputs |= (rng.random((n, side, side)) < 0.01).astype(np.uint8) * 200
    return {"inputs": inputs, "targets": targets, "label": (np.arange(n) % 2 == 0).astype(np.uint8)}


def test_image_grid_shows_images_and_all_mask_colours(tmp_path, monkeypatch):
    ds = _folder(tmp_path / "pf", _images(), "pixels")
    monkeypatch.chdir(tmp_path)
    png = render_preview(ds, n=5)
    assert png == tmp_path / "pf-preview.png" and sorted(p.name for p in ds.iterdir()) == ["manifest.json", "val"]
    img = imread(png)[..., :3]
    assert img.shape[0] > 300 and img.shape[1] > 300
    colours = {tuple(np.round(c * 255).astype(int)) for c in img.reshape(-1, 3)[::7]}
    for hexcode in MASK_COLOURS[1:]:  # both path classes are drawn in their colours
        rgb = tuple(int(hexcode[i:i + 2], 16) for i in (1, 3, 5))
        assert any(max(abs(a - b) for a, b in zip(rgb, c, strict=True)) <= 3 for c in colours), hexcode
    assert render_preview(ds, n=5).read_bytes() == png.read_bytes()  # deterministic bytes


@pytest.mark.parametrize("shape", ["classes", "flat", "logits"])
def test_image_grid_with_predictions(tmp_path, shape):
    ds = _folder(tmp_path / "pf", _images(), "pixels")
    pred = _images()["targets"][:4]
    pred = {"classes": pred, "flat": pred.reshape(4, -1),
            "logits": np.eye(3, dtype=np.float32)[pred.reshape(4, -1)]}[shape]
    out = render_preview(ds, n=4, out=tmp_path / "p.png", predictions=pred)
    with_pred = imread(out)
    without = imread(render_preview(ds, n=4, out=tmp_path / "q.png"))
    assert with_pred.shape[0] > without.shape[0] * 1.3  # a third row of panels


def test_sequences_and_tokens(tmp_path):
    rng = np.random.default_rng(1)
    t = np.arange(64)
    x = np.stack([rng.normal(size=(3, 64)), np.cos(2 * np.pi * t / 64)[None].repeat(3, 0),
                  np.sin(2 * np.pi * t / 64)[None].repeat(3, 0)], -1).astype(np.float32)
    atomic = _folder(tmp_path / "cumsum", {"inputs": x, "targets": np.cumsum(x[:, :, :1], 1)}, "real")
    assert imread(render_preview(atomic, n=2, out=tmp_path / "a.png")).shape[1] >= 900
    tokens = rng.integers(1, 16, size=(3, 50)).astype(np.uint8)
    targets = np.full((3, 50), -100, dtype=np.int8)
    targets[:, 5::7] = rng.integers(0, 10, size=(3, 7))
    lo = _folder(tmp_path / "listops", {"inputs": tokens, "targets": targets, "lengths": np.array([50, 40, 30])},
                 "tokens", split="test")
    # falls back to the only split with samples
    assert render_preview(lo, n=3, predictions=targets, out=tmp_path / "lo.png").is_file()


def test_real_dataset_folder(tmp_path):
    """A folder written by `ssmbench.data.make.generate_dataset` (an atomic task) previews as line plots."""
    from ssmbench.data.make.generate import generate_dataset
    from support import tiny_config

    res = generate_dataset("cumsum", tiny_config("cumsum"), out=tmp_path, n=10, workers=1)
    out = render_preview(res.path, n=2, out=tmp_path / "c.png", split="train")
    assert imread(out).shape[0] > 200


def test_errors(tmp_path):
    with pytest.raises(DatasetError):
        render_preview(tmp_path)
    ds = _folder(tmp_path / "pf", _images(), "pixels")
    with pytest.raises(DatasetError):
        render_preview(ds, n=0)
    (ds / "val" / "shard-00001.h5").unlink()
    with pytest.raises(DatasetError):
        render_preview(ds, n=6)


@pytest.mark.parametrize("where", ["preview.png", "val/x.png", "."])
def test_never_into_the_dataset_it_draws(tmp_path, monkeypatch, where):
    """The build's preview.png is pinned in the manifest: a picture drawn over it failed `verify` and `publish`
    (issue 37). An --out inside the folder is a ConfigError; run from inside the folder, the default goes to the
    temporary folder; the build's own `.build/` scratch folder stays allowed."""
    from ssmbench.errors import ConfigError

    ds = _folder(tmp_path / "pf", _images(), "pixels")
    before = sorted(p.relative_to(ds) for p in ds.rglob("*"))
    if where == ".":
        monkeypatch.chdir(ds / "val")
        written = render_preview(ds, n=2)
        assert ds not in written.parents and written.is_file()
        written.unlink()
    else:
        with pytest.raises(ConfigError, match="inside the dataset folder"):
            render_preview(ds, n=2, out=ds / where)
    assert sorted(p.relative_to(ds) for p in ds.rglob("*")) == before
    assert render_preview(ds, n=2, out=ds / ".build" / "preview.png").is_file()


def test_verify_names_a_changed_preview_and_card_restores_it(tmp_path, capsys):
    """A preview drawn over the pinned one (as `preview` did before issue 37): `verify` says which file and how to
    restore it; `card` draws the pinned picture again, byte for byte, and `verify` passes."""
    from ssmbench.cli import main
    from ssmbench.data.hub.verify import verify_dataset
    from ssmbench.data.make.generate import generate_dataset
    from support import tiny_config

    folder = generate_dataset("pathfinder", tiny_config("pathfinder"), out=tmp_path, n=8, workers=1).path
    pinned = (folder / "preview.png").read_bytes()
    render_preview(folder, n=2, out=folder / ".build" / "other.png").replace(folder / "preview.png")
    problems = verify_dataset(folder).problems
    assert problems == [f"preview.png: missing or not the image the manifest pins (drawn over by an older "
                        f"`ssmbench preview`?); restore it with `ssmbench card {folder}`"]
    with pytest.raises(SystemExit) as end:
        main(["card", str(folder)])
    assert end.value.code == 0 and capsys.readouterr().out.splitlines()[0] == str(folder / "preview.png")
    assert (folder / "preview.png").read_bytes() == pinned and verify_dataset(folder).ok
    assert not (folder / ".build" / "preview.png").exists()
