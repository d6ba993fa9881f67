"""Data cards: render a dataset folder's README.md (Hugging Face front matter + datasheet) and croissant.json.

Inputs: the shared template `data_cards/_template.md`, the task's source card `data_cards/<task>.md` (read with
importlib.resources, so wheel installs work), the manifest and its stored statistics. Rendering is deterministic.
"""

from __future__ import annotations

import json
import re
from importlib import resources
from pathlib import Path
from typing import Any

from ...plain import file_sha256
from ...registry import get_task
from ..folder.atomic import atomic_write_bytes, atomic_write_json
from ..folder.splits import SPLIT_ORDER

HF_SPLIT = {"train": "train", "val": "validation", "test": "test"}
CITATIONS = """- Gupta, Mehta, Berant. *Simplifying and Understanding State Space Models with Diagonal Linear RNNs*. 2022.
- Tay et al. *Long Range Arena: A Benchmark for Efficient Transformers*. ICLR 2021.
- Linsley et al. *Learning long-range spatial dependencies with horizontal gated recurrent units*. NeurIPS 2018 (Pathfinder).
- Nangia and Bowman. *ListOps: A Diagnostic Dataset for Latent Tree Learning*. NAACL SRW 2018."""
BIBTEX = """@article{gupta2022simplifying,
  title   = {Simplifying and Understanding State Space Models with Diagonal Linear RNNs},
  author  = {Gupta, Ankit and Mehta, Harsh and Berant, Jonathan},
  journal = {arXiv preprint arXiv:2212.00768},
  year    = {2022}
}"""
# The JSON-LD context mlcroissant 1.1 expects (its `make_context` for conformsTo 1.1); without `@language` the
# validator crashes, and a context missing any of these keys draws a "not standard" warning.
CROISSANT_CONTEXT: dict[str, Any] = {
    "@language": "en", "@vocab": "https://schema.org/", "arrayShape": "cr:arrayShape", "citeAs": "cr:citeAs",
    "column": "cr:column", "conformsTo": "dct:conformsTo", "containedIn": "cr:containedIn",
    "cr": "http://mlcommons.org/croissant/", "rai": "http://mlcommons.org/croissant/RAI/",
    "data": {"@id": "cr:data", "@type": "@json"}, "dataType": {"@id": "cr:dataType", "@type": "@vocab"},
    "dct": "http://purl.org/dc/terms/", "description": {"@container": "@language"},
    "equivalentProperty": "cr:equivalentProperty", "examples": {"@id": "cr:examples", "@type": "@json"},
    "extract": "cr:extract", "field": "cr:field", "fileProperty": "cr:fileProperty", "fileObject": "cr:fileObject",
    "fileSet": "cr:fileSet", "format": "cr:format", "includes": "cr:includes", "isArray": "cr:isArray",
    "isLiveDataset": "cr:isLiveDataset", "jsonPath": "cr:jsonPath", "key": "cr:key", "md5": "cr:md5",
    "name": {"@container": "@language"}, "parentField": "cr:parentField", "path": "cr:path",
    "recordSet": "cr:recordSet", "references": "cr:references", "regex": "cr:regex", "repeated": "cr:repeated",
    "replace": "cr:replace", "samplingRate": "cr:samplingRate", "sc": "https://schema.org/",
    "separator": "cr:separator", "source": "cr:source", "subField": "cr:subField", "transform": "cr:transform",
}
MEDIA_TYPES = {".json": "application/json", ".md": "text/markdown", ".png": "image/png", ".npy": "application/x-npy",
               ".h5": "application/x-hdf5"}


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
    from .command import portable_argv

    argv = portable_argv(manifest.get("command", {}).get("argv") or [])
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


CATEGORY_NOTES = {
    "other": " The front matter's `task_categories` says `other`: the Hub's categories have no sequence-to-sequence "
             "regression, which is what this task is.",
}


def hf_note(manifest: dict[str, Any], category: str) -> str:
    """The card's extra words on the Hugging Face route: the plugin a Zstd copy needs, why the category."""
    zstd = "zstd" in {f.get("codec", "").split(":")[0] for f in manifest.get("storage", {}).get("fields", {}).values()}
    plugin = (" These shards use Zstd: run `import hdf5plugin` before `load_dataset`, so HDF5 can decode them."
              if zstd else "")
    fixed = (" Use this route, not the generic `load_dataset(\"hdf5\", data_files=...)`: that one reads every "
             "dataset of a shard as a column, and the shared `fixed/` object (one row per shard) breaks it."
             if any(f["path"] == "fixed.npy" for f in manifest.get("files", [])) else "")
    return plugin + fixed + CATEGORY_NOTES.get(category, "")


