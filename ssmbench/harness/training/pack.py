"""Packed members: several runs of one architecture trained as one stacked model, one step for all of them.

A sweep's members that share a model architecture and its shapes (seeds, learning rates, weight decays) differ only
in their numbers. `Pack` stacks the members' parameters along a new leading run dimension
(`torch.func.stack_module_state`) and runs the architecture once over all of them (`torch.func.vmap` of
`torch.func.functional_call`): one forward, one backward and one optimiser update a step instead of one per member,
which is what a host-bound step (a small model, the CPU, a GPU waiting on launches) pays for.

Each member stays exactly the run it would be alone:

* its initial weights are its own model's, built from its own seed and then stacked;
* it sees its own batch (inputs stacked as (N, B, ...));
* its gradient is its own: the members share no parameter, so the gradient of the summed losses with respect to
  member i's slice is the gradient of member i's loss;
* `PackedAdamW` applies PyTorch's AdamW update elementwise with each member's learning rate (after its schedule),
  weight decay, betas and eps, per parameter group (`models.optim_groups`: the SSM parameters' own rate and decay),
  broadcast along the run dimension.

So a packed member's weights equal its single run's to float rounding (`tests/harness/training/test_pack.py`: float64,
50 steps, within 1e-10). Dropout draws differ from a single run's (vmap draws each member's mask independently).

Example (three seeds of a tiny DLR on cumsum, one step):
    >>> import torch
    >>> from ssmbench.harness.models.build import build_model
    >>> from ssmbench.task_config import ResolvedTask
    >>> spec = ResolvedTask.of("cumsum", {"L": 16}).spec
    >>> models = []
    >>> for seed in range(3):
    ...     _ = torch.manual_seed(seed)
    ...     models.append(build_model("dlr", spec, {"d_model": 4, "n_layers": 1}))
    >>> pack = Pack(models)
    >>> pack(torch.randn(3, 2, 16, 3)).shape  # (members, batch, l_output, d_output)
    torch.Size([3, 2, 16, 1])
    >>> opt = PackedAdamW(pack, [dict(lr=1e-3, weight_decay=0.0)] * 3)
    >>> pack(torch.randn(3, 2, 16, 3)).square().sum().backward(); opt.step()
    >>> torch.equal(pack.member_state(1)["encoder.weight"], models[1].state_dict()["encoder.weight"])
    False
"""

from __future__ import annotations

import copy
import math
import warnings
from collections.abc import Mapping, Sequence
from typing import Any

import torch
from torch import nn


class Pack:
    """N models of one architecture as one stacked model: every parameter and buffer gains a leading (N,) axis."""

    def __init__(self, models: Sequence[nn.Module], *, checked: bool = False) -> None:
        from torch.func import stack_module_state

        problem = None if checked else pack_problem(models)
        if problem:
            raise ValueError(f"these models do not pack: {problem}")
        self.n = len(models)
        params, buffers = stack_module_state(list(models))  # name -> (N, ...), parameters are new leaves
        self.params: dict[str, torch.Tensor] = params
        self.buffers: dict[str, torch.Tensor] = buffers
        self.base = copy.deepcopy(models[0]).to("meta")  # the architecture; its own tensors are never read
        self.members = list(models)  # kept for their parameter groups and hints

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        """(N, B, ...) inputs, member i's batch at [i] -> (N, B, ...) outputs."""
        from torch.func import functional_call, vmap

        def one(params: dict[str, torch.Tensor], buffers: dict[str, torch.Tensor], xi: torch.Tensor) -> torch.Tensor:
            return functional_call(self.base, (params, buffers), (xi,))

        with warnings.catch_warnings():  # ops without a batching rule (CPU flash attention) loop over the members
            warnings.filterwarnings("ignore", message="There is a performance drop because we have not yet")
            return vmap(one, randomness="different")(self.params, self.buffers, x)

    def train(self, mode: bool = True) -> Pack:
        self.base.train(mode)
        return self

    def eval(self) -> Pack:
        return self.train(False)

    def parameters(self) -> list[torch.Tensor]:
        return list(self.params.values())

    def store(self) -> None:
        """Copy every member's slice back into its own model (before its validation or checkpoint)."""
        with torch.no_grad():
            for i, model in enumerate(self.members):
                for name, t in [*model.named_parameters(), *model.named_buffers()]:
                    t.copy_((self.params.get(name) if name in self.params else self.buffers[name])[i])

    def member_state(self, i: int) -> dict[str, torch.Tensor]:
        """Member i's weights as its single model's `state_dict` (what its checkpoints hold)."""
        state = {name: t[i].detach().clone() for name, t in {**self.params, **self.buffers}.items()}
        order = list(self.members[i].state_dict())
        return {name: state[name] for name in order}


