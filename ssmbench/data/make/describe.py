"""`ssmbench describe TASK`: version, presets, config fields with their docs, stored fields, card path."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from ...config import field_docs
from ...registry import get_task, tasks


def describe_task(name: str) -> dict[str, Any]:
    task = get_task(name)
    docs = field_docs(task.Config)
    default = task.presets[task.default_preset]
    spec = task.spec(default)
    from importlib import resources

    card = resources.files("ssmbench.data_cards").joinpath(f"{task.name}.md")
    discrepancies = ""
    if card.is_file():
        text = card.read_text()
        marker = "### Known discrepancies"
        if marker in text:
            discrepancies = text.split(marker, 1)[1].split("\n### ", 1)[0].split("\n", 1)[-1].strip()
    return {
        "task": task.name, "version": task.version, "summary": tasks.summaries()[task.name],
        "origin": tasks.origin(task.name), "preset_option": f"--{task.preset_option}",
        "default_preset": task.default_preset, "default_n": task.default_n, "default_split": dict(task.default_split),
        "fields": [{"name": f.name, "type": getattr(f.type, "__name__", str(f.type)), "default": f.default,
                    "doc": docs.get(f.name, "")} for f in dataclasses.fields(task.Config)],
        "presets": {k: v.to_dict() for k, v in task.presets.items()},
        "spec": spec.to_json(), "card": str(card), "fixed": {k: {"shape": list(v.shape), "dtype": str(v.dtype)}
                                                            for k, v in task.fixed_arrays(default).items()},
        "discrepancies": discrepancies,
    }


def format_description(info: dict[str, Any]) -> str:
    lines = [f"{info['task']} (version {info['version']}): {info['summary']}", "",
             f"select a preset with {info['preset_option']} (default {info['default_preset']}); "
             f"default --n {info['default_n']}, split {info['default_split']}", "", "config fields:"]
    for f in info["fields"]:
        lines.append(f"  {f['name']} = {json.dumps(f['default'])}  ({f['type']})  {f['doc']}")
    lines += ["", "presets:"]
    for name, cfg in info["presets"].items():
        lines.append(f"  {name}: " + ", ".join(f"{k}={json.dumps(v)}" for k, v in cfg.items()))
    spec = info["spec"]
    lines += ["", f"spec at the default preset: input_kind={spec['input_kind']} d_input={spec['d_input']} "
                  f"seq_len={spec['seq_len']} target_kind={spec['target_kind']} d_output={spec['d_output']} "
                  f"l_output={spec['l_output']} causal={spec['causal']} metrics={','.join(spec['metrics'])}",
              "stored fields (per sample; plus sample_id int64):"]
    for name, f in spec["fields"].items():
        lines.append(f"  {name}: {f['dtype']} {tuple(f['shape'])}  {f['description']}  [{f['codec']}]")
        for key, value in f.get("attrs", {}).items():
            lines.append(f"    {key}: {json.dumps(value)}")
    for name, f in info["fixed"].items():
        lines.append(f"  fixed/{name}: {f['dtype']} {tuple(f['shape'])}  (the same in every shard; also fixed.npy)")
    lines += ["", f"data card: {info['card']}"]
    if info["discrepancies"]:
        lines += ["", "deviations from the paper / reference:", info["discrepancies"]]
    return "\n".join(lines)
