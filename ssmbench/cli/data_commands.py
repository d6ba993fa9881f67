"""Dataset commands: ls, describe, generate, verify, card, preview (thin shells over `ssmbench.data`)."""

from __future__ import annotations

import json
import os
import sys

import click

from ..errors import SsmbenchError
from .app import cli, emit


@cli.command("ls", epilog="Examples:\n\n\b\n  ssmbench ls\n  ssmbench ls groups\n  ssmbench ls models\n  ssmbench ls presets\n"
                          "  ssmbench ls presets --verbose   # each paper row's keys: value, source, other readings\n"
                          "  ssmbench ls datasets")
@click.argument("kind", type=click.Choice(["tasks", "groups", "models", "evaluators", "presets", "datasets",
                                          "catalog"]), default="tasks")
@click.option("--catalog", "catalogs", multiple=True, type=click.Path(dir_okay=False),
              help="Also list this catalogue JSON file (repeatable; $SSMBENCH_CATALOG is always read).")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
@click.option("--verbose", "verbose", is_flag=True,
              help="With `presets`: for each paper row (and its per-task exceptions) every key with a recorded "
                   "source -- the value used, its source, and the other readings with theirs -- then the row's "
                   "other keys.")
def ls_command(kind: str, catalogs: tuple[str, ...], as_json: bool, verbose: bool) -> None:
    """List registered tasks, task groups, models, evaluators or training presets, or the download catalogue."""
    from .. import registry

    if verbose and kind != "presets":
        raise click.UsageError("--verbose applies to `ssmbench ls presets`")
    if kind == "presets":
        if verbose:
            from ..harness.config.presets import list_presets, list_presets_verbose_text

            click.echo(json.dumps(list_presets(verbose=True), sort_keys=True) if as_json
                       else list_presets_verbose_text())
            return
        from .eval_commands import list_presets_text

        click.echo(list_presets_text(as_json))
        return
    if kind == "catalog" or (kind == "tasks" and catalogs):  # `ls --catalog FILE` lists the catalogue too
        kind = "datasets"
    if kind == "datasets":
        from ..data.hub.catalog import catalog_table, load_catalog

        catalog = load_catalog(list(catalogs))
        click.echo(json.dumps({k: catalog[k].to_json() for k in catalog}, sort_keys=True) if as_json
                   else catalog_table(catalog))
        return
    if kind == "groups":  # `ssmbench eval --task GROUP`: declared by the tasks (their policy's groups)
        from ..harness.config.task_groups import task_groups

        items = {name: ", ".join(members) for name, members in task_groups().items()}
    else:
        items = getattr(registry, kind).summaries()
    if as_json:
        click.echo(json.dumps(items, sort_keys=True))
        return
    if not items:
        click.echo(f"(no {kind} yet)")
    width = max((len(k) for k in items), default=0)
    for name, summary in items.items():
        click.echo(f"{name:<{width}}  {summary}")


@cli.command("describe", epilog="Examples:\n\n\b\n  ssmbench describe shift\n  ssmbench describe solve --json")
@click.argument("task")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def describe_command(task: str, as_json: bool) -> None:
    """Show a task's version, presets, config fields, stored fields and shapes, and its data card."""
    from ..data.make.describe import describe_task, format_description

    info = describe_task(task)
    click.echo(json.dumps(info, sort_keys=True, default=str) if as_json else format_description(info))


@cli.command("generate", context_settings={"ignore_unknown_options": True, "allow_extra_args": True},
             epilog="Any config key can also be given as an option, e.g. --num-shifts 4 or --min-length 500 "
                    "(same as -o num_shifts=4).\n\nExamples:\n\n\b\n"
                    "  ssmbench generate shift --length 512 --n 1000 --out data/\n"
                    "  ssmbench generate shift --length 4096 --out data/ --workers 2\n"
                    "  ssmbench generate select --length 512 -o M=16\n"
                    "  ssmbench generate shift --shard-index 0 --num-shards 4   # one job of an array")
@click.argument("task")
@click.option("--length", "length", type=int, help="Sequence length L of an atomic task (selects the preset named L).")
@click.option("--size", type=int, help="Image side of pathfinder: a preset (128, 256, 512) or any other "
              "side from 32 up (the nearest preset with its lengths scaled).")