def pack_problem(models: Sequence[nn.Module], probe: torch.Tensor | None = None) -> str | None:
    """Why `models` cannot be one stack, in one line (None if they can): fewer than two; a module that declares
    `packable = False` (a plug-in's way to say so up front; Mamba and LaS do); parameters and buffers that differ
    in name, shape or dtype; or, given `probe` (one member's (B, ...) inputs), a stacked forward that fails under
    `torch.func.vmap`."""
    if len(models) < 2:
        return "a pack needs at least two members"
    refusing = next((m for m in models[0].modules() if getattr(m, "packable", True) is False), None)
    if refusing is not None:
        return f"{type(refusing).__name__} declares packable = False"

    def layout(model: nn.Module) -> list[tuple[str, tuple[int, ...], torch.dtype]]:
        tensors = [*model.named_parameters(), *model.named_buffers()]
        return [(name, tuple(t.shape), t.dtype) for name, t in tensors]

    first = layout(models[0])
    for i, model in enumerate(models[1:], 1):
        other = layout(model)
        if other != first:
            diff = next((f"{a[0]} {a[1:]} vs {b[0]} {b[1:]}" for a, b in zip(first, other, strict=False) if a != b),
                        f"{len(first)} vs {len(other)} tensors")
            return f"member {i} differs from member 0 ({diff})"
    if probe is not None:
        try:
            with torch.no_grad():
                Pack(models, checked=True)(probe.unsqueeze(0).expand(len(models), *probe.shape))
        except Exception as exc:  # noqa: BLE001 - any failure under vmap means one by one; the reason is reported
            first = (str(exc).splitlines() or [type(exc).__name__])[0]
            return f"its forward fails under torch.func.vmap ({type(exc).__name__}: {first[:160]})"
    return None


