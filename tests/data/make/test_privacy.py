"""No local path (user name, scratch folder) in what a dataset folder publishes: manifest, card front matter, body."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ssmbench.data.hub.publish import publish
from ssmbench.data.make.command import local_paths, portable_argv
from ssmbench.errors import DatasetError


def ssmbench(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    exe = Path(sys.executable).with_name("ssmbench")
    cmd = [str(exe)] if exe.exists() else [sys.executable, "-c", "from ssmbench.cli import main; main()"]
    return subprocess.run([*cmd, *args], capture_output=True, text=True, cwd=cwd, timeout=300,
                          env={**os.environ, "PYTHONSAFEPATH": "1"})


def test_a_cli_build_records_a_path_free_command_that_rebuilds_it(tmp_path):
    out = tmp_path / "home" / "zq-user" / "private data"
    config = tmp_path / "home" / "zq-user" / "cfg.toml"
    config.parent.mkdir(parents=True)
    config.write_text("num_shifts = 2\n")
    made = ssmbench("generate", "shift", "--length", "64", "--n", "12", "--config", str(config), "--out", str(out),
                    "-q", "--json", cwd=tmp_path)
    assert made.returncode == 0, made.stderr
    folder = Path(json.loads(made.stdout)["path"])
    manifest = json.loads((folder / "manifest.json").read_text())
    for name in ("manifest.json", "README.md", "croissant.json"):
        text = (folder / name).read_text()
        assert str(tmp_path) not in text and "zq-user" not in text, name
    argv = manifest["command"]["argv"]
    assert argv == ["generate", "shift", "--length", "64", "--n", "12", "-o", "num_shifts=2"]
    card = (folder / "README.md").read_text()
    assert "regenerate: ssmbench generate shift --length 64 --n 12 -o num_shifts=2\n" in card
    again = ssmbench(*argv, "--out", str(tmp_path / "again"), "-q", "--json", cwd=tmp_path)  # the command rebuilds it
    assert json.loads(again.stdout)["content_digest"] == manifest["content_digest"]


def test_publish_refuses_a_folder_whose_manifest_or_card_names_a_local_path(tiny_shift, tmp_path):
    for name in ("manifest.json", "README.md"):
        old = shutil.copytree(tiny_shift, tmp_path / name / "shift-64")
        text = (old / name).read_text()
        if name == "manifest.json":
            m = json.loads(text)
            m["command"]["argv"] += ["--out", "/home/ada/data"]
            text = json.dumps(m)
        else:
            text = text.replace("regenerate: ssmbench generate", "regenerate: ssmbench generate --out /home/ada/x")
        (old / name).write_text(text)
        with pytest.raises(DatasetError, match=f"{name} names the local path '/home/ada/"):
            publish(old, tmp_path / "release" / name)
        assert not (tmp_path / "release" / name / "shift-64").exists()
    assert publish(tiny_shift, tmp_path / "release" / "ok").files  # the path-free original is published


@pytest.mark.parametrize(("text", "found"), [
    ("ssmbench generate shift --out /home/ada/data", ["/home/ada/data"]),
    ("see https://host.example/a/b and hf://datasets/org/repo@main/x", []),
    ("cd ~/work/data", ["~/work/data"]),
    ("D:\\users\\ada\\data", ["D:\\users\\ada\\data"]),
    ("train/shard-00000-of-00004.h5 and data/shift-64", []),
])
def test_local_paths(text, found):
    assert local_paths(text) == found


def test_portable_argv_drops_locations_and_inlines_a_config_file(tmp_path):
    cfg = tmp_path / "c.json"
    cfg.write_text('{"num_shifts": 3, "L": 128}')
    assert portable_argv(["generate", "shift", f"--config={cfg}", "--out=/x/y", "--shard-index", "1",
                          "--num-shards", "4", "--overwrite", "--seed", "3"]) == \
        ["generate", "shift", "-o", "num_shifts=3", "-o", "L=128", "--seed", "3"]
