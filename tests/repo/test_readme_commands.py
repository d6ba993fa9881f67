"""The README cannot drift from the CLI: every `ssmbench ...` command it shows names commands, options and choices
that exist, every Python block compiles, and the README stays a usage document (at most 450 lines).

Commands are taken from the fenced shell blocks (no language, `bash`, `sh`, `shell`, `console`; a line that starts
with `ssmbench `, also after `$ ` or inside `torchrun ... ssmbench ...`) and from inline code spans that start with
`ssmbench `. Each is split with shlex and walked down the click tree of `ssmbench.cli` in-process (no subprocess):
the subcommand must exist and render its `--help`, every `--option` / `-o` it names must be one of that command's
options, a value given to a choice (`ls presets`, `--precision bf16`) must be one of the choices, and the config
keys that can be checked without building a model must exist: `generate`'s extra `--key value` options and `-o key=`
keys (fields of the task's config), `eval`'s `-o train.* / eval.* / data.* / hardware.*` keys (fields of the run
config) and bare or `task.` keys of a named task.
"""

from __future__ import annotations

import dataclasses
import re
import shlex

import click
import pytest
from click.testing import CliRunner

from ssmbench.cli import cli
from support import REPO

README = REPO / "README.md"
MAX_LINES = 450
SHELL_LANGS = {"", "bash", "sh", "shell", "console"}
FENCE = re.compile(r"^```([\w+-]*)[^\n]*\n(.*?)^```[ \t]*$", re.M | re.S)
INLINE = re.compile(r"(?<!`)`(ssmbench [^`]+)`(?!`)")
STOP_TOKENS = {"&&", "||", "|", ";", ">", ">>", "2>", "2>&1"}
PLACEHOLDER_KEYS = {"key", "KEY"}
"""`-o key=value` and `-o KEY=VALUE` stand for any key."""


def _blocks(text: str) -> list[tuple[str, str, int]]:
    """(language, body, line number of the opening fence) of every fenced block."""
    return [(m.group(1).lower(), m.group(2), text.count("\n", 0, m.start()) + 1) for m in FENCE.finditer(text)]


def _command_tokens(line: str) -> list[str] | None:
    """The tokens after `ssmbench` of a shell line that runs ssmbench (directly, after `$ `, or under torchrun)."""
    line = line.strip()
    if line.startswith("$ "):
        line = line[2:].lstrip()
    if not (line.startswith("ssmbench ") or line.startswith("torchrun ")):
        return None
    tokens = shlex.split(line, comments=True)
    if "ssmbench" not in tokens:
        return None
    tokens = tokens[tokens.index("ssmbench") + 1:]
    for i, tok in enumerate(tokens):
        if tok in STOP_TOKENS:
            return tokens[:i]
    return tokens


def readme_commands(text: str) -> list[tuple[str, list[str]]]:
    """(where, tokens after `ssmbench`) for every ssmbench command the README shows."""
    found = []
    for lang, body, start in _blocks(text):
        if lang not in SHELL_LANGS:
            continue
        lines = body.replace("\\\n", " ").splitlines()
        for offset, line in enumerate(lines, 1):
            tokens = _command_tokens(line)
            if tokens is not None:
                found.append((f"README.md:{start + offset}: {line.strip()}", tokens))
    prose = FENCE.sub(lambda m: "\n" * m.group(0).count("\n"), text)
    for m in INLINE.finditer(prose):
        span = " ".join(m.group(1).split())
        found.append((f"README.md:{prose.count(chr(10), 0, m.start()) + 1}: `{span}`", _command_tokens(span) or []))
    return found


def _is_placeholder(value: str) -> bool:
    """TASK, NAME, RUN, ..., <commit>: stands for a value rather than being one."""
    return value in ("...", "…") or "<" in value or "|" in value or (value.isupper() and len(value) > 1)


def _task_fields(task: str) -> set[str] | None:
    if _is_placeholder(task) or "," in task:
        return None
    from ssmbench.registry import get_task

    try:
        return {f.name for f in dataclasses.fields(get_task(task).Config)}
    except Exception:  # a group name (atomic, table1, ...) or no task: bare keys are not checked
        return None


def _run_sections() -> dict[str, set[str]]:
    from ssmbench.harness.config import run_config as rc

    return {name: {f.name for f in dataclasses.fields(cls)} for name, cls in
            (("train", rc.TrainConfig), ("eval", rc.EvalConfig), ("data", rc.DataConfig),
             ("hardware", rc.HardwareConfig))}


