"""Distribution commands: download, repack, publish (thin shells over `ssmbench.data.{download,repack,publish}`)."""

from __future__ import annotations

import json
import sys

import click

from .app import cli, emit


@cli.command("download", epilog="Exit codes: 3 when a checksum disagrees (nothing wrong is kept), 1 when a host "
             "is unreachable or a file is missing there; re-run the same command to resume.\n\nExamples:\n\n\b\n"
             "  ssmbench download pathfinder-512 --to data/ --catalog catalog.json\n"
             "  ssmbench download https://host/path/pathfinder-512/ --to data/ --split test\n"
             "  ssmbench download hf://datasets/ORG/ssmbench@REVISION/shift-4096 --dry-run")
@click.argument("source", metavar="NAME|URL")
@click.option("--to", "to", type=click.Path(file_okay=False), help="Data root; the dataset lands in TO/<name>. "
              "[default: $SSMBENCH_DATA or ./data]")
@click.option("--catalog", "catalogs", multiple=True, type=click.Path(dir_okay=False),
              help="Catalogue JSON file naming datasets (repeatable; $SSMBENCH_CATALOG is read too).")
@click.option("--split", "splits", multiple=True, help="Fetch only this split: train, val or test (repeatable).")
@click.option("--include", "include", multiple=True, metavar="GLOB",
              help="Fetch only shards whose path matches, e.g. 'train/shard-0000[0-3]-*' (repeatable).")
@click.option("--dry-run", is_flag=True, help="Print the number of files and bytes to fetch; write nothing.")
@click.option("--workers", type=int, default=4, help="Parallel transfers.")
@click.option("--retries", type=int, default=4, help="Extra attempts per file and source, with exponential backoff.")
@click.option("--timeout", type=float, default=30.0, help="Seconds to wait for a server before retrying.")
@click.option("--no-verify", is_flag=True, help="Skip the final structural check (every file is still checksummed).")
@click.option("-q", "--quiet", is_flag=True, help="No progress bar on stderr.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def download_command(source: str, to: str | None, catalogs: tuple[str, ...], splits: tuple[str, ...],
                     include: tuple[str, ...], dry_run: bool, workers: int, retries: int, timeout: float,
                     no_verify: bool, quiet: bool, as_json: bool) -> None:
    """Download a dataset folder by catalogue name or URL: parallel, resumable, every file verified."""
    from ..data.hub.catalog import find_entry
    from ..data.hub.download import download_dataset, looks_like_url
    from ..plain import human_bytes

    if workers < 1 or retries < 0:
        raise click.UsageError("--workers must be >= 1 and --retries >= 0")
    target = source if looks_like_url(source) else find_entry(source, list(catalogs))
    if not isinstance(target, str) and not target.sources:  # a catalogue entry that is rebuilt, not hosted
        if dry_run or splits or include:
            raise click.UsageError(f"{source} has no mirror: it is rebuilt whole (`ssmbench get {source}`), so "
                                   "--dry-run, --split and --include do not apply")
        _get(source, to, list(catalogs), None, quiet, as_json)
        return
    result = download_dataset(target, to=to, splits=list(splits) or None, include=list(include) or None,
                              dry_run=dry_run, workers=workers, retries=retries, timeout=timeout,
                              progress=not quiet, verify=not no_verify)
    absent = f"; {len(result.absent)} shard(s) left out by --split/--include" if result.absent else ""
    if dry_run:
        human = (f"{result.path}: would fetch {len(result.to_fetch)} file(s), {human_bytes(result.bytes_to_fetch)} "
                 f"({result.present_files} already present and verified){absent}")
        if not as_json:
            human += "".join(f"\n  {f.path}" for f in result.to_fetch)
    else:
        human = (f"{result.path}: complete; {result.fetched_files} file(s) fetched "
                 f"({human_bytes(result.fetched_bytes)}), {result.present_files} already present{absent}")
    emit(result.to_json(), as_json, human)


@cli.command("get", epilog="Exit code 3 when a shard differs from the catalogue (nothing is moved into place; "
             "the message names the shard, the field and this machine's library versions and CPU). A folder "
             "already there is checked file by file before it is called present. A second `get` of the same "
             "dataset into the same TO waits for the first, then checks its folder. Exit code 130 on Ctrl-C or "
             "SIGTERM (a rebuild's generate process and workers stop with it); re-run the same command to continue."
             "\n\nExamples:"
             "\n\n\b\n  ssmbench ls datasets                       # the entries, with size and build time\n"
             "  ssmbench get shift-4096 --to data/\n  ssmbench get pathfinder-128-reference --workers 4")
@click.argument("name")
@click.option("--to", "to", type=click.Path(file_okay=False), help="Data root; the dataset lands in TO/NAME. "
              "[default: $SSMBENCH_DATA or ./data]")
@click.option("--catalog", "catalogs", multiple=True, type=click.Path(dir_okay=False),
              help="Catalogue JSON file (repeatable; the built-in one and $SSMBENCH_CATALOG are always read).")
@click.option("--workers", type=int, help="Worker processes for a rebuild, and threads that hash the shards "
              "[default: the entry's; up to 4 threads].")
