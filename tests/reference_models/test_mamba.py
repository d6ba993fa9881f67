"""Mamba (S6) against state-spaces/mamba's `selective_scan_ref` and `Mamba` module, and the scan's own invariants.

The fixture `fixtures/mamba_official.npz` was made by `fixtures/make_mamba.py`, which runs `selective_scan_ref`
(mamba_ssm/ops/selective_scan_interface.py) and `Mamba` (mamba_ssm/modules/mamba_simple.py, its non-fused path) of
state-spaces/mamba at commit e9594ce1c732d97440f0332fdc43170a2294dbfa; the commit is also stored in the file.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
import torch

from ssmbench.reference_models.mamba import Mamba, selective_scan

FIX = np.load(Path(__file__).parent / "fixtures" / "mamba_official.npz")
SCAN = {k[5:]: torch.from_numpy(FIX[k]) for k in FIX.files if k.startswith("scan_") and not k.startswith("scan_y")}


FUSED = pytest.mark.parametrize("fused_cpu", [True, False], ids=["numba", "torch"])


@FUSED
@pytest.mark.parametrize("chunk", [None, 5, 16])
def test_scan_equals_selective_scan_ref_float64(chunk: int | None, fused_cpu: bool) -> None:
    """Both CPU paths: the fused Numba loops (reference_models/selective_scan_cpu.py) and the PyTorch recurrence."""
    got = selective_scan(**SCAN, delta_softplus=True, chunk=chunk, fused_cpu=fused_cpu).numpy()
    want = FIX["scan_y64"]
    assert np.abs(got - want).max() <= 1e-13 * np.abs(want).max()


@FUSED
def test_scan_float32_close_to_ref(fused_cpu: bool) -> None:
    got = selective_scan(**{k: v.float() for k, v in SCAN.items()}, delta_softplus=True, chunk=7,
                         fused_cpu=fused_cpu).numpy()
    want = FIX["scan_y32"]
    assert np.abs(got - want).max() <= 1e-5 * np.abs(want).max()


def test_layer_equals_official_mamba_float64() -> None:
    x = torch.from_numpy(FIX["layer_x"])
    m = Mamba(x.shape[-1], l_max=x.shape[1], d_state=4).double()
    state = {k[6:]: torch.from_numpy(FIX[k]) for k in FIX.files if k.startswith("layer.")}
    own = {k if k.split(".")[0] in ("in_proj", "out_proj") else f"ssm.0.{k}": v for k, v in state.items()}
    m.load_state_dict(own)
    with torch.no_grad():
        got = m(x).numpy()
    assert np.abs(got - FIX["layer_y"]).max() <= 1e-13 * np.abs(FIX["layer_y"]).max()


@FUSED
@pytest.mark.parametrize("chunk", [6, None])
@pytest.mark.parametrize("eig_range", ["0_1", "-1_1"])
def test_scan_gradients_equal_a_step_loop(chunk: int | None, fused_cpu: bool, eig_range: str) -> None:
    """Gradients through the blocked, checkpointed scan equal those of a plain step loop (float64): chunk 6 carries
    the state and its gradient across chunk boundaries (h0 and dL/dh_end non-zero); with eig_range -1_1 the loop's
    transition is 2 e^{Delta A} - 1."""
    torch.manual_seed(0)
    args = {k: v.clone().requires_grad_(True) for k, v in SCAN.items()}

    def loop(u, delta, A, B, C, D, z, delta_bias):
        d = torch.nn.functional.softplus(delta + delta_bias[:, None])
        h, ys = torch.zeros(u.shape[0], u.shape[1], A.shape[1], dtype=u.dtype), []
        for t in range(u.shape[-1]):
            a = torch.exp(d[..., t, None] * A)
            a = 2 * a - 1 if eig_range == "-1_1" else a
            h = a * h + (d[..., t] * u[..., t])[..., None] * B[:, None, :, t]
            ys.append((h * C[:, None, :, t]).sum(-1))
        return (torch.stack(ys, -1) + D[:, None] * u) * torch.nn.functional.silu(z)

    w = torch.randn(FIX["scan_y64"].shape, dtype=torch.float64)
    fast = selective_scan(**args, chunk=chunk, fused_cpu=fused_cpu, eig_range=eig_range)
    g_fast = torch.autograd.grad((fast * w).sum(), list(args.values()))
    g_loop = torch.autograd.grad((loop(**args) * w).sum(), list(args.values()))
    for name, a, b in zip(args, g_fast, g_loop, strict=True):
        assert torch.allclose(a, b, rtol=1e-10, atol=1e-10 * b.abs().max()), name


@FUSED
def test_eig_range_maps_the_transition_to_two_exp_minus_one(fused_cpu: bool) -> None:
    """One channel, one state, Delta A = ln(1/4): a = 1/4 by default and 2/4 - 1 = -1/2 with eig_range -1_1, so an
    impulse decays as 1, 1/4, 1/16 or alternates as 1, -1/2, 1/4 (Delta = B = C = 1, D = 0, no softplus, no gate)."""
    one = torch.ones(1, 1, 3, dtype=torch.float64)
    args = {"u": torch.tensor([[[1.0, 0.0, 0.0]]], dtype=torch.float64), "delta": one,
            "A": torch.tensor([[-math.log(4.0)]], dtype=torch.float64), "B": one, "C": one,
            "D": torch.zeros(1, dtype=torch.float64), "delta_softplus": False, "chunk": 2, "fused_cpu": fused_cpu}
    for eig_range, want in (("0_1", [1.0, 0.25, 0.0625]), ("-1_1", [1.0, -0.5, 0.25])):
        got = selective_scan(**args, eig_range=eig_range)[0, 0].tolist()
        assert got == pytest.approx(want, abs=1e-15), eig_range


def test_eig_range_option_on_the_layer() -> None:
    """The option reaches the scans of a bidirectional layer (same weights, another output); unknown values are refused."""
    torch.manual_seed(0)
    default = Mamba(8, l_max=32, d_state=4, bidirectional=True).double()
    signed = Mamba(8, l_max=32, d_state=4, bidirectional=True, eig_range="-1_1").double()
    signed.load_state_dict(default.state_dict())
    for d in (*default.ssm, *signed.ssm):  # larger steps, so that 2 e^{Delta A} - 1 is far from e^{Delta A}
        d.dt_proj.bias.data.fill_(1.0)
    x = torch.randn(2, 32, 8, dtype=torch.float64)
    assert (default(x) - signed(x)).abs().max() > 1e-3
    with pytest.raises(ValueError, match="eig_range"):
        Mamba(8, l_max=32, eig_range="-1_0")


def test_long_sequence_memory_and_init() -> None:
    """L = 2^16 forward+backward on the CPU (chunks are checkpointed); the init follows Mamba's."""
    torch.manual_seed(2)
    m = Mamba(4, l_max=1 << 16, d_state=8)
    m(torch.randn(1, 1 << 16, 4)).square().mean().backward()
    assert all(torch.isfinite(p.grad).all() for p in m.parameters())
    d = m.ssm[0]
    np.testing.assert_allclose(torch.exp(d.A_log).detach().numpy()[3], np.arange(1, 9), rtol=1e-6)
    dt = torch.nn.functional.softplus(d.dt_proj.bias).detach().numpy()
    assert dt.min() >= 1e-3 * 0.999 and dt.max() <= 1e-1 * 1.001
    assert torch.equal(d.D.detach(), torch.ones(8))


