"""Data cards: render a dataset folder's README.md (Hugging Face front matter + datasheet) and croissant.json.

Inputs: the shared template `data_cards/_template.md`, the task's source card `data_cards/<task>.md` (read with
importlib.resources, so wheel installs work), the manifest and its stored statistics. Rendering is deterministic.
"""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path
from typing import Any

from ..registry import get_task
from .shards import SPLIT_ORDER, atomic_write_bytes, atomic_write_json, file_sha256

HF_SPLIT = {"train": "train", "val": "validation", "test": "test"}
CITATIONS = """- Gupta, Mehta, Berant. *Simplifying and Understanding State Space Models with Diagonal Linear RNNs*. 2022.
- Tay et al. *Long Range Arena: A Benchmark for Efficient Transformers*. ICLR 2021.
- Linsley et al. *Learning long-range spatial dependencies with horizontal gated recurrent units*. NeurIPS 2018 (Pathfinder).
- Nangia and Bowman. *ListOps: A Diagnostic Dataset for Latent Tree Learning*. NAACL SRW 2018."""


def source_card(task_name: str) -> tuple[dict[str, str], str]:
    """(front matter, body) of the task's card source (`Task.card_markdown`: `data_cards/<task>.md` if packaged)."""
    return split_front_matter(get_task(task_name).card_markdown())


def split_front_matter(text: str) -> tuple[dict[str, str], str]:
    if not text.startswith("---\n"):
        return {}, text
    head, _, body = text[4:].partition("\n---\n")
    meta = {}
    for line in head.splitlines():
        key, sep, value = line.partition(":")
        if sep:
            meta[key.strip()] = value.strip().strip('"')
    return meta, body.lstrip("\n")


def size_category(n: int) -> str:
    bounds = [(1_000, "n<1K"), (10_000, "1K<n<10K"), (100_000, "10K<n<100K"), (1_000_000, "100K<n<1M"),
              (10_000_000, "1M<n<10M")]
    return next((label for bound, label in bounds if n < bound), "10M<n<100M")


def _regenerate_command(manifest: dict[str, Any]) -> str:
    argv = manifest.get("command", {}).get("argv") or []
    if argv:
        return "ssmbench " + " ".join(argv)
    return f"ssmbench generate {manifest['task']} --seed {manifest['seeding']['root_seed']}"


def _generic_statistics(manifest: dict[str, Any]) -> str:
    lines = []
    for split in SPLIT_ORDER:
        stats = manifest.get("statistics", {}).get(split) or {}
        for key, value in stats.items():
            shown = value if not isinstance(value, list) or len(value) <= 16 else f"{value[:16]} ..."
            lines.append(f"| {split} | {key} | {shown} |")
    if not lines:
        return ""
    return "| split | statistic | value |\n|---|---|---|\n" + "\n".join(lines)


