"""Build and deep-verify the paper's datasets; time each; write their catalogue entries (ssmbench/catalog.json).

    python -m ssmbench.data.hub.catalog_build --root /scratch/paper             # ListOps + Pathfinder
    python -m ssmbench.data.hub.catalog_build --root /scratch/paper --atomic    # all 15
    python -m ssmbench.data.hub.catalog_build --root /tmp/p --only shift-4096,listops_subtrees-dlr
    python -m ssmbench.data.hub.catalog_build --root /tmp/p --fraction 0.1 --no-catalog   # extrapolated
    python -m ssmbench.data.hub.catalog_build --report results.json         # print the table again

(Prefix `PYTHONSAFEPATH=1` from the repository root with a wheel or strict editable install: docs/testing.md.)

The suite (`PAPER`): the 11 atomic tasks at L = 4096 with the paper's 16,000 samples (only with --atomic: the
harness streams them, see benchmarks/data/atomic_stream_vs_read.py), ListOps-Subtrees with 100,000, and
Pathfinder-Segmentation at 128, 256 and 512 with 100,000 images each under the reference label rule (the masks the
paper's Table 3 was measured on; README "Two label rules"). Each dataset is built with
`ssmbench generate ... --workers W` and then checked with `ssmbench verify --deep --workers W`, both as child processes
(niced with --nice), and measured from outside: wall seconds, CPU seconds of the process tree (wait4 rusage,
which includes the worker processes), peak RSS summed over the process tree (sampled from /proc every 0.2 s) and
the largest single process (ru_maxrss), and the folder's bytes on disk. With `--fraction F` each dataset is built
with F of its samples and the figures for the full size are extrapolated linearly (the fixed cost per command is
measured once on a tiny build and kept out of the scaling); the table says which rows were extrapolated. Results
are appended to the `--results` JSON after every dataset, so an interrupted run keeps what it measured.

After a full-size build that verifies, its entry (name, generate arguments, workers, task version, dataset id,
content digest, codec per field, every shard's size, sha256 and per-field content hashes, bytes, measured build
time) is written into `--catalog` (default: the packaged ssmbench/catalog.json); `ssmbench get NAME` rebuilds it
and checks every shard against it. `REDUCED` is the reduced-n twin of one paper entry that the tests rebuild.

A maintainer's tool, run from a checkout (the default `--results` is the checkout's
benchmarks/results/paper_suite.json); it needs nothing beyond the installed `ssmbench` command.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

ATOMIC = ("shift", "cumsum", "cummax", "reverse", "sort", "select", "select_fixed", "solve", "solve_fixed",
          "context_shift", "mips")
PAPER: dict[str, list[str]] = {
    **{f"{t}-4096": ["generate", t, "--length", "4096"] for t in ATOMIC},
    "listops_subtrees-dlr": ["generate", "listops_subtrees"],
    **{f"pathfinder-{s}-reference": ["generate", "pathfinder", "--size", str(s), "-o", "label_rule=reference"]
       for s in (128, 256, 512)},
}
COVERAGE = {f"pathfinder-{s}": ["generate", "pathfinder", "--size", str(s)] for s in (128, 256, 512)}
"""The same Pathfinder images under the default (coverage) label rule: catalogue entries, not part of the timed suite."""
ZOOLOGY = {**{f"mqar-{L}": ["generate", "mqar", "--preset", str(L)] for L in (64, 128, 256, 512)},
           "induction_heads-256": ["generate", "induction_heads", "--length", "256"]}
"""The `zoology` group at its papers' settings (Zoology Figure 2; Mamba's training length): catalogue entries, not
part of the timed suite (`--only mqar-256,...`)."""
MAD_TASKS = ("mad_in_context_recall", "mad_fuzzy_recall", "mad_noisy_recall", "mad_selective_copying",
             "mad_compression", "mad_memorization")
MAD = {f"{t}-mad": ["generate", t, "--preset", "mad"] for t in MAD_TASKS}
"""The `mad` group at mad-lab's baseline settings (16,000 samples: 12,800 train, MAD's training set size):
catalogue entries, not part of the timed suite (`--only mad_compression-mad,...`)."""
REGULAR = ("parity_check", "even_pairs", "cycle_navigation", "modular_arithmetic")
REGULAR_LENGTHS = (41, 100, 500)
WORD_GROUPS = ("S5", "A5", "A4_x_Z5", "Z60")
STATE = {**{f"{t}-{L}": ["generate", t, "--length", str(L)] for t in REGULAR for L in REGULAR_LENGTHS},
         **{f"word_problem-{g}-{k}": ["generate", "word_problem", "--preset", g, "-o", f"L={k}"]
            for g in WORD_GROUPS for k in (10, 20)}}
"""The state-tracking tasks at test lengths of their papers: the Chomsky regular tasks at the first unseen length
(41), 100 and the last (500) of the paper's 41..500; the word problems at k = 10 and 20 (the longest of jopetty/
word-problem's files). Catalogue entries, not part of the timed suite (`--only parity_check-500,...`)."""
REDUCED = {"shift-4096-ci": ["generate", "shift", "--length", "4096", "--n", "200"]}
"""A reduced-n twin of shift-4096 (same config, first samples of each split): rebuilt by the tests in seconds."""
DESCRIPTIONS = {
    **{f"{t}-4096": f"{t}, L = 4096, 16,000 samples (the paper's)" for t in ATOMIC},
    "listops_subtrees-dlr": "ListOps-Subtrees (DLR preset), 100,000 samples (the paper's)",
    **{f"pathfinder-{s}-reference": f"Pathfinder-Segmentation {s}x{s}, 100,000 images, reference label rule (the "
       "masks of the paper's Table 3)" for s in (128, 256, 512)},
    **{f"pathfinder-{s}": f"Pathfinder-Segmentation {s}x{s}, 100,000 images, coverage label rule (ssmbench's "
       "default; the same images as pathfinder-{s}-reference)".replace("{s}", str(s)) for s in (128, 256, 512)},
    **{f"mqar-{L}": f"MQAR (Zoology Figure 2: L = {L}, {k} pairs, 8,192 ids), 100,000 samples"
       for L, k in ((64, 4), (128, 8), (256, 16), (512, 64))},
    "induction_heads-256": "induction heads (Mamba 4.1.2: L = 256, 16 ids), 16,000 samples",
    **{f"{t}-mad": f"MAD {t.removeprefix('mad_').replace('_', ' ')} (mad-lab baseline settings), 16,000 samples "
       "(12,800 train: MAD's training set)" for t in MAD_TASKS},
    **{f"{t}-{L}": f"{t} (Chomsky hierarchy, regular) at L = {L}, 10,000 samples (8,000 / 1,000 / 1,000)"
       for t in REGULAR for L in REGULAR_LENGTHS},
    **{f"word_problem-{g}-{k}": f"{g} word problem (Illusion of State) at k = {k}, 100,000 samples (80,000 / 10,000 / "
       "10,000)" for g in WORD_GROUPS for k in (10, 20)},
    "shift-4096-ci": "reduced twin of shift-4096 (200 samples: the first of each split's), rebuilt by the tests on "
                     "every machine"}
