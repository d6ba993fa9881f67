"""The evaluation harness, by purpose; imports go one way, top to bottom (tests/repo/test_import_rules.py):

- entry points, here: `evaluation` (`ssmbench.evaluate`, resume, train-and-score), `scoring` (`--checkpoint`),
  `length_sweep` (`--lengths`), `suites` (several tasks in one folder), `dispatch` (what an eval command does);
- `training/`: the loop, the memory check, model facts, task figures;
- `models/` (the backbone, model building, causality, optimiser groups) and `results/` (run folder, its lock,
  checkpoints, `EvalResult`, plots, loggers, `compare`);
- `config/` (request, run config, the resolver, presets, task groups, model names, LR schedule, dataset folders),
  `feed/` (training batches and evaluation sets) and `metrics/` (losses, metric states, objectives, headlines);
- `runtime/`: ranks and devices, CPU threads, the time limit, mixed precision.

`backbone` and `optim_groups` here only keep the paths of docs/models.md working for plug-ins.
"""