def render_card(manifest: dict[str, Any]) -> str:
    task = get_task(manifest["task"])
    _, body = source_card(manifest["task"])
    template = resources.files("ssmbench.data_cards").joinpath("_template.md").read_text()
    n_total = sum(manifest["splits"][s]["num_samples"] for s in SPLIT_ORDER)
    config_lines = "\n".join(f"| `{k}` | `{json.dumps(v)}` |" for k, v in sorted(manifest["config"].items()))
    split_lines = "\n".join(
        f"| {s} | {manifest['splits'][s]['num_samples']} | {len(manifest['splits'][s]['shards'])} |"
        for s in SPLIT_ORDER)
    field_lines = "\n".join(
        f"| `{k}` | {f['dtype']} | ({', '.join(map(str, f['shape']))}) | {f['description']} |"
        for k, f in manifest["spec"]["fields"].items())
    from ..config import config_from_dict

    stats = task.statistics_markdown(config_from_dict(task.Config, manifest["config"]), manifest.get("statistics", {}))
    stats = stats or _generic_statistics(manifest) or "No per-split statistics are recorded for this task."
    preview = "![samples](preview.png)\n" if any(f["path"] == "preview.png" for f in manifest.get("files", [])) else ""
    values = {
        "name": manifest["name"], "task": manifest["task"], "task_version": manifest["task_version"],
        "dataset_id": manifest["dataset_id"], "root_seed": manifest["seeding"]["root_seed"],
        "seed_scheme": manifest["seeding"]["scheme"], "n_total": n_total, "content_digest": manifest["content_digest"],
        "ssmbench_version": manifest["ssmbench_version"], "regenerate": _regenerate_command(manifest),
        "config_table": config_lines, "split_table": split_lines, "field_table": field_lines,
        "task_card": body.strip(), "statistics": stats.strip(), "preview": preview, "citations": CITATIONS,
        "environment": ", ".join(f"{k} {v}" for k, v in manifest.get("environment", {}).items()),
        "summary": task.__doc__.strip().splitlines()[0] if task.__doc__ else manifest["task"],
    }
    for key, value in values.items():
        template = template.replace("{{" + key + "}}", str(value))
    front = [
        "---", f"pretty_name: ssmbench {manifest['name']}", "license: cc-by-4.0",
        "tags: [synthetic, long-range, benchmark, state-space-models, hdf5, ssmbench]",
        "annotations_creators: [machine-generated]", "source_datasets: [original]",
        f"size_categories: [{size_category(n_total)}]",
        f"task_categories: [{task.hf_task_category}]",
        "configs:", f"  - config_name: {manifest['name']}", "    data_files:",
        *[f'      - {{split: {HF_SPLIT[s]}, path: "{s}/*.h5"}}' for s in SPLIT_ORDER
          if manifest["splits"][s]["num_samples"]],
        "ssmbench:", f"  task: {manifest['task']}", f'  task_version: "{manifest["task_version"]}"',
        f"  dataset_id: {manifest['dataset_id']}", f"  root_seed: {manifest['seeding']['root_seed']}",
        f'  regenerate: "{values["regenerate"]}"', "---", "",
    ]
    return "\n".join(front) + template


def croissant(manifest: dict[str, Any], root: Path) -> dict[str, Any]:
    """Croissant 1.1 JSON-LD describing the files (no RecordSets: mlcroissant has no HDF5 reader)."""
    distribution: list[dict[str, Any]] = [
        {"@type": "cr:FileObject", "@id": "manifest.json", "name": "manifest.json", "contentUrl": "manifest.json",
         "encodingFormat": "application/json", "sha256": file_sha256(root / "manifest.json")},
        {"@type": "cr:FileObject", "@id": "README.md", "name": "README.md", "contentUrl": "README.md",
         "encodingFormat": "text/markdown"},
    ]
    for f in manifest.get("files", []):
        distribution.append({"@type": "cr:FileObject", "@id": f["path"], "name": f["path"], "contentUrl": f["path"],
                             "sha256": f["sha256"]})
    for split in SPLIT_ORDER:
        if manifest["splits"][split]["num_samples"]:
            distribution.append({"@type": "cr:FileSet", "@id": f"{split}-shards", "name": f"{split} shards",
                                 "includes": f"{split}/*.h5", "encodingFormat": "application/x-hdf5"})
    return {
        "@context": {"@vocab": "https://schema.org/", "cr": "http://mlcommons.org/croissant/",
                     "rai": "http://mlcommons.org/croissant/RAI/"},
        "@type": "Dataset", "conformsTo": "http://mlcommons.org/croissant/1.1", "name": manifest["name"],
        "description": f"ssmbench synthetic dataset {manifest['name']} (task {manifest['task']}, version "
                       f"{manifest['task_version']}); arrays are described in manifest.json and README.md.",
        "license": "https://creativecommons.org/licenses/by/4.0/", "version": manifest["task_version"],
        "citeAs": "Gupta, Mehta, Berant. Simplifying and Understanding State Space Models with Diagonal Linear RNNs.",
        "rai:dataCollection": "Machine-generated by ssmbench; every sample is a pure function of the recorded "
                              "config, root seed, split and index.",
        "rai:dataLimitations": "Synthetic data; see the deviations section of README.md.",
        "rai:dataUseCases": "Benchmarking long-range sequence models.",
        "distribution": distribution,
    }


def write_card(root: Path, manifest: dict[str, Any]) -> Path:
    """Render README.md and croissant.json into the dataset folder."""
    atomic_write_bytes(root / "README.md", render_card(manifest).encode())
    atomic_write_json(root / "croissant.json", croissant(manifest, root))
    return root / "README.md"