class PackedAdamW:
    """PyTorch's AdamW update (no amsgrad), applied to stacked parameters with per-member hyperparameters.

    `settings[i]`: member i's `lr`, `weight_decay` and optionally `lr_ssm`, `betas`, `eps`; its parameter groups come
    from its own model's hints (`optim_groups.param_groups`), so a hinted parameter takes its own rate and decay per
    member. `step(factors)` multiplies each member's rates by its schedule factor at this step (1 when omitted).
    """

    def __init__(self, pack: Pack, settings: Sequence[Mapping[str, Any]]) -> None:
        from ..models.optim_groups import param_groups

        if len(settings) != pack.n:
            raise ValueError(f"{len(settings)} settings for {pack.n} members")
        self.pack = pack
        self.hyper: dict[str, dict[str, torch.Tensor]] = {}  # name -> {"lr", "weight_decay", ...: (N,)}
        per_member: list[dict[str, dict[str, float]]] = []
        for model, s in zip(pack.members, settings, strict=True):
            names = {id(p): n for n, p in model.named_parameters()}
            found: dict[str, dict[str, float]] = {}
            for group in param_groups(model, lr=float(s["lr"]), weight_decay=float(s.get("weight_decay", 0.0)),
                                      lr_ssm=s.get("lr_ssm")):
                b1, b2 = group.get("betas", s.get("betas", (0.9, 0.999)))
                values = {"lr": float(group["lr"]), "weight_decay": float(group["weight_decay"]), "beta1": float(b1),
                          "beta2": float(b2), "eps": float(group.get("eps", s.get("eps", 1e-8)))}
                for p in group["params"]:
                    found[names[id(p)]] = values
            per_member.append(found)
        for name, param in pack.params.items():
            if name not in per_member[0]:
                continue  # not trainable (requires_grad False in the members)
            self.hyper[name] = {key: torch.tensor([m[name][key] for m in per_member], dtype=torch.float64,
                                                  device=param.device) for key in per_member[0][name]}
        self.state = {name: {"exp_avg": torch.zeros_like(pack.params[name]),
                             "exp_avg_sq": torch.zeros_like(pack.params[name])} for name in self.hyper}
        device = next(iter(pack.params.values())).device
        self.t = torch.zeros((), dtype=torch.float64, device=device)  # the step count, on the device (CUDA graphs)
        self.factors = torch.ones(pack.n, dtype=torch.float64, device=device)  # this step's schedule factors

    @property
    def steps(self) -> int:
        return int(self.t.item())

    def load(self, optimizers: Sequence[torch.optim.Optimizer]) -> None:
        """Take each member's AdamW moments and step count (its single run's optimiser, restored from last.pt) into
        the stack; members must be at the same step."""
        steps = {_optimizer_step(opt) for opt in optimizers}
        if len(steps) != 1:
            raise ValueError(f"members are at different optimiser steps {sorted(steps)}: they do not pack")
        self.t.fill_(steps.pop())
        if self.steps == 0:
            return
        for name, st in self.state.items():
            for i, (model, opt) in enumerate(zip(self.pack.members, optimizers, strict=True)):
                member = opt.state[dict(model.named_parameters())[name]]
                st["exp_avg"][i].copy_(member["exp_avg"])
                st["exp_avg_sq"][i].copy_(member["exp_avg_sq"])

    def store(self, optimizers: Sequence[torch.optim.Optimizer]) -> None:
        """Write each member's moments and step into its own torch AdamW, as its single run's optimiser would hold
        them (what its last.pt and best.pt save)."""
        for i, (model, opt) in enumerate(zip(self.pack.members, optimizers, strict=True)):
            for name, param in model.named_parameters():
                if name not in self.state:
                    continue
                st = self.state[name]
                opt.state[param] = {"step": torch.tensor(float(self.steps)),  # torch's dtype: the default float
                                    "exp_avg": st["exp_avg"][i].clone(), "exp_avg_sq": st["exp_avg_sq"][i].clone()}

    @torch.no_grad()
    def clip(self, max_norms: Sequence[float | None]) -> None:
        """Each member's gradient clipped to its own `max_norms[i]` (None: not clipped) by its own total norm, as
        `torch.nn.utils.clip_grad_norm_` clips a single run's."""
        grads = [self.pack.params[name].grad for name in self.hyper if self.pack.params[name].grad is not None]
        if not grads or all(m is None for m in max_norms):
            return
        n = self.pack.n
        per_tensor = torch.stack([torch.linalg.vector_norm(g.reshape(n, -1), dim=1) for g in grads])  # (P, N)
        total = torch.linalg.vector_norm(per_tensor, dim=0)  # (N,): as clip_grad_norm_ computes it
        limit = torch.tensor([math.inf if m is None else float(m) for m in max_norms], dtype=total.dtype,
                             device=total.device)
        coef = (limit / (total + 1e-6)).clamp(max=1.0)
        for g in grads:
            g.mul_(_per_member(coef, g))

    def zero_grad(self) -> None:
        for name in self.hyper:
            self.pack.params[name].grad = None

    def step(self, factors: torch.Tensor | Sequence[float] | None = None) -> None:
        """One update of every member; `factors` (N,): each member's schedule factor at this step (1: none)."""
        self.set_factors(factors)
        self.update()

    def set_factors(self, factors: torch.Tensor | Sequence[float] | None) -> None:
        """The next update's schedule factors (N,), written into the buffer `update` reads (outside a CUDA graph)."""
        if factors is None:
            self.factors.fill_(1.0)
        else:
            self.factors.copy_(torch.as_tensor(factors, dtype=torch.float64))

    @torch.no_grad()
    def update(self) -> None:
        """The update itself, on the device only (no host value changes per step: a CUDA graph can replay it)."""
        self.t.add_(1)
        t = self.t
        for name, h in self.hyper.items():
            param = self.pack.params[name]
            grad = param.grad
            if grad is None:
                continue
            lr = h["lr"] * self.factors
            b1, b2 = h["beta1"], h["beta2"]
            st = self.state[name]
            param.mul_(_per_member(1 - lr * h["weight_decay"], param))
            st["exp_avg"].lerp_(grad, _per_member(1 - b1, param))
            st["exp_avg_sq"].mul_(_per_member(b2, param)).addcmul_(grad * _per_member(1 - b2, param), grad)
            bias1 = 1 - b1 ** t
            bias2_sqrt = torch.sqrt(1 - b2 ** t)
            denom = (st["exp_avg_sq"].sqrt() / _per_member(bias2_sqrt, param)).add_(_per_member(h["eps"], param))
            param.sub_(_per_member(lr / bias1, param) * st["exp_avg"] / denom)


def _optimizer_step(opt: torch.optim.Optimizer) -> int:
    """The step count of a torch AdamW (0 before its first step)."""
    for st in opt.state.values():
        if "step" in st:
            return int(float(st["step"]))
    return 0


def _per_member(values: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    """(N,) per-member values shaped (N, 1, ...) to broadcast over each member's slice of `like` (N, ...)."""
    return values.to(device=like.device, dtype=like.dtype).view((like.shape[0],) + (1,) * (like.dim() - 1))
