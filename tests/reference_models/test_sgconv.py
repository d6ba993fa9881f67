"""SGConv against the DLR authors' SGConv layer (the one behind Table 2) and the SGConv authors' GConv kernel.

The fixture `fixtures/sgconv_official.npz` was made by `fixtures/make_sgconv.py` from ag1988/dlr
(src/models/sequence/ss/standalone/dss.py: `SGConvKernel` in `DSS`, commit 580d854c2b725449c30dcb08820d440640aa1f57)
and ctlllll/SGConv (gconv_standalone.py: `GConv`, commit 97862df5b42507da0c6920b180ee2a250a1f8968), run in float64;
the commits are also stored in the file.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from ssmbench.reference_models.sgconv import SGConv, n_scales_for

FIX = np.load(Path(__file__).parent / "fixtures" / "sgconv_official.npz")
H, D_K, L_MAX = (int(FIX[k]) for k in ("H", "kernel_dim", "l_max"))


def copy_in(m: SGConv, prefix: str) -> None:
    with torch.no_grad():
        for i, w in enumerate(m.ws):
            w.copy_(torch.from_numpy(FIX[f"{prefix}.kernel.ws.{i}"]))
        m.alpha.copy_(torch.from_numpy(FIX[f"{prefix}.kernel.alpha"]))
        m.D.copy_(torch.from_numpy(FIX[f"{prefix}.D"][0]))
        m.k_norm.copy_(torch.from_numpy(FIX[f"{prefix}_k_norm"]))


@pytest.mark.parametrize("tag", ["causal", "bidir"])
def test_layer_equals_dlr_authors_sgconv_float64(tag: str) -> None:
    m = SGConv(H, l_max=L_MAX, kernel_dim=D_K, bidirectional=tag == "bidir").double()
    assert m.n_scales == sum(1 for k in FIX.files if k.startswith(f"{tag}.kernel.ws."))
    copy_in(m, tag)
    with torch.no_grad():
        k, y = m.kernel(L_MAX).numpy(), m(torch.from_numpy(FIX[f"{tag}_x"])).numpy()
    assert np.abs(k - FIX[f"{tag}_kernel"]).max() <= 1e-14 * np.abs(k).max()
    assert np.abs(y - FIX[f"{tag}_y"]).max() <= 1e-13 * np.abs(y).max()


def test_kernel_equals_sgconv_authors_gconv_float64() -> None:
    """GConv's per-scale weight m^(S-1-i), normalised at the first call, is alpha^i with alpha = 1/m."""
    m = SGConv(H, l_max=L_MAX, kernel_dim=D_K, alpha_min=0.5, alpha_max=0.5).double()
    with torch.no_grad():
        for i, w in enumerate(m.ws):
            w.copy_(torch.from_numpy(FIX[f"ctl.ws.{i}"]))
        m.alpha.fill_(1 / float(FIX["ctl_decay"]))
        m.k_norm.copy_(m._raw_kernel().norm(dim=-1, keepdim=True))
        k = m.kernel(L_MAX).numpy()
    assert np.abs(k - FIX["ctl_kernel"]).max() <= 1e-14 * np.abs(k).max()


def test_scales_cover_l_max_and_init() -> None:
    assert [n_scales_for(L, 4096) for L in (2 ** 8, 2 ** 12, 2 ** 13, 2 ** 14, 2 ** 16, 2 ** 18, 2 ** 20)] == \
        [1, 1, 2, 3, 5, 7, 9]
    torch.manual_seed(0)
    m = SGConv(4, l_max=5000, kernel_dim=512)
    assert m.n_scales == 5 and m._raw_kernel().shape[-1] == 512 * 16 >= 5000
    w = torch.cat([p.detach().flatten() for p in m.ws])
    assert abs(w.std().item() * 512 - 1) < 0.02  # N(0, d^-2)
    assert np.allclose(m.kernel(512 * 16).norm(dim=-1).detach().numpy(), 1.0)
    with pytest.raises(ValueError, match="cover 8192 lags"):
        m.kernel(8193)