def _fused_ops():
    """mamba_ssm's `selective_scan_interface` on a CUDA device, or skip (benchmarks/paper/build_mamba_scan.py builds it
    from state-spaces/mamba where no wheel fits the local torch)."""
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    return pytest.importorskip("mamba_ssm.ops.selective_scan_interface", reason="mamba_ssm is not installed")


def _random_scan(Bt: int, E: int, N: int, L: int, seed: int) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return {"u": torch.randn(Bt, E, L, generator=g), "delta": torch.randn(Bt, E, L, generator=g) - 1,
            "A": -4 * torch.rand(E, N, generator=g), "B": torch.randn(Bt, N, L, generator=g),
            "C": torch.randn(Bt, N, L, generator=g), "D": torch.randn(E, generator=g),
            "z": torch.randn(Bt, E, L, generator=g), "delta_bias": torch.randn(E, generator=g)}


def _fused(ops, args: dict[str, torch.Tensor]) -> torch.Tensor:
    return ops.selective_scan_fn(args["u"], args["delta"], args["A"], args["B"], args["C"], args["D"], z=args["z"],
                                 delta_bias=args["delta_bias"], delta_softplus=True)


@pytest.mark.gpu
def test_fused_cuda_scan_matches_pytorch_path() -> None:
    """The fixture's scan: mamba_ssm's fused kernel, the PyTorch path on CUDA and `selective_scan_ref` agree."""
    ops = _fused_ops()
    args = {k: v.float().cuda() for k, v in SCAN.items()}
    want = selective_scan(**args, delta_softplus=True)
    got = _fused(ops, args)
    torch.testing.assert_close(got, want, atol=1e-4, rtol=1e-4)
    ref = torch.from_numpy(FIX["scan_y64"]).float()
    assert (got.cpu() - ref).abs().max() <= 1e-5 * ref.abs().max()