def check_command(tokens: list[str]) -> list[str]:
    """Problems with one command line (tokens after `ssmbench`); empty when it parses."""
    group: click.Command = cli
    path: list[str] = []
    while isinstance(group, click.Group):
        while tokens and tokens[0].startswith("-"):
            if tokens[0] not in {o for p in group.params for o in (*p.opts, *p.secondary_opts)} | {"-h", "--help"}:
                return [f"`ssmbench {' '.join(path)}` has no option {tokens[0]}"]
            tokens = tokens[1:]
        if not tokens:
            return []
        name, tokens = tokens[0], tokens[1:]
        sub = group.get_command(click.Context(group), name)
        if sub is None:
            return [f"`ssmbench {' '.join(path)}` has no command {name!r}"]
        group, path = sub, [*path, name]
    command = group
    help_run = CliRunner().invoke(cli, [*path, "--help"])
    problems = [] if help_run.exit_code == 0 else [f"`ssmbench {' '.join(path)} --help` failed: {help_run.output}"]
    options = {o: p for p in command.params if isinstance(p, click.Option) for o in (*p.opts, *p.secondary_opts)}
    arguments = [p for p in command.params if isinstance(p, click.Argument)]
    extra_ok = bool((command.context_settings or {}).get("ignore_unknown_options"))
    positionals: list[str] = []
    given: list[tuple[str, str | None]] = []  # (option name, value)
    i = 0
    while i < len(tokens):
        tok = tokens[i]
        i += 1
        if tok == "--":
            positionals += tokens[i:]
            break
        if not tok.startswith("-") or tok == "-" or re.fullmatch(r"-\d[\d.e+-]*", tok):
            positionals.append(tok)
            continue
        name, eq, inline_value = tok.partition("=") if tok.startswith("--") else (tok[:2], "", tok[2:])
        value: str | None = inline_value if (eq or inline_value) else None
        if name in ("-h", "--help"):
            continue
        param = options.get(name)
        if param is None:
            if extra_ok and name.startswith("--"):
                if value is None and i < len(tokens):
                    value, i = tokens[i], i + 1
                given.append((name, value))
                continue
            problems.append(f"`ssmbench {' '.join(path)}` has no option {name}")
            if value is None and i < len(tokens) and not tokens[i].startswith("-"):
                i += 1  # its value, most likely: not an extra positional argument
            continue
        if not (param.is_flag or param.count) and value is None and i < len(tokens):
            value, i = tokens[i], i + 1
        given.append((name, value))
        if isinstance(param.type, click.Choice) and value is not None and not _is_placeholder(value):
            if value not in param.type.choices:
                problems.append(f"{name} {value}: not one of {list(param.type.choices)}")
    positionals = [v for v in positionals if v not in ("...", "…")]  # `ssmbench eval ... --time-limit 3h50m`
    if all(a.nargs >= 0 for a in arguments) and len(positionals) > sum(a.nargs for a in arguments):
        problems.append(f"`ssmbench {' '.join(path)}` takes {sum(a.nargs for a in arguments)} argument(s), "
                        f"got {positionals}")
    for arg, value in zip(arguments, positionals, strict=False):
        if isinstance(arg.type, click.Choice) and not _is_placeholder(value) and value not in arg.type.choices:
            problems.append(f"`ssmbench {' '.join(path)}` {arg.name} {value!r}: not one of {list(arg.type.choices)}")
    problems += _check_keys(path, options, positionals, given)
    return problems


def _check_keys(path: list[str], options: dict[str, click.Option], positionals: list[str],
                given: list[tuple[str, str | None]]) -> list[str]:
    """Config keys: generate's extra options and -o keys, eval's -o keys where they can be checked here."""
    problems = []
    overrides = [v.partition("=")[0].strip() for n, v in given if n == "-o" and v]
    if path == ["generate"] and positionals:
        fields = _task_fields(positionals[0])
        if fields is not None:
            extra = [n[2:] for n, _ in given if n not in options]
            for key in [*extra, *overrides]:
                if key not in PLACEHOLDER_KEYS and "<" not in key and key.replace("-", "_") not in fields:
                    problems.append(f"generate {positionals[0]}: no config key {key!r} (fields: {sorted(fields)})")
    if path == ["eval"]:
        task = next((v for n, v in given if n == "--task" and v), None)
        fields = _task_fields(task) if task else None
        sections = _run_sections()
        for key in overrides:
            key = key.lstrip("~").replace("-", "_")
            head, dot, rest = key.partition(".")
            if key in PLACEHOLDER_KEYS or "<" in key or head == "model" or _is_placeholder(rest or head):
                continue
            if dot and head in sections:
                if rest not in sections[head]:
                    problems.append(f"eval -o {key}: {head} has no key {rest!r}")
            elif dot and head != "task":
                problems.append(f"eval -o {key}: unknown section {head!r}")
            elif fields is not None and (rest if dot else head) not in fields:
                problems.append(f"eval -o {key}: task {task} has no config key (fields: {sorted(fields)})")
    return problems


@pytest.fixture(scope="module")
def readme() -> str:
    return README.read_text()


def test_readme_is_at_most_450_lines(readme):
    assert len(readme.splitlines()) <= MAX_LINES, (
        f"README.md has {len(readme.splitlines())} lines (at most {MAX_LINES}): it is the usage document; "
        "measurements go to docs/benchmarks.md, results to docs/results.md")