GOAL_S = 30 * 60
PACKAGE = Path(__file__).resolve().parents[2]
"""ssmbench/, which holds the packaged catalog.json."""
REPO = PACKAGE.parent


def ssmbench_cli() -> str:
    exe = Path(sys.executable).with_name("ssmbench")
    return str(exe) if exe.exists() else "ssmbench"


def _tree_sample(root_pid: int) -> tuple[int, dict[tuple[int, int], float]]:
    """(resident bytes, {(pid, start tick): CPU seconds}) of `root_pid` and all its descendants, from /proc.

    CPU is read per process because the build's workers are children of multiprocessing's forkserver, whose
    rusage never reaches the parent's wait4.
    """
    children: dict[int, list[int]] = {}
    info: dict[int, tuple[int, int, float]] = {}
    tick = os.sysconf("SC_CLK_TCK")
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            children.setdefault(int(fields[1]), []).append(int(entry))
            info[int(entry)] = (int(fields[21]) * os.sysconf("SC_PAGE_SIZE"), int(fields[19]),
                                (int(fields[11]) + int(fields[12])) / tick)
        except (OSError, IndexError, ValueError):
            continue
    total, cpu, todo = 0, {}, [root_pid]
    while todo:
        pid = todo.pop()
        if pid in info:
            rss, start, seconds = info[pid]
            total += rss
            cpu[(pid, start)] = seconds
        todo += children.get(pid, [])
    return total, cpu


