"""Download throughput on loopback: `ssmbench download` against curl on the same files, in the same run.

    PYTHONSAFEPATH=1 python benchmarks/data/download.py --folder data/shift-4096           # a built dataset folder
    PYTHONSAFEPATH=1 python benchmarks/data/download.py                                     # builds shift-4096 x 4,000

The folder is served by a threaded HTTP/1.1 server on 127.0.0.1 (Python's http.server, one thread per
connection, files sent with `socket.sendfile`). Timed, alternating, `--repeat` times each (median reported):

* `curl`: one curl process fetching every file of the folder (shards, manifest, card) over one kept-alive
  connection, to a fresh folder; the plain transfer, no checking.
* `curl + sha256sum`: the same, then `sha256sum` of every file: the least a careful user would run.
* `ssmbench download URL --workers W` into a fresh data root: manifest, parallel transfers, a sha256 of every
  file (computed while streaming), one fsync per file, the final structural check.

The result line is ssmbench's throughput as a fraction of curl's (goal: >= 0.5), with the load average at the
start and the end, since other processes may share the machine.
"""

from __future__ import annotations

import argparse
import http.server
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from functools import partial
from pathlib import Path


class SendfileHandler(http.server.SimpleHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args: object) -> None:
        pass

    def copyfile(self, source, outputfile) -> None:  # noqa: ANN001  (http.server's signature)
        self.wfile.flush()
        self.connection.sendfile(source)


def serve(folder: Path) -> tuple[http.server.ThreadingHTTPServer, str]:
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), partial(SendfileHandler, directory=str(folder.parent)))
    httpd.daemon_threads = True
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    return httpd, f"http://127.0.0.1:{httpd.server_address[1]}/{folder.name}/"


def files_of(folder: Path) -> list[str]:
    manifest = json.loads((folder / "manifest.json").read_text())
    shards = [sh["path"] for s in ("train", "val", "test") for sh in manifest["splits"][s]["shards"]]
    return [*shards, *(f["path"] for f in manifest.get("files", [])), "manifest.json", "README.md", "croissant.json"]


def timed(cmd: list[str], env: dict | None = None) -> float:
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, env=env)
    return time.perf_counter() - t0


def run_curl(url: str, files: list[str], dest: Path, hash_after: bool) -> float:
    shutil.rmtree(dest, ignore_errors=True)
    args = ["curl", "-sSf", "--create-dirs"]
    for f in files:
        args += ["-o", str(dest / f), url + f]
    t0 = time.perf_counter()
    subprocess.run(args, check=True)
    if hash_after:
        subprocess.run(["sha256sum", *[str(dest / f) for f in files]], check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - t0


def run_ssmbench(url: str, dest: Path, workers: int) -> float:
    shutil.rmtree(dest, ignore_errors=True)
    exe = Path(sys.executable).with_name("ssmbench")
    return timed([str(exe), "download", url, "--to", str(dest), "--workers", str(workers), "-q"],
                 env={**os.environ, "PYTHONSAFEPATH": "1"})


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--folder", type=Path, help="a dataset folder to serve [default: build shift-4096 x 4,000]")
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args(argv)
    print(f"# {os.cpu_count()} CPUs, load average at start {os.getloadavg()}")
    with tempfile.TemporaryDirectory(prefix="ssmbench-dl-") as tmp:
        tmp = Path(tmp)
        folder = args.folder
        if folder is None:
            exe = Path(sys.executable).with_name("ssmbench")
            subprocess.run([str(exe), "generate", "shift", "--length", "4096", "--n", "4000", "--out", str(tmp / "src"),
                            "-q", "--workers", "2"], check=True)
            folder = tmp / "src" / "shift-4096"
        files = files_of(folder)
        size = sum((folder / f).stat().st_size for f in files)
        httpd, url = serve(folder)
        print(f"# {folder.name}: {len(files)} files, {size / 1e6:.1f} MB, served from {url}")
        times: dict[str, list[float]] = {"curl": [], "curl + sha256sum": [], "ssmbench": []}
        for _ in range(args.repeat):
            times["curl"].append(run_curl(url, files, tmp / "curl", False))
            times["curl + sha256sum"].append(run_curl(url, files, tmp / "curl", True))
            times["ssmbench"].append(run_ssmbench(url, tmp / "ssm", args.workers))
        httpd.shutdown()
    for name, ts in times.items():
        med = statistics.median(ts)
        print(f"{name:<18} median {med:6.2f} s  {size / 1e6 / med:7.1f} MB/s   (runs: "
              f"{', '.join(f'{t:.2f}' for t in ts)})")
    ratio = statistics.median(times["curl"]) / statistics.median(times["ssmbench"])
    print(f"ssmbench throughput / curl's: {ratio:.2f} (goal >= 0.5: {'PASS' if ratio >= 0.5 else 'FAIL'}); "
          f"workers {args.workers}; load average at end {os.getloadavg()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