def test_every_readme_command_parses(readme):
    commands = readme_commands(readme)
    assert len(commands) >= 30, f"only {len(commands)} ssmbench commands found in README.md: is the extraction broken?"
    problems = [f"{where}\n    {p}" for where, tokens in commands for p in check_command(tokens)]
    assert problems == [], "README commands that do not match the CLI:\n" + "\n".join(problems)


def test_every_readme_python_block_compiles(readme):
    blocks = [(body, start) for lang, body, start in _blocks(readme) if lang in ("python", "py")]
    assert blocks, "README.md has no python block"
    for body, start in blocks:
        compile(body, f"README.md (python block at line {start})", "exec")


@pytest.mark.parametrize(("line", "expected"), [
    ("ssmbench generate shift --lenght 512", "no config key 'lenght'"),
    ("ssmbench verify data/shift-512 --deeep", "has no option --deeep"),
    ("ssmbench eval --model dlr --task shift --precison bf16", "has no option --precison"),
    ("ssmbench ls preset", "'preset': not one of"),
    ("ssmbench eval --model dlr --precision bf8", "--precision bf8: not one of"),
    ("ssmbench evaluate --model dlr", "has no command 'evaluate'"),
    ("ssmbench verify data/a data/b", "takes 1 argument(s)"),
    ("ssmbench generate listops_subtrees --min-lenght 500", "no config key 'min-lenght'"),
    ("ssmbench generate select -o N=4", "no config key 'N'"),
    ("ssmbench eval --model dlr --task cumsum -o train.stepz=5", "train has no key 'stepz'"),
    ("torchrun --nproc-per-node 2 --no-python ssmbench eval --modle dlr", "has no option --modle"),
    ("$ ssmbench describe shift --jsn", "has no option --jsn"),
])
def test_the_check_catches_a_drifted_command(line, expected):
    tokens = _command_tokens(line)
    assert tokens is not None
    assert any(expected in p for p in check_command(tokens)), check_command(tokens)


@pytest.mark.parametrize("line", [
    "ssmbench generate select --length 100 --M 4 --dry-run --json --out data/",
    "ssmbench generate listops_subtrees --n 2000 --min-length 500 --max-length=2000 -o pad_to=2048",
    "ssmbench eval --model dlr --task select_fixed --preset paper -o values=zeros -o ~model.d_state -o train.lr=1e-4",
    "ssmbench ls presets --verbose",
    "ssmbench -v ls",
    "ssmbench eval --resume runs/RUN --time-limit 3h50m",
])
def test_the_check_accepts_good_commands(line):
    assert check_command(_command_tokens(line) or []) == []


def built_folders(text: str, before: int | None = None) -> set[str]:
    """The dataset folders that the README's own `generate` commands build (their default names); `before`: only
    commands above that line."""
    from ssmbench.data.make.generate import dataset_name
    from ssmbench.task_config import resolve_config

    generate = cli.commands["generate"]
    named = {o: p for p in generate.params if isinstance(p, click.Option) for o in p.opts}
    built = set()
    for where, tokens in readme_commands(text):
        if tokens[:1] != ["generate"] or len(tokens) < 2 or _is_placeholder(tokens[1]):
            continue
        if before is not None and int(where.split(":")[1]) >= before:
            continue
        given: dict[str, str] = {}
        keys: list[str] = []
        rest = tokens[2:]
        while rest:
            name, _, value = rest[0].partition("=")
            option = named.get(name)
            takes_value = option is None or not option.is_flag
            if takes_value and not value and len(rest) > 1:
                value, rest = rest[1], rest[2:]
            else:
                rest = rest[1:]
            if name == "-o":
                keys.append(value)
            elif option is None and name.startswith("--"):
                keys.append(f"{name[2:].replace('-', '_')}={value}")
            else:
                given[name] = value
        task, config, _ = resolve_config(tokens[1], length=int(given["--length"]) if "--length" in given else None,
                                         size=int(given["--size"]) if "--size" in given else None,
                                         preset=given.get("--preset"), overrides=keys)
        built.add(dataset_name(task, config))
    return built


def test_python_blocks_read_folders_the_readme_builds(readme):
    """A snippet reading `data/NAME` must read a folder that a README command above it builds (it read
    data/pathfinder-512, which only a download from an unhosted catalogue would have made by then)."""
    reads = [(m.group(1), start) for lang, body, start in _blocks(readme) if lang in ("python", "py")
             for m in re.finditer(r"[\"']data/([\w.-]+)", body)]
    assert reads, "no python block reads a data/ folder: is the extraction broken?"
    assert {"shift-512", "pathfinder-128", "pathfinder-512"} <= built_folders(readme), built_folders(readme)
    missing = [(name, line) for name, line in reads if name not in built_folders(readme, before=line)]
    assert missing == [], f"python blocks read folders no README command above them builds: {missing}"