def measured(cmd: list[str], nice: int, log, stdout=None) -> dict:
    """Run `cmd`; wall and CPU seconds of its process tree, peak RSS of the tree and of one process.

    The wall is that of a `nice`d build and grows with whatever else the machine runs (mqar-512: 156.6 s of wall for
    18.0 s of CPU on a loaded VM, 6.7 s when idle); `ssmbench ls datasets` shows cpu_s / workers instead when the
    wall is more than twice that (`ssmbench.data.hub.catalog.build_time`), so both are kept as measured."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(["nice", "-n", str(nice), *cmd], stdout=stdout or log, stderr=log)
    peak = [0]
    cpu: dict[tuple[int, int], float] = {}
    done = threading.Event()

    def poll() -> None:
        while not done.wait(0.1):
            rss, seen = _tree_sample(proc.pid)
            peak[0] = max(peak[0], rss)
            cpu.update(seen)

    thread = threading.Thread(target=poll, daemon=True)
    thread.start()
    _, status, usage = os.wait4(proc.pid, 0)
    done.set()
    thread.join()
    proc.returncode = os.waitstatus_to_exitcode(status)
    return {"rc": proc.returncode, "wall_s": time.perf_counter() - t0,
            "cpu_s": max(usage.ru_utime + usage.ru_stime, sum(cpu.values())),
            "peak_rss_tree": peak[0], "peak_rss_process": usage.ru_maxrss * 1024}


def folder_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def write_catalog(path: Path, entries: dict[str, dict]) -> None:
    """Merge `entries` into the catalogue at `path`: one line per field and per shard, so diffs stay readable."""
    cat = json.loads(path.read_text()) if path.exists() else {"format": 1, "datasets": {}}
    cat["datasets"].update(entries)
    blocks = []
    for name, entry in sorted(cat["datasets"].items()):
        fields = [f'  {json.dumps(k)}: {json.dumps(v)}' for k, v in entry.items() if k != "shards"]
        shards = ",\n".join(f"   {json.dumps(sh)}" for sh in entry.get("shards", []))
        fields.append(f'  "shards": [\n{shards}]')
        blocks.append(f" {json.dumps(name)}: {{\n" + ",\n".join(fields) + "}")
    text = '{"format": 1, "datasets": {\n' + ",\n".join(blocks) + "}}\n"
    assert json.loads(text) == cat
    path.write_text(text)


def with_n(argv: list[str], n: int) -> list[str]:
    return [*argv, "--n", str(n)]


def paper_n(argv: list[str]) -> int:
    """The full sample count of a paper dataset (from `generate --dry-run --json`)."""
    out = subprocess.run([ssmbench_cli(), *argv, "--dry-run", "--json", "--out", "/nonexistent"], check=True,
                         capture_output=True, text=True).stdout
    return sum(json.loads(out)["sizes"].values())


def run_one(name: str, argv: list[str], args, log) -> dict:
    full_n = paper_n(argv)
    n = max(64, int(full_n * args.fraction)) if args.fraction < 1 else full_n
    cmd = argv if n == full_n else with_n(argv, n)
    out = args.root / ("fraction" if n != full_n else "full")
    row = {"name": name, "argv": argv, "n": n, "full_n": full_n, "workers": args.workers,
           "load_before": os.getloadavg()}
    answer = args.root / f"{name}.generate.json"
    with open(answer, "w") as stdout:
        build = measured([ssmbench_cli(), *cmd, "--workers", str(args.workers), "--out", str(out), "-q", "--json"],
                         args.nice, log, stdout)
    log.flush()
    try:
        folder = Path(json.loads(answer.read_text())["path"])
    except (ValueError, KeyError):
        folder = None
    row["build"] = build
    if build["rc"] or folder is None:
        row["error"] = f"generate exited {build['rc']}"
        return row
    row["folder"] = str(folder)
    row["disk_bytes"] = folder_bytes(folder)
    row["verify"] = verify(folder, args, log)
    row["load_after"] = os.getloadavg()
    row["extrapolated"] = n != full_n
    row["scale"] = full_n / n
    if not row["verify"]["rc"] and n == full_n and args.catalog:
        from ssmbench.data.hub.get import entry_from_folder

        write_catalog(args.catalog, {name: entry_from_folder(folder, argv, args.workers, build, DESCRIPTIONS[name])})
    return row


def verify(folder: Path, args, log) -> dict:
    """`ssmbench verify --deep` of a built folder, with the build's worker count decoding shards, measured."""
    return {**measured([ssmbench_cli(), "verify", str(folder), "--deep", "--workers", str(args.workers), "--json"],
                       args.nice, log), "workers": args.workers}