@click.option("-q", "--quiet", is_flag=True, help="No progress bars on stderr.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def get_command(name: str, to: str | None, catalogs: tuple[str, ...], workers: int | None, quiet: bool,
                as_json: bool) -> None:
    """Get a catalogue dataset: from its mirror if it has one, else rebuilt here; every shard checked."""
    if workers is not None and workers < 1:
        raise click.UsageError("--workers must be >= 1")
    _get(name, to, list(catalogs), workers, quiet, as_json)


def _get(name: str, to: str | None, catalogs: list[str], workers: int | None, quiet: bool, as_json: bool) -> None:
    """Ctrl-C and SIGTERM end it with one line "interrupted ...; re-run the same command to continue", exit 130;
    a rebuild's pool workers end with it (also when this process is killed outright)."""
    from ..data.hub.get import get_dataset, sigterm_interrupts
    from ..data.make.jobs import BuildInterrupted

    try:
        with sigterm_interrupts():
            result = get_dataset(name, to, catalog=catalogs, workers=workers, quiet=quiet,
                                 on_wait=lambda line: click.echo(line, err=True))
    except BuildInterrupted as exc:  # while rebuilding: the message says where the shards done are kept
        click.echo(exc.message, err=True)
        sys.exit(exc.exit_code)
    except KeyboardInterrupt:
        click.echo(f"interrupted: `ssmbench get {name}` stopped before it finished; re-run the same command to "
                   "continue", err=True)
        sys.exit(130)
    for note in result.notes:
        click.echo(f"note: {note}", err=True)
    how = {"present": "already present", "downloaded": "downloaded", "built": "rebuilt here"}[result.how]
    emit(result.to_json(), as_json, f"{result.path}: {how}; {len(result.checked)} shard(s) match the catalogue")


@cli.command("repack", epilog="Content hashes (and content_digest) stay the same; the new manifest records "
             "`repacked_from`. Readers of Zstd copies need `import hdf5plugin` (ssmbench's loader does it).\n\n"
             "Examples:\n\n\b\n"
             "  ssmbench repack data/pathfinder-512 --codec zstd            # -> data/pathfinder-512-zstd\n"
             "  ssmbench repack data/pathfinder-512 --codec zstd:5 --out /scratch\n"
             "  ssmbench repack data/pathfinder-512 --codec zstd --in-place\n"
             "  ssmbench repack data/pathfinder-512-zstd --codec gzip:4 --out release-src/")
@click.argument("path", type=click.Path(exists=True, file_okay=False))
@click.option("--codec", default="zstd:3", help="zstd[:LEVEL] or gzip[:LEVEL] for every compressed field.")
@click.option("--out", type=click.Path(file_okay=False),
              help="Folder to write the copy into (as OUT/<name>) [default: PATH-<codec> beside PATH].")
@click.option("--in-place", is_flag=True, help="Replace the shards one by one, atomically, instead of copying.")
@click.option("-q", "--quiet", is_flag=True, help="No progress bar on stderr.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def repack_command(path: str, codec: str, out: str | None, in_place: bool, quiet: bool, as_json: bool) -> None:
    """Rewrite a dataset's shards with another codec (e.g. Zstd for faster local reads), same content."""
    from ..data.hub.repack import repack

    if in_place and out:
        raise click.UsageError("--in-place and --out exclude each other")
    result = repack(path, codec=codec, out=out, in_place=in_place, progress=not quiet)
    emit(result.to_json(), as_json, f"{result.path}: {result.shards} shard(s) repacked to {result.codec}, "
                                      f"{result.bytes_before} -> {result.bytes_after} bytes; content hashes equal")


@cli.command("publish", epilog="Prints the upload command; uploads only with --upload (needs huggingface_hub, "
             "logged in).\n\nExamples:\n\n\b\n"
             "  ssmbench publish data/pathfinder-512 --to release/\n"
             "  ssmbench publish data/shift-4096 --to release/ --repo-id ORG/ssmbench")
@click.argument("path", type=click.Path(exists=True, file_okay=False))
@click.option("--to", "to", required=True, type=click.Path(file_okay=False),
              help="Release folder; the dataset goes to TO/<name>, with TO/README.md listing every dataset in TO.")
@click.option("--repo-id", help="Hugging Face dataset repository (ORG/NAME) for the printed commands and the "
              "Croissant url.")
@click.option("--upload", is_flag=True, help="Upload TO to --repo-id now with huggingface_hub (optional).")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def publish_command(path: str, to: str, repo_id: str | None, upload: bool, as_json: bool) -> None:
    """Prepare a release folder (verified shards, card, Croissant, SHA256SUMS) and print the upload command."""
    from ..data.hub.publish import publish, upload_release

    if upload and not repo_id:
        raise click.UsageError("--upload needs --repo-id")
    result = publish(path, to, repo_id=repo_id)
    if upload:
        result.uploaded = upload_release(result.release_root, repo_id)
    if as_json:
        click.echo(json.dumps(result.to_json(), sort_keys=True))
        return
    click.echo(f"{result.path}: {result.files} file(s), {result.num_bytes} bytes, SHA256SUMS written; "
               f"collection card {result.release_root / 'README.md'}")
    click.echo("upload with:")
    for line in result.commands:
        click.echo(f"  {line}")
    if result.uploaded:
        click.echo(f"uploaded: {result.uploaded}")