@click.option("--preset", help="Named preset of the ListOps tasks (e.g. dlr, short, lra).")
@click.option("-n", "--n", "n", type=int, help="Total samples over all splits [default: the task's].")
@click.option("--split", help="Split fractions or counts, e.g. train=0.8,val=0.1,test=0.1 [default: the task's].")
@click.option("--seed", type=int, default=0, help="Root seed of the dataset.")
@click.option("--out", type=click.Path(file_okay=False), help="Data root; the folder is OUT/<name>. "
              "[default: $SSMBENCH_DATA or ./data]")
@click.option("--workers", type=int, default=1, help="Worker processes (the bytes are the same for any count).")
@click.option("--config", "config_file", type=click.Path(exists=True, dir_okay=False),
              help="TOML or JSON file of config keys.")
@click.option("-o", "overrides", multiple=True, metavar="KEY=VALUE", help="Override a config key (repeatable).")
@click.option("--samples-per-shard", type=int, help="Samples per HDF5 shard [default: automatic].")
@click.option("--codec", help="Replace the codec of every compressed field (gzip:L, zstd:L) for local builds.")
@click.option("--shard-index", type=int, help="Job-array mode: build only plan shards j with j % K == i (no finalize).")
@click.option("--num-shards", type=int, help="Job-array mode: the number of jobs K.")
@click.option("--dry-run", is_flag=True, help="Print the plan and the size estimate, write nothing.")
@click.option("--overwrite", is_flag=True, help="Replace an existing folder that holds another build.")
@click.option("-q", "--quiet", is_flag=True, help="No progress bar or plan summary on stderr.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
@click.pass_context
def generate_command(ctx: click.Context, task: str, length: int | None, size: int | None, preset: str | None,
                     n: int | None, split: str | None, seed: int, out: str | None, workers: int,
                     config_file: str | None, overrides: tuple[str, ...], samples_per_shard: int | None,
                     codec: str | None, shard_index: int | None, num_shards: int | None, dry_run: bool,
                     overwrite: bool, quiet: bool, as_json: bool) -> None:
    """Build (or resume) a dataset folder of HDF5 shards with a manifest and a data card.

    Ctrl-C or SIGTERM stops with "interrupted: k/n shards done; ..." and exit status 130; a full disk with one line naming
    the folder and the space still needed, exit status 1. Re-running the same command continues either.
    """
    from ..data.make.jobs import BuildInterrupted, interrupts
    from ..data.make.space import DiskFullError, exit_now

    with interrupts():
        try:
            _generate(ctx, task, length, size, preset, n, split, seed, out, workers, config_file, overrides,
                      samples_per_shard, codec, shard_index, num_shards, dry_run, overwrite, quiet, as_json)
        except BuildInterrupted as exc:
            click.echo(exc.message, err=True)
            exit_now(exc.exit_code)
        except KeyboardInterrupt:  # outside the build itself (planning, the estimate)
            click.echo("interrupted; re-run the same command to continue", err=True)
            exit_now(130)
        except DiskFullError as exc:
            click.echo(f"error: {exc.message}", err=True)
            exit_now(exc.exit_code)


def _generate(ctx: click.Context, task: str, length: int | None, size: int | None, preset: str | None,
              n: int | None, split: str | None, seed: int, out: str | None, workers: int, config_file: str | None,
              overrides: tuple[str, ...], samples_per_shard: int | None, codec: str | None,
              shard_index: int | None, num_shards: int | None, dry_run: bool, overwrite: bool, quiet: bool,
              as_json: bool) -> None:
    from ..data.make.jobs import check_interrupt
    from ..task_config import extra_overrides, resolve_config

    if (shard_index is None) != (num_shards is None):
        raise click.UsageError("--shard-index and --num-shards go together")
    if num_shards is not None and not 0 <= shard_index < num_shards:  # type: ignore[operator]
        raise click.UsageError(f"--shard-index must be in [0, {num_shards}), got {shard_index}")
    if workers < 1:
        raise click.UsageError(f"--workers must be >= 1, got {workers}")
    if seed < 0:
        raise click.UsageError(f"--seed must be >= 0, got {seed}")
    extra = extra_overrides(ctx.args)
    task_obj, config, note = resolve_config(task, length=length, size=size, preset=preset,
                                            config_file=config_file, overrides=[*overrides, *extra])
    from ..data.folder.locations import data_root
    from ..data.make.generate import check_fits, generate_dataset, plan_build
    from ..data.make.shards import parse_split

    split_map = parse_split(split) if split else None
    if not dry_run:  # before the plan: millions of shards take minutes to plan
        check_fits(task_obj.name, config, out, n, split_map, seed, codec)
    plan = plan_build(task_obj.name, config, n, split_map, seed, samples_per_shard, codec)
    est = None
    if not quiet or dry_run:
        from ..data.make.estimate import estimate_build

        est = estimate_build(task_obj, config, plan, workers, later=dry_run)  # a dry run: the build comes later
        check_interrupt()
        lines = [note] if note else []
        lines.append(f"{plan.name}: {sum(plan.sizes.values())} samples "
                     f"({', '.join(f'{k} {v}' for k, v in plan.sizes.items())}) in {len(plan.shards)} shards of "
                     f"up to {plan.samples_per_shard}; about {est['disk_human']} on disk, about "
                     f"{est['time_human']} with {workers} worker(s) (estimated) -> {data_root(out) / plan.name}")
        if dry_run:
            emit({"dry_run": True, "name": plan.name, "sizes": plan.sizes, "num_shards": len(plan.shards),
                   "samples_per_shard": plan.samples_per_shard, "estimate": est,
                   "path": str(data_root(out) / plan.name)}, as_json, "\n".join(lines))
            return
        click.echo("\n".join(lines), err=True)
    explicit = [p for p in ctx.params if ctx.get_parameter_source(p) == click.core.ParameterSource.COMMANDLINE]
    result = generate_dataset(task_obj.name, config, out=out, n=n, split=split_map, seed=seed, workers=workers,
                              samples_per_shard=samples_per_shard, codec=codec, shard_index=shard_index,
                              num_shards=num_shards, overwrite=overwrite, quiet=quiet,
                              argv=sys.argv[1:] if sys.argv and "ssmbench" in os.path.basename(sys.argv[0]) else
                              ["generate", task, *ctx.args], explicit=explicit, plan=plan, estimate=est)
    obj = {"path": str(result.path), "name": result.name, "finalized": result.finalized,
           "shards_written": result.shards_written, "shards_skipped": result.shards_skipped}
    if result.manifest:
        obj.update(dataset_id=result.manifest["dataset_id"], content_digest=result.manifest["content_digest"],
                   sizes={k: v["num_samples"] for k, v in result.manifest["splits"].items()})
    state = "complete" if result.finalized else f"job {shard_index}/{num_shards} done (not finalized)"
    emit(obj, as_json, f"{result.path}: {state}; {result.shards_written} shard(s) written, "
                        f"{result.shards_skipped} already done")


@cli.command("verify", epilog="Exit code 3 when anything disagrees with the manifest (or, with --catalog, the "
                              "catalogue).\n\nExamples:\n\n\b\n  ssmbench verify data/shift-4096\n"
                              "  ssmbench verify data/shift-4096 --deep --workers 2\n  ssmbench verify data/shift-4096 --catalog")
@click.argument("path", type=click.Path(file_okay=False))
@click.option("--deep", is_flag=True, help="Decode every chunk, recompute content hashes, run the task's oracle.")
@click.option("--regenerate", type=int, help="Regenerate K samples and compare bytes [default: 8 with --deep].")
@click.option("--catalog", "catalog", is_flag=False, flag_value="", default=None, metavar="[FILE]",
              help="Also check every shard against the folder's catalogue entry (the built-in catalogue, "
                   "$SSMBENCH_CATALOG and FILE when given).")
@click.option("--workers", type=int, default=1, show_default=True,
              help="Processes that decode shards for --deep, threads that hash shards for --catalog (1: up to 4 "
                   "threads there); the report is the same for any count.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def verify_command(path: str, deep: bool, regenerate: int | None, catalog: str | None, workers: int,
                   as_json: bool) -> None:
    """Check a dataset folder's files, checksums and structure against its manifest."""
    from ..data.hub.verify import raise_for, verify_dataset

    if workers < 1:
        raise click.UsageError(f"--workers must be >= 1, got {workers}")
    report = verify_dataset(path, deep=deep, regenerate=regenerate, workers=workers)
    against = None
    if catalog is not None and report.ok:
        from ..data.hub.get import verify_catalog

        against = verify_catalog(path, catalog or None, workers=workers if workers > 1 else None)
    if as_json:
        click.echo(json.dumps({**report.to_json(), **({"catalog": against} if against else {})}, sort_keys=True))
    else:
        for problem in report.problems:
            click.echo(f"FAIL {problem}")
        if report.ok:
            click.echo(f"OK {path}: {report.checked_files} files" +
                       (f", {report.checked_samples} samples decoded, {report.oracle_rows} oracle rows, "
                        f"{report.regenerated} regenerated" if deep or report.regenerated else ""))
        if against:
            click.echo(f"OK {against['checked_shards']} shard(s) match catalogue entry {against['entry']!r} "
                       f"({against['catalog']})" + "".join(f"\nnote: {n}" for n in against["notes"]))
        if report.absent:
            splits = sorted({p.split("/")[0] for p in report.absent})
            click.echo(f"ABSENT {len(report.absent)} shard(s) not downloaded (split(s) {', '.join(splits)}); "
                       f"fetch them with `ssmbench download` without --split/--include")
    raise_for(report)


@cli.command("card", epilog="Examples:\n\n\b\n  ssmbench card data/shift-512")
@click.argument("path", type=click.Path(exists=True, file_okay=False))
def card_command(path: str) -> None:
    """(Re)render a dataset folder's README.md data card and croissant.json from its manifest, and draw its pinned
    preview.png again where that is missing or changed."""
    import errno
    from pathlib import Path

    from ..data.folder.manifest import read_manifest_json
    from ..data.make.cards import write_card
    from ..data.make.preview import restore_preview
    from ..errors import DatasetError

    manifest = read_manifest_json(path)
    try:
        if restore_preview(Path(path), manifest):
            click.echo(str(Path(path) / "preview.png"))
        click.echo(str(write_card(Path(path), manifest)))
    except OSError as exc:
        if exc.errno not in (errno.EACCES, errno.EPERM, errno.EROFS):
            raise
        raise DatasetError(f"{path} is read-only: `card` rewrites its README.md and croissant.json in place",
                           f"copy it somewhere writable (cp -r {path} COPY) and run `ssmbench card COPY`") from None


@cli.command("preview", epilog="Examples:\n\n\b\n  ssmbench preview data/pathfinder-128 --n 8 --out grid.png")
@click.argument("path", type=click.Path(exists=True, file_okay=False))
@click.option("-n", "--n", "n", type=int, default=8, help="Number of samples to show.")
@click.option("--out", type=click.Path(dir_okay=False),
              help="PNG to write, outside DIR [default: ./<name>-preview.png; a temporary file when the working "
                   "folder is DIR or read-only].")
@click.option("--split", default="val", help="Split to draw samples from.")
def preview_command(path: str, n: int, out: str | None, split: str) -> None:
    """Render a PNG of samples: images beside colour-coded masks, or sequences as plots; prints where it went.

    Never into DIR: the dataset's own preview.png is pinned by its manifest (`verify` checks it)."""
    from pathlib import Path

    from ..data.folder.manifest import read_manifest_json

    read_manifest_json(path)
    try:
        from ..data.make.preview import render_preview
    except ImportError:
        raise SsmbenchError("preview is not available in this installation") from None
    written = render_preview(Path(path), n=n, out=Path(out) if out else None, split=split)
    if out is None and written.parent.resolve() != Path.cwd().resolve():
        click.echo("note: the working folder is the dataset or read-only, so the preview went to the temporary "
                   "folder (choose with --out)", err=True)
    click.echo(str(written))