def table(rows: list[dict], fixed: dict | None) -> str:
    """Markdown table of the rows, then totals over the suite's rows (all, and without the atomic folders).

    Wall columns are measured; "2 cores" is (build CPU + verify CPU) / workers, i.e. what the
    rows would take on dedicated cores, for runs on a shared machine. Rows outside `PAPER` are listed after the
    totals and not counted.
    """
    def scaled(r: dict, part: str, key: str) -> float:
        v = r[part][key]
        if not r.get("extrapolated"):
            return v
        base = (fixed or {}).get(part, {}).get(key, 0.0)
        return base + (v - base) * r["scale"]

    def figures(r: dict) -> dict[str, float]:
        bw, bc = scaled(r, "build", "wall_s"), scaled(r, "build", "cpu_s")
        vw, vc = scaled(r, "verify", "wall_s"), scaled(r, "verify", "cpu_s")
        disk = r["disk_bytes"] * (r["scale"] if r.get("extrapolated") else 1)
        cores = bc / r.get("workers", 2) + vc / r["verify"].get("workers", 1)  # older runs verified serially
        return {"wall": bw + vw, "cpu": bc + vc, "cores": cores, "disk": disk,
                "bw": bw, "bc": bc, "vw": vw, "vc": vc}

    def line(r: dict) -> str:
        if "verify" not in r:
            return f"| {r['name']} | {r['n']:,} | failed: {r.get('error')} | | | | |"
        f = figures(r)
        mark = " (extrapolated)" if r.get("extrapolated") else ""
        return (f"| {r['name']} | {r['full_n']:,}{mark} | {f['bw'] / 60:.1f} min | {f['bc'] / 60:.1f} min | "
                f"{f['vw'] / 60:.1f} / {f['vc'] / 60:.1f} min | {r['build']['peak_rss_tree'] / 2**20:.0f} / "
                f"{r['build']['peak_rss_process'] / 2**20:.0f} MiB | {f['disk'] / 2**30:.2f} GiB |")

    def total(label: str, chosen: list[dict]) -> str:
        fs = [figures(r) for r in chosen]
        s = {k: sum(f[k] for f in fs) for k in ("wall", "cpu", "cores", "disk")}
        return (f"| **{label}** ({len(chosen)}) | | **{s['wall'] / 60:.1f} min** build + verify, measured | "
                f"{s['cpu'] / 60:.1f} min CPU | {s['cores'] / 60:.1f} min on 2 dedicated cores (CPU / workers) | | "
                f"{s['disk'] / 2**30:.1f} GiB |")

    order = {name: i for i, name in enumerate([*PAPER, *COVERAGE, *ZOOLOGY, *REDUCED])}
    rows = sorted(rows, key=lambda r: order.get(r["name"], len(order)))
    suite = [r for r in rows if r["name"] in PAPER and "verify" in r]
    lines = ["| dataset | samples | build wall | build CPU | verify --deep wall / CPU | peak RSS (tree / process) "
             "| disk |", "|---|---|---|---|---|---|---|"]
    lines += [line(r) for r in rows if r["name"] in PAPER]
    lines.append(total(f"the suite, goal {GOAL_S / 60:.0f} min", suite))
    folders = [r for r in suite if r["name"].split("-")[0] not in ATOMIC]
    if folders != suite:
        lines.append(total("without the atomic folders (the default)", folders))
    lines += [line(r) for r in rows if r["name"] not in PAPER]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--root", type=Path, help="where the datasets are built (needs ~10 GiB for the full suite)")
    ap.add_argument("--only", help="comma-separated names from the suite (default: ListOps and Pathfinder)")
    ap.add_argument("--atomic", action="store_true", help="also the 11 atomic datasets (the harness streams them, "
                    "so they are not written by default)")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--nice", type=int, default=10)
    ap.add_argument("--fraction", type=float, default=1.0, help="build this fraction of each and extrapolate")
    ap.add_argument("--results", type=Path, default=REPO / "benchmarks" / "results" / "paper_suite.json")
    ap.add_argument("--catalog", type=Path, default=PACKAGE / "catalog.json")
    ap.add_argument("--no-catalog", dest="catalog", action="store_const", const=None)
    ap.add_argument("--report", type=Path, help="print the table of a results JSON and exit")
    ap.add_argument("--verify-only", action="store_true",
                    help="re-run only the deep verify of the named rows' folders in --results (the builds stay)")
    ap.add_argument("--write-catalog", action="store_true",
                    help="with --report: write the catalogue entries of that run's verified full-size datasets")
    args = ap.parse_args(argv)
    if args.report:
        data = json.loads(args.report.read_text())
        print(table(data["rows"], data.get("fixed")))
        if args.catalog and args.write_catalog:  # entries for the verified full-size rows of that run
            from ssmbench.data.hub.get import entry_from_folder

            write_catalog(args.catalog, {
                r["name"]: entry_from_folder(Path(r["folder"]), r["argv"], args.workers, r["build"],
                                             DESCRIPTIONS[r["name"]])
                for r in data["rows"] if r.get("verify", {}).get("rc") == 0 and not r.get("extrapolated")})
        return 0
    if args.root is None:
        ap.error("--root is required")
    names = args.only.split(",") if args.only else [n for n in PAPER if args.atomic or n.split("-")[0] not in ATOMIC]
    unknown = [n for n in names if n not in {**PAPER, **COVERAGE, **ZOOLOGY, **MAD, **STATE, **REDUCED}]
    if unknown:
        ap.error(f"unknown dataset(s) {unknown}; the suite is {', '.join(PAPER)}")
    args.root.mkdir(parents=True, exist_ok=True)
    data = json.loads(args.results.read_text()) if args.results.exists() else {"rows": []}
    data["machine"] = {"cpus": os.cpu_count(), "python": sys.version.split()[0]}
    with open(args.root / "paper_suite.log", "a") as log:
        if args.fraction < 1 and "fixed" not in data:  # the per-command cost that does not scale with n
            tiny = measured([ssmbench_cli(), "generate", "shift", "--length", "64", "--n", "10", "--workers",
                             str(args.workers), "--out", str(args.root / "tiny"), "-q", "--overwrite"], args.nice, log)
            data["fixed"] = {"build": tiny, "verify": {"wall_s": 0.0, "cpu_s": 0.0}}
        if args.verify_only:
            for row in data["rows"]:
                if row["name"] in names and "folder" in row:
                    row["verify"] = verify(Path(row["folder"]), args, log)
                    print(f"{row['name']}: verify {row['verify']['wall_s']:.0f} s wall, rc {row['verify']['rc']}",
                          flush=True)
                    args.results.write_text(json.dumps(data, indent=1) + "\n")
            names = []
        for name in names:
            row = run_one(name, {**PAPER, **COVERAGE, **ZOOLOGY, **MAD, **STATE, **REDUCED}[name], args, log)
            data["rows"] = [r for r in data["rows"] if r["name"] != name] + [row]
            args.results.write_text(json.dumps(data, indent=1) + "\n")
            print(f"{name}: build {row['build']['wall_s']:.0f} s wall, {row['build']['cpu_s']:.0f} s CPU"
                  + (f"; verify {row['verify']['wall_s']:.0f} s, rc {row['verify']['rc']}" if "verify" in row
                     else f"; {row.get('error')}"), flush=True)
    print(table(data["rows"], data.get("fixed")))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
