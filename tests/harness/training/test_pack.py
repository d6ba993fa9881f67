"""Packed members equal their single runs: three members of one architecture (own seed, own batches, own learning
rate, weight decay and schedule) trained 50 steps as one `Pack` with `PackedAdamW` end with the weights of three
single runs trained by the obvious loop (torch.optim.AdamW with the model's parameter groups, LambdaLR), in float64,
for every reference model that packs."""

from __future__ import annotations

import pytest
import torch

from ssmbench.data.read.streaming import TaskStream
from ssmbench.harness.config.schedule import lr_factor
from ssmbench.harness.metrics.objectives import objective_for
from ssmbench.harness.models.build import build_model
from ssmbench.harness.models.optim_groups import param_groups
from ssmbench.harness.training.pack import Pack, PackedAdamW, pack_problem
from ssmbench.task_config import ResolvedTask

STEPS, BATCH = 50, 4
TASK = ResolvedTask.of("cumsum", {"L": 16})
MEMBERS = [  # seed, data seed, lr, weight decay, schedule (warm-up, length)
    {"seed": 0, "data_seed": 0, "lr": 1e-3, "weight_decay": 0.0, "schedule": ("constant", 0, STEPS)},
    {"seed": 1, "data_seed": 5, "lr": 3e-3, "weight_decay": 0.1, "schedule": ("cosine", 5, STEPS)},
    {"seed": 2, "data_seed": 9, "lr": 2e-3, "weight_decay": 0.01, "schedule": ("cosine", 0, 2 * STEPS)},
]
PACKING = ["dlr", "dss_exp", "s4d", "s4", "lru", "attention", "local_attention", "sgconv", "deltanet"]


@pytest.fixture(autouse=True)
def float64():
    before = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    yield
    torch.set_default_dtype(before)


def _model(name: str, seed: int) -> torch.nn.Module:
    torch.manual_seed(seed)
    if name in ("dlr", "dss_exp", "s4d", "s4", "lru"):
        return build_model(name, TASK.spec, {"d_model": 4, "n_layers": 1, "d_state": 4})
    return build_model(name, TASK.spec, {"d_model": 8, "n_layers": 1})  # 8: the attention models' heads fit


def _batches(member: dict) -> list[tuple[torch.Tensor, torch.Tensor]]:
    stream = TaskStream(TASK, seed=member["data_seed"])
    out = []
    for step in range(STEPS):
        b = stream.train_batch(step, BATCH)
        out.append((torch.from_numpy(b["inputs"]).double(), torch.from_numpy(b["targets"]).double()))
    return out


def _single(name: str, member: dict, objective, batches) -> dict[str, torch.Tensor]:
    model = _model(name, member["seed"])
    groups = param_groups(model, lr=member["lr"], weight_decay=member["weight_decay"])
    opt = torch.optim.AdamW(groups, lr=member["lr"], weight_decay=member["weight_decay"], foreach=False)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lr_factor(*member["schedule"]))
    for x, y in batches:
        loss = objective.loss(model(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        sched.step()
    return model.state_dict()


@pytest.mark.parametrize("name", PACKING)
def test_a_packed_member_ends_where_its_single_run_ends(name):
    objective = objective_for(TASK.spec, 4, "auto", "exact", {})
    batches = [_batches(m) for m in MEMBERS]
    pack = Pack([_model(name, m["seed"]) for m in MEMBERS])
    opt = PackedAdamW(pack, MEMBERS)
    schedules = [lr_factor(*m["schedule"]) for m in MEMBERS]
    for step in range(STEPS):
        x = torch.stack([b[step][0] for b in batches])  # (N, B, T, d_input)
        y = torch.stack([b[step][1] for b in batches])
        pred = pack(x)
        loss = sum(objective.loss(pred[i], y[i]) for i in range(len(MEMBERS)))
        opt.zero_grad()
        loss.backward()
        opt.step([fn(step) for fn in schedules])
    for i, member in enumerate(MEMBERS):
        want = _single(name, member, objective, batches[i])
        got = pack.member_state(i)
        assert list(got) == list(want)
        worst = max(float((got[k] - want[k]).abs().max()) for k in want)
        assert worst <= 1e-10, f"{name} member {i}: {worst:.3g}"
        moved = max(float((want[k] - _model(name, member["seed"]).state_dict()[k]).abs().max()) for k in want)
        assert moved > 1e-4  # it trained: equal weights are not merely the initial ones


def test_members_of_other_shapes_do_not_pack():
    assert "at least two" in pack_problem([_model("dlr", 0)])
    torch.manual_seed(0)
    wide = build_model("dlr", TASK.spec, {"d_model": 16, "n_layers": 1})
    assert "member 1 differs" in pack_problem([_model("dlr", 0), wide])
    with pytest.raises(ValueError, match="do not pack"):
        Pack([_model("dlr", 0), wide])


@pytest.mark.parametrize("name", ["mamba", "las", "lstm"])
def test_a_model_that_declares_it_is_not_packed(name):
    mixer = {"mamba": "Mamba", "las": "LaS", "lstm": "LSTM"}[name]
    assert pack_problem([_model(name, 0), _model(name, 1)]) == f"{mixer} declares packable = False"


def test_a_forward_that_fails_under_vmap_is_named_in_one_line():
    class ReadsAValue(torch.nn.Module):  # a plug-in mixer that sizes something from a tensor's value
        causal = True

        def __init__(self, d_model: int, **_):
            super().__init__()
            self.scale = torch.nn.Parameter(torch.ones(d_model))

        def forward(self, x):
            return x * self.scale * float(x.abs().max().item() > 0)

    def build(seed: int) -> torch.nn.Module:
        torch.manual_seed(seed)
        return build_model(ReadsAValue, TASK.spec, {"d_model": 8, "n_layers": 1})

    problem = pack_problem([build(0), build(1)], probe=torch.randn(2, 16, 3))
    assert problem is not None and "fails under torch.func.vmap" in problem and "\n" not in problem
    assert pack_problem([_model("dlr", 0), _model("dlr", 1)], probe=torch.randn(2, 16, 3)) is None