def codec_note(manifest: dict[str, Any]) -> str:
    """What a reader needs for these shards' filters: nothing for gzip, hdf5plugin for Zstd (a repacked copy)."""
    codecs = {f.get("codec", "none").split(":")[0] for f in manifest.get("storage", {}).get("fields", {}).values()}
    if "zstd" in codecs:
        return "these shards use Zstd: `import hdf5plugin` before opening them; ssmbench's loader does"
    return "gzip and fletcher32 only, no plugins"


def stored_fields(manifest: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Every per-sample dataset of a shard: the spec's fields plus `sample_id` (the `fixed/` group is not one)."""
    fields = {k: {"dtype": f["dtype"], "shape": list(f["shape"])} for k, f in manifest["spec"]["fields"].items()}
    fields.setdefault("sample_id", {"dtype": "int64", "shape": []})
    return fields


def hf_feature(name: str, dtype: str, shape: list[int]) -> dict[str, Any]:
    """One entry of the card's `dataset_info.features`, in the Hugging Face YAML form.

    >>> hf_feature("label", "uint8", [])
    {'name': 'label', 'dtype': 'uint8'}
    >>> hf_feature("targets", "int8", [128])
    {'name': 'targets', 'list': 'int8', 'length': 128}
    >>> hf_feature("inputs", "float32", [64, 3])
    {'name': 'inputs', 'dtype': {'array2_d': {'shape': [64, 3], 'dtype': 'float32'}}}
    """
    import numpy as np

    value = np.dtype(dtype).name
    if not shape:
        return {"name": name, "dtype": value}
    if len(shape) == 1:
        return {"name": name, "list": value, "length": int(shape[0])}
    if len(shape) > 5:
        raise ValueError(f"field {name!r} has {len(shape)} dimensions per sample; Hugging Face arrays stop at 5")
    return {"name": name, "dtype": {f"array{len(shape)}_d": {"shape": [int(s) for s in shape], "dtype": value}}}


def _yaml_str(text: str) -> str:
    """A YAML scalar for `text`: plain when that cannot be misread, else a JSON (= YAML double-quoted) string.

    >>> _yaml_str("ssmbench shift-64"), _yaml_str("1"), _yaml_str("yes"), _yaml_str("a: b")
    ('ssmbench shift-64', '"1"', '"yes"', '"a: b"')
    """
    plain = re.fullmatch(r"[A-Za-z][A-Za-z0-9_ .=/-]*[A-Za-z0-9_.]|[A-Za-z]", text)
    special = text.lower() in {"true", "false", "yes", "no", "on", "off", "null", "y", "n"}
    return text if plain and not special else json.dumps(text)


def _yaml_lines(key: str, items: list[dict[str, Any]], indent: str) -> list[str]:
    """`key:` then one JSON flow mapping per item (JSON is valid YAML, and this keeps the card deterministic)."""
    return [f"{indent}{key}:", *[f"{indent}  - {json.dumps(item)}" for item in items]]


def render_card(manifest: dict[str, Any], manifest_sha256: str | None = None) -> str:
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
    from ...task_config import from_plain

    stats = task.statistics_markdown(from_plain(task, manifest["config"]), manifest.get("statistics", {}))
    stats = stats or _generic_statistics(manifest) or "No per-split statistics are recorded for this task."
    preview = "![samples](preview.png)\n" if any(f["path"] == "preview.png" for f in manifest.get("files", [])) else ""
    shards = [sh["path"] for s in SPLIT_ORDER for sh in manifest["splits"][s]["shards"]]
    fixed = next((f for f in manifest.get("files", []) if f["path"] == "fixed.npy"), None)
    fixed_note = (f" Every shard also holds `{fixed.get('describes', 'fixed/')}`, the object shared by all samples "
                  "(identical in every shard and saved as `fixed.npy`); the card's `features` leave it out, since it "
                  "is not a per-sample column." if fixed else "")
    values = {
        "name": manifest["name"], "task": manifest["task"], "task_version": manifest["task_version"],
        "dataset_id": manifest["dataset_id"], "root_seed": manifest["seeding"]["root_seed"],
        "seed_scheme": manifest["seeding"]["scheme"], "n_total": n_total, "content_digest": manifest["content_digest"],
        "ssmbench_version": manifest["ssmbench_version"], "regenerate": _regenerate_command(manifest),
        "config_table": config_lines, "split_table": split_lines, "field_table": field_lines,
        "task_card": body.strip(), "statistics": stats.strip(), "preview": preview, "citations": CITATIONS,
        "environment": ", ".join(f"{k} {v}" for k, v in manifest.get("environment", {}).items()),
        "summary": task.__doc__.strip().splitlines()[0] if task.__doc__ else manifest["task"],
        "first_shard": shards[0] if shards else "train/shard-00000-of-00001.h5", "fixed_note": fixed_note,
        "bibtex": BIBTEX, "codec_note": codec_note(manifest), "hf_note": hf_note(manifest, task.hf_task_category),
    }
    for key, value in values.items():
        template = template.replace("{{" + key + "}}", str(value))
    return "\n".join(["---", *front_matter(manifest, task.hf_task_category, manifest_sha256), "---", ""]) + template


def config_entry(manifest: dict[str, Any], prefix: str = "") -> list[str]:
    """One item of the card's `configs` list; `prefix` puts the files under a sub-folder (a collection card)."""
    data_files = [{"split": HF_SPLIT[s], "path": f"{prefix}{s}/*.h5"} for s in SPLIT_ORDER
                  if manifest["splits"][s]["num_samples"]]
    return [f"  - config_name: {_yaml_str(manifest['name'])}", *_yaml_lines("data_files", data_files, "    ")]


def info_entry(manifest: dict[str, Any]) -> list[str]:
    """One item of the card's `dataset_info` list: every per-sample field with its dtype and shape, the splits
    with their example counts and bytes on disk."""
    features = [hf_feature(k, f["dtype"], f["shape"]) for k, f in stored_fields(manifest).items()]
    splits = [{"name": HF_SPLIT[s], "num_examples": manifest["splits"][s]["num_samples"],
               "num_bytes": sum(sh["num_bytes"] for sh in manifest["splits"][s]["shards"])}
              for s in SPLIT_ORDER if manifest["splits"][s]["num_samples"]]
    return [f"  - config_name: {_yaml_str(manifest['name'])}", *_yaml_lines("features", features, "    "),
            *_yaml_lines("splits", splits, "    "),
            f"    dataset_size: {sum(sp['num_bytes'] for sp in splits)}"]


def front_matter(manifest: dict[str, Any], task_category: str = "other", manifest_sha256: str | None = None) -> list[str]:
    """The Hugging Face dataset card YAML (without the `---` lines) of one dataset folder.

    `configs` maps ssmbench's splits to HF's names (val -> validation); `dataset_info.features` declares every
    per-sample field with its dtype and shape, so `datasets.load_dataset(folder)` reads exactly those columns.
    """
    n_total = sum(manifest["splits"][s]["num_samples"] for s in SPLIT_ORDER)
    q = _yaml_str
    lines = [
        f"pretty_name: {q('ssmbench ' + manifest['name'])}", "license: cc-by-4.0",
        "tags: [synthetic, long-range, benchmark, state-space-models, hdf5, ssmbench]",
        "annotations_creators: [machine-generated]", "source_datasets: [original]",
        f"size_categories: [{size_category(n_total)}]", f"task_categories: [{task_category}]",
        "configs:", *config_entry(manifest), "dataset_info:", *info_entry(manifest),
        "ssmbench:", f"  task: {q(manifest['task'])}", f"  task_version: {json.dumps(str(manifest['task_version']))}",
        f"  dataset_id: {q(manifest['dataset_id'])}", f"  root_seed: {manifest['seeding']['root_seed']}",
        f"  content_digest: {json.dumps(manifest['content_digest'])}",
    ]
    if manifest_sha256:
        lines.append(f"  manifest_sha256: {json.dumps(manifest_sha256)}")
    lines.append(f"  regenerate: {q(_regenerate_command(manifest))}")
    return lines


def _file_object(root: Path, rel: str, sha256: str | None = None, description: str = "") -> dict[str, Any]:
    path = root / rel
    return {"@type": "cr:FileObject", "@id": rel, "name": rel, "description": description, "contentUrl": rel,
            "encodingFormat": MEDIA_TYPES.get(path.suffix, "application/octet-stream"),
            "contentSize": f"{path.stat().st_size} B", "sha256": sha256 or file_sha256(path)}


def croissant(manifest: dict[str, Any], root: Path, url: str | None = None) -> dict[str, Any]:
    """Croissant 1.1 JSON-LD describing the dataset and its files, with no RecordSets.

    Croissant cannot address arrays inside HDF5 files (mlcroissant has no HDF5 reader), so, as its maintainers
    advise for HDF5 data, the document describes the dataset and its resources: `manifest.json`, `README.md` and the
    manifest's other files as FileObjects with their sha256, and each split's shards as a FileSet of
    `application/x-hdf5` files. The manifest lists every shard's size and sha256, so its hash here chains the trust
    down to every byte. The arrays are described in `description` and `variableMeasured` (name, dtype, shape).
    """
    fields = stored_fields(manifest)
    distribution: list[dict[str, Any]] = [
        _file_object(root, "manifest.json", description="The index: config, seeds, every shard with its sample "
                     "range, byte size, sha256 and the sha256 of each decoded array."),
        _file_object(root, "README.md", description="The data card (Hugging Face front matter and datasheet)."),
    ]
    for f in manifest.get("files", []):
        distribution.append(_file_object(root, f["path"], f["sha256"], f.get("describes", "")))
    for split in SPLIT_ORDER:
        info = manifest["splits"][split]
        if info["num_samples"]:
            distribution.append({
                "@type": "cr:FileSet", "@id": f"{split}-shards", "name": f"{split}-shards",
                "description": f"The {split} split: {info['num_samples']} samples in {len(info['shards'])} HDF5 "
                               "shard(s); manifest.json lists each one's sample range, size and sha256.",
                "encodingFormat": "application/x-hdf5", "includes": f"{split}/*.h5"})
    arrays = "; ".join(f"{k} ({f['dtype']}, per-sample shape ({', '.join(map(str, f['shape']))}))"
                       for k, f in fields.items())
    task = get_task(manifest["task"])
    summary = task.__doc__.strip().splitlines()[0] if task.__doc__ else manifest["task"]
    doc: dict[str, Any] = {
        "@context": CROISSANT_CONTEXT, "@type": "sc:Dataset", "conformsTo": "http://mlcommons.org/croissant/1.1",
        "name": manifest["name"],
        "description": (
            f"ssmbench synthetic dataset {manifest['name']} (task {manifest['task']}, version "
            f"{manifest['task_version']}, dataset id {manifest['dataset_id']}): {summary}. Each split is a set of "
            f"HDF5 shards whose datasets share the first dimension (the sample): {arrays}. Read them with any HDF5 "
            f"library ({codec_note(manifest)}), with ssmbench.open_dataset, or with Hugging Face "
            "datasets.load_dataset on the folder; README.md explains each field."),
        "license": "https://creativecommons.org/licenses/by/4.0/", "version": f"{manifest['task_version']}.0.0",
        "datePublished": manifest.get("created_utc", "")[:10] or None,
        "creator": {"@type": "sc:Organization", "name": "ssmbench"},
        "keywords": ["synthetic", "long-range", "benchmark", "state-space-models", "hdf5", "ssmbench",
                     manifest["task"]],
        "citeAs": BIBTEX,
        "isLiveDataset": False,
        "variableMeasured": [{"@type": "sc:PropertyValue", "name": k,
                              "description": f"{f['dtype']} array, per-sample shape ({', '.join(map(str, f['shape']))})"}
                             for k, f in fields.items()],
        "rai:dataCollection": "Machine-generated by ssmbench; every sample is a pure function of the recorded "
                              "config, root seed, split and index, so the data can be regenerated and compared by "
                              "content hash.",
        "rai:dataLimitations": "Synthetic data probing specific long-range abilities; see the task description and "
                               "the recorded deviations from the reference implementation in README.md.",
        "rai:dataUseCases": "Benchmarking and diagnosing long-range sequence models (state space models, linear "
                            "RNNs, attention).",
        "rai:personalSensitiveInformation": "None: the data is generated, not collected.",
        "distribution": distribution,
    }
    if url:
        doc["url"] = url
    return {k: v for k, v in doc.items() if v is not None}


def write_card(root: Path, manifest: dict[str, Any], url: str | None = None) -> Path:
    """Render README.md (which pins manifest.json's sha256) and then croissant.json (which pins both)."""
    atomic_write_bytes(root / "README.md", render_card(manifest, file_sha256(root / "manifest.json")).encode())
    atomic_write_json(root / "croissant.json", croissant(manifest, root, url))
    return root / "README.md"