@pytest.mark.gpu
@pytest.mark.parametrize("L", [300, 5000])
def test_fused_cuda_gradients_match_pytorch_path(L: int) -> None:
    """Output and all 8 gradients of the fused kernel within 1e-4 (of each tensor's largest entry) of the float64
    PyTorch path; L = 5000 crosses the fused kernel's 2048-step chunks and the PyTorch path's checkpoints."""
    ops = _fused_ops()
    base = _random_scan(2, 32, 16, L, seed=L)
    w = torch.randn(2, 32, L, generator=torch.Generator().manual_seed(1))

    def run(fn, dtype: torch.dtype, device: str) -> list[torch.Tensor]:
        xs = {k: v.to(device, dtype).clone().requires_grad_() for k, v in base.items()}
        y = fn(xs)
        (y * w.to(device, dtype)).sum().backward()
        return [y.detach().double().cpu()] + [x.grad.double().cpu() for x in xs.values()]

    got = run(lambda xs: _fused(ops, xs), torch.float32, "cuda")
    want = run(lambda xs: selective_scan(**xs, chunk=1024), torch.float64, "cpu")
    for name, a, b in zip(["y", *base], got, want, strict=True):
        err = ((a - b).abs().max() / b.abs().max()).item()
        assert err <= 1e-4, f"{name}: {err:.1e}"


@pytest.mark.gpu
def test_layer_on_cuda_uses_the_fused_kernel_and_agrees(monkeypatch) -> None:
    """The layer hands its tensors to the fused kernel in mamba_ssm's argument order: its output and gradients equal
    those of the same layer with the fused kernel switched off."""
    _fused_ops()
    from ssmbench.reference_models import mamba as mod

    torch.manual_seed(0)
    layer = Mamba(32, l_max=600, d_state=16, bidirectional=True).cuda()
    x = torch.randn(2, 600, 32, device="cuda")

    def out_and_grads() -> list[torch.Tensor]:
        layer.zero_grad(set_to_none=True)
        y = layer(x)
        y.square().mean().backward()
        return [y.detach()] + [p.grad.detach().clone() for p in layer.parameters()]

    assert mod._fused_scan() is not None
    fused = out_and_grads()
    monkeypatch.setattr(mod, "_fused_scan", lambda: None)
    plain = out_and_grads()
    for a, b in zip(fused, plain, strict=True):
        assert (a - b).abs().max() <= 1e-4 * b.abs().max()


@FUSED
def test_float32_gradients_close_to_float64(fused_cpu: bool) -> None:
    """Training runs in float32: every gradient of both CPU paths within 1e-5 (relative to its largest entry) of the
    float64 PyTorch path, over 5 checkpointed chunks of 64 steps with N = 16."""
    g = torch.Generator().manual_seed(0)
    Bt, E, N, L = 3, 8, 16, 300
    base = [torch.randn(Bt, E, L, generator=g), torch.randn(Bt, E, L, generator=g) - 1,
            -4 * torch.rand(E, N, generator=g), torch.randn(Bt, N, L, generator=g), torch.randn(Bt, N, L, generator=g),
            torch.randn(E, generator=g), torch.randn(Bt, E, L, generator=g), torch.randn(E, generator=g)]
    w = torch.randn(Bt, E, L, generator=g)

    def grads(dtype: torch.dtype, fused: bool) -> list[torch.Tensor]:
        xs = [x.to(dtype).clone().requires_grad_() for x in base]
        y = selective_scan(*xs[:6], z=xs[6], delta_bias=xs[7], chunk=64, fused_cpu=fused)
        (y * w.to(dtype)).sum().backward()
        return [y.detach().double()] + [x.grad.double() for x in xs]

    for got, want in zip(grads(torch.float32, fused_cpu), grads(torch.float64, False), strict=True):
        assert (got - want).abs().max() <= 1e-5 * want.abs().max()
