"""Run a recorded `generate` command (a manifest's or a catalogue entry's `argv`) in this process, without the CLI.

`ssmbench get` rebuilds a catalogue dataset this way: the entry's `build.argv` is read as `ssmbench generate`
reads it (the same options, any other `--key value` as a config key), resolved as the CLI resolves it, and built
by `generate_dataset`, so the folder is the one `ssmbench <argv>` writes. The manifest records the command as
the CLI would (`command.argv` without output options, `command.explicit` naming the options given).

>>> options, explicit, extra = parse_generate_argv(["generate", "shift", "--length", "64", "-n", "40",
...                                                 "-o", "num_shifts=4", "--min-gap=2", "--workers", "2"])
>>> options["task"], options["length"], options["n"], options["overrides"], options["workers"], extra
('shift', 64, 40, ['num_shifts=4'], 2, ['--min-gap=2'])
>>> explicit
['length', 'n', 'overrides', 'workers', 'task']
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ...errors import ConfigError

if TYPE_CHECKING:
    from .generate import GenerateResult

__all__ = ["parse_generate_argv", "generate_from_argv"]

_VALUED = {"--length": ("length", int), "--size": ("size", int), "--preset": ("preset", str), "-n": ("n", int),
           "--n": ("n", int), "--split": ("split", str), "--seed": ("seed", int), "--out": ("out", str),
           "--workers": ("workers", int), "--config": ("config_file", str), "-o": ("overrides", str),
           "--samples-per-shard": ("samples_per_shard", int), "--codec": ("codec", str),
           "--shard-index": ("shard_index", int), "--num-shards": ("num_shards", int)}
"""`ssmbench generate`'s options that take a value: (parameter name, type), as `ssmbench.cli.data_commands` declares them."""
_FLAGS = {"--dry-run": "dry_run", "--overwrite": "overwrite", "-q": "quiet", "--quiet": "quiet", "--json": "as_json"}


def parse_generate_argv(argv: Sequence[str]) -> tuple[dict[str, Any], list[str], list[str]]:
    """(options by parameter name, the parameters given in the order given, other `--key value` arguments) of a
    `generate` command line, with or without its leading "generate". A later option replaces an earlier one."""
    args = list(argv[1:] if argv and argv[0] == "generate" else argv)
    options: dict[str, Any] = {"overrides": []}
    explicit: list[str] = []
    extra: list[str] = []
    i = 0
    while i < len(args):
        arg = args[i]
        name, eq, value = arg.partition("=") if arg.startswith("--") else (arg, "", "")
        if name in _VALUED:
            if not eq:
                if i + 1 >= len(args):
                    raise ConfigError(name, "expects a value")
                value, i = args[i + 1], i + 1
            key, kind = _VALUED[name]
            try:
                parsed = kind(value)
            except ValueError:
                raise ConfigError(name, f"expects {kind.__name__}, got {value!r}") from None
            if key == "overrides":
                options[key].append(parsed)
            else:
                options[key] = parsed
        elif arg in _FLAGS:
            key = _FLAGS[arg]
            options[key] = True
        elif arg.startswith("-") or "task" in options:
            extra.append(arg)
            if arg.startswith("--") and not eq and i + 1 < len(args) and not args[i + 1].startswith("-"):
                extra.append(args[i + 1])
                i += 1
            i += 1
            continue
        else:
            key = "task"
            options[key] = arg
        if key not in explicit:
            explicit.append(key)
        i += 1
    if "task" not in options:
        raise ConfigError("argv", f"no task in the generate command {' '.join(argv)!r}")
    return options, [*(k for k in explicit if k != "task"), "task"], extra  # click lists its argument last


def generate_from_argv(argv: Sequence[str]) -> GenerateResult:
    """Build what `ssmbench <argv>` builds (`argv` starts with "generate"), here; the manifest records `argv` as
    the CLI would have recorded it."""
    from ...task_config import extra_overrides, resolve_config
    from .generate import check_fits, generate_dataset, plan_build
    from .shards import parse_split

    options, explicit, extra = parse_generate_argv(argv)
    if options.get("dry_run") or options.get("num_shards") is not None:
        raise ConfigError("argv", "a recorded build command cannot be a dry run or one job of an array")
    task, config, _ = resolve_config(options["task"], length=options.get("length"), size=options.get("size"),
                                     preset=options.get("preset"), config_file=options.get("config_file"),
                                     overrides=[*options["overrides"], *extra_overrides(extra)])
    split = parse_split(options["split"]) if options.get("split") else None
    out, n, seed, codec = options.get("out"), options.get("n"), options.get("seed", 0), options.get("codec")
    check_fits(task.name, config, out, n, split, seed, codec)
    plan = plan_build(task.name, config, n, split, seed, options.get("samples_per_shard"), codec)
    return generate_dataset(task.name, config, out=out, n=n, split=split, seed=seed, workers=options.get("workers", 1),
                            codec=codec, overwrite=bool(options.get("overwrite")), quiet=bool(options.get("quiet")),
                            argv=list(argv), explicit=explicit, plan=plan)
