"""The Hugging Face side: hf:// sources with a token (private and gated repositories), honest task categories,
`dataset_info` splits, the Zstd line, and the card route for the fixed variants."""

from __future__ import annotations

import json
import shutil

import pytest

from ssmbench.data.hub.download import download_dataset
from ssmbench.data.hub.repack import repack
from ssmbench.data.make.generate import generate_dataset
from ssmbench.errors import DownloadError
from ssmbench.task_config import resolve_config

NAME = "shift-64"


@pytest.fixture
def hub(tiny_shift, tmp_path, make_server, monkeypatch):
    served = tmp_path / "hub"
    shutil.copytree(tiny_shift, served / "datasets/org/private/resolve/0a1b2c/shift-64",
                    ignore=shutil.ignore_patterns(".build"))
    server = make_server(served)
    server.token = "hf_secret"
    monkeypatch.setenv("HF_ENDPOINT", server.url())
    monkeypatch.delenv("HF_TOKEN", raising=False)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf-home"))  # no cached login from the machine
    return server


def test_a_private_hub_repository_needs_a_token_and_gets_it_only_there(hub, tiny_shift, tmp_path, monkeypatch,
                                                                       make_server):
    source = "hf://datasets/org/private@0a1b2c/shift-64"
    with pytest.raises(DownloadError, match="private or gated") as info:
        download_dataset(source, to=tmp_path / "a", retries=0)
    assert "hf auth login" in info.value.hint and "HF_TOKEN" in info.value.hint
    assert not (tmp_path / "a" / NAME / "manifest.json").exists()
    monkeypatch.setenv("HF_TOKEN", "hf_wrong")
    with pytest.raises(DownloadError, match="private or gated") as info:
        download_dataset(source, to=tmp_path / "b", retries=0)
    assert "accept the dataset's terms" in info.value.hint
    monkeypatch.setenv("HF_TOKEN", "hf_secret")
    result = download_dataset(source, to=tmp_path / "c", splits=["test"])
    assert (result.path / "manifest.json").exists() and set(hub.auth_seen[-3:]) == {"Bearer hf_secret"}
    plain = make_server(tmp_path / "hub" / "datasets/org/private/resolve/0a1b2c")  # any other host: no token
    download_dataset(plain.url("shift-64/"), to=tmp_path / "d", splits=["test"])
    assert plain.auth_seen and set(plain.auth_seen) == {None}


@pytest.mark.parametrize(("task", "category"), [("listops_subtrees", "token-classification"),
                                                 ("listops", "text-classification"),
                                                 ("pathfinder", "image-segmentation"), ("shift", "other")])
def test_task_categories_are_the_hubs_where_one_is_honest(task, category):
    from ssmbench.registry import get_task

    assert get_task(task).hf_task_category == category


def test_fixed_variant_card_route_loads_with_split_counts_and_says_why(tmp_path):
    datasets = pytest.importorskip("datasets")
    _, config, _ = resolve_config("select_fixed", overrides=["L=64", "M=8"])
    folder = generate_dataset("select_fixed", config, out=tmp_path, n=20, samples_per_shard=8, quiet=True,
                              argv=["generate", "select_fixed", "-o", "L=64", "-o", "M=8", "--n", "20"]).path
    text = (folder / "README.md").read_text()
    assert "task_categories: [other]" in text and "no sequence-to-sequence regression" in text
    assert 'not the generic `load_dataset("hdf5", data_files=...)`' in text
    info = text.split("dataset_info:", 1)[1]
    assert '{"name": "train", "num_examples": 16' in info and '{"name": "validation", "num_examples": 2' in info
    ds = datasets.load_dataset(str(folder), cache_dir=str(tmp_path / "hf"))
    assert {k: v.num_rows for k, v in ds.items()} == {"train": 16, "validation": 2, "test": 2}
    assert "fixed" not in ds["train"].column_names
    row = ds["train"][0]
    assert len(row["inputs"]) == 64 + 2 * 8


def test_a_zstd_copy_card_names_hdf5plugin_for_the_hub_route(tiny_shift, tmp_path):
    zstd = repack(tiny_shift, codec="zstd:1", out=tmp_path).path
    text = (zstd / "README.md").read_text()
    assert "`import hdf5plugin` before `load_dataset`" in text
    assert "import hdf5plugin" not in (tiny_shift / "README.md").read_text().split("## Reading the data")[1]
    assert json.loads((zstd / "manifest.json").read_text())["storage"]["fields"]["inputs"]["codec"] == "zstd:1"
