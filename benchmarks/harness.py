"""Harness overhead and data waiting: `ssmbench.evaluate` against a bare forward+backward+step loop, same run.

For each model and setting, two measurements on the same device:

* bare: the same model (built by the harness's model builder), one batch generated up front and kept on the
  device, `zero_grad; loss = mse(model(x), y); backward; step` for N steps;
* harness: `ssmbench.evaluate(...)` for N steps with fresh batches from the background workers (the paper's
  protocol), reporting its own time per step (evaluation excluded) and the share of it spent waiting for data.

Targets: harness overhead < 10 % and data waiting < 5 % (MIPS included, whose samples cost ~10 ms each at L=4096).

    python benchmarks/harness.py --settings quick --steps 100                  # this CPU
    python benchmarks/harness.py --settings paper quick --device cuda --steps 200   # a GPU machine
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time

import torch

SETTINGS = {
    # name: (preset, task, batch) -- `paper` is Table 5's atomic setting (L = 4096, H = 128, batch 16)
    "paper": ("paper", "cumsum", None),
    "quick": ("quick", "cumsum", None),
    "paper-mips": ("paper", "mips", None),
}
MODELS = ("dlr", "attention", "s4d", "lru")


def bare_loop(cfg, steps: int, device: torch.device) -> tuple[float, int]:
    """Seconds per step and peak bytes of a plain loop over one resident batch."""
    from ssmbench.harness.batches import EvalSet
    from ssmbench.harness.optim_groups import param_groups
    from ssmbench.harness.trainer import setup

    s = setup(cfg)
    t = cfg.train
    opt = torch.optim.AdamW(param_groups(s.bare, lr=t.lr, weight_decay=t.weight_decay, lr_ssm=t.lr_ssm), lr=t.lr,
                            betas=(t.beta1, t.beta2), eps=t.eps, weight_decay=t.weight_decay)
    batch = EvalSet.build(cfg.task, cfg.task_config, cfg.data.seed, "train", cfg.train.batch_size)
    x, y = batch.inputs.to(device), batch.targets.to(device)
    model = s.model.train()
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)

    def step() -> None:
        opt.zero_grad(set_to_none=True)
        loss = torch.nn.functional.mse_loss(model(x).float(), y.float())
        loss.backward()
        opt.step()

    for _ in range(3):
        step()
    _sync(device)
    t0 = time.perf_counter()
    for _ in range(steps):
        step()
    _sync(device)
    dt = (time.perf_counter() - t0) / steps
    return dt, _peak(device)


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _peak(device: torch.device) -> int:
    if device.type == "cuda":
        return int(torch.cuda.max_memory_allocated(device))
    import resource

    return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * 1024


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--settings", nargs="+", default=["quick"], choices=sorted(SETTINGS))
    ap.add_argument("--models", nargs="+", default=list(MODELS))
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--workers", type=int, default=2, help="data.workers of the harness runs")
    ap.add_argument("--json", dest="json_out", help="also write the rows to this JSON file")
    args = ap.parse_args()

    from ssmbench.harness.evaluation import evaluate
    from ssmbench.harness.run_config import RunConfig

    device = torch.device(args.device if args.device != "cuda" else "cuda:0")
    rows = []
    print(f"device {device}, torch {torch.__version__}, threads {torch.get_num_threads()}, steps {args.steps}",
          file=sys.stderr)
    for setting in args.settings:
        preset, task, _ = SETTINGS[setting]
        for model in args.models:
            keys = {"train.steps": args.steps + 5, "train.eval_every": args.steps + 5, "eval.val_samples": 16,
                    "eval.test_samples": 16, "data.workers": args.workers, "hardware.device": args.device,
                    "train.log_every": 10 ** 9}
            try:
                cfg = RunConfig.resolve(model, task, preset, overrides=keys)
            except Exception as exc:  # noqa: BLE001 - a model without a row is reported, not fatal
                print(f"skip {setting}/{model}: {exc}", file=sys.stderr)
                continue
            bare, bare_peak = bare_loop(cfg, args.steps, device)
            with tempfile.TemporaryDirectory() as tmp:
                r = evaluate(config=cfg, out=f"{tmp}/run", quiet=True)
            m = r.metrics
            row = {"setting": setting, "task": task, "model": model, "L": cfg.task_config.get("L"),
                   "batch": cfg.train.batch_size, "params": m["parameters"], "bare_ms": bare * 1e3,
                   "harness_ms": m["time_per_step_s"] * 1e3, "overhead": m["time_per_step_s"] / bare - 1,
                   "data_wait": m["data_wait_share"], "peak_mib_bare": bare_peak / 2 ** 20,
                   "peak_mib_harness": m["peak_memory_bytes"] / 2 ** 20}
            rows.append(row)
            print(f"{setting:10s} {model:10s} L={row['L']:<5} B={row['batch']:<3} bare {row['bare_ms']:8.2f} ms  "
                  f"harness {row['harness_ms']:8.2f} ms  overhead {100 * row['overhead']:+6.1f} %  "
                  f"data wait {100 * row['data_wait']:5.1f} %  peak {row['peak_mib_harness']:8.0f} MiB", flush=True)
    if args.json_out:
        with open(args.json_out, "w") as f:
            json.dump(rows, f, indent=2)


if __name__ == "__main__":
    main()
