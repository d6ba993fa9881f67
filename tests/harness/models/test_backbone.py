"""SequenceModel: encoders, pre/post-norm blocks against a hand-written forward, norms, GLU, crop, output checks."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from ssmbench.api import Spec
from ssmbench.errors import ConfigError, SsmbenchError
from ssmbench.harness.models.backbone import ScalarLayerNorm, SequenceModel


def spec(**kw: object) -> Spec:
    base = dict(fields={}, input_kind="real", d_input=3, seq_len=20, target_kind="regress", d_output=2,
                l_output=5, ignore_index=None, causal=True, input_scale=None, metrics=("r2",))
    return Spec(**{**base, **kw})


class Tanh(nn.Module):
    """A toy position-wise mixer with one parameter."""

    causal = True

    def __init__(self, d_model: int, *, l_max: int, bidirectional: bool = False, dropout: float = 0.0,
                 layer_idx: int = 0) -> None:
        super().__init__()
        self.w = nn.Parameter(torch.randn(d_model))

    def forward(self, x: torch.Tensor, *, mask: torch.Tensor | None = None) -> torch.Tensor:
        return torch.tanh(x * self.w)


def scalar_norm(x: torch.Tensor, m: float, s: float) -> torch.Tensor:
    mu = x.mean(-1, keepdim=True)
    return s / x.std(-1, unbiased=False, keepdim=True) * (x - mu + m)


@pytest.mark.parametrize("prenorm", [False, True])
@pytest.mark.parametrize("out_proj", ["linear", "glu", "none"])
def test_forward_matches_hand_written_backbone(prenorm: bool, out_proj: str) -> None:
    torch.manual_seed(0)
    model = SequenceModel(spec(), Tanh, d_model=8, n_layers=2, prenorm=prenorm, out_proj=out_proj)
    with torch.no_grad():
        for b in model.blocks:
            b.norm.m.fill_(0.3)
            b.norm.s.fill_(1.7)
    x = torch.randn(4, 20, 3)
    h = model.encoder(x)
    for b in model.blocks:
        def layer(u: torch.Tensor, b: nn.Module = b) -> torch.Tensor:
            y = torch.tanh(u * b.mixer.w)
            if out_proj == "linear":
                return y @ b.out_proj.weight.T + b.out_proj.bias
            if out_proj == "glu":
                z = y @ b.out_proj.weight.T + b.out_proj.bias
                return z[..., :8] * torch.sigmoid(z[..., 8:])
            return y
        h = h + layer(scalar_norm(h, 0.3, 1.7)) if prenorm else scalar_norm(h + layer(h), 0.3, 1.7)
    if prenorm:
        h = scalar_norm(h, 0.0, 1.0)
    want = h[:, -5:] @ model.decoder.weight.T + model.decoder.bias
    torch.testing.assert_close(model(x), want)
    torch.testing.assert_close(model.forward_full(x)[:, -5:], want)  # crop-then-project == project-then-crop
    assert isinstance(model.final_norm, nn.Identity) is (not prenorm)


def test_token_and_pixel_encoders() -> None:
    tok = SequenceModel(spec(input_kind="tokens", d_input=16), Tanh, d_model=8)
    assert isinstance(tok.encoder, nn.Embedding) and tok.encoder.num_embeddings == 16
    assert tok(torch.randint(0, 16, (2, 20))).shape == (2, 5, 2)
    pix = SequenceModel(spec(input_kind="pixels", d_input=1, input_scale=(1 / 127.5, -1.0)), Tanh, d_model=8)
    raw = torch.randint(0, 256, (2, 20), dtype=torch.uint8)
    torch.testing.assert_close(pix.encode(raw), pix.encoder((raw.float() / 127.5 - 1).unsqueeze(-1)))


def test_norm_kinds_and_parameter_counts() -> None:
    assert sum(p.numel() for p in ScalarLayerNorm().parameters()) == 2
    x = torch.randn(3, 7, 8)
    torch.testing.assert_close(ScalarLayerNorm()(x), F.layer_norm(x, (8,), eps=0.0), atol=1e-5, rtol=1e-5)
    for norm, kind in (("layer", nn.LayerNorm), ("batch", nn.Module), ("none", nn.Identity)):
        model = SequenceModel(spec(), Tanh, d_model=8, norm=norm)
        assert isinstance(model.blocks[0].norm, kind)
        assert model(torch.randn(2, 20, 3)).shape == (2, 5, 2)
    with pytest.raises(ConfigError, match="model.norm"):
        SequenceModel(spec(), Tanh, d_model=8, norm="rms")
    with pytest.raises(ConfigError, match="model.out_proj"):
        SequenceModel(spec(), Tanh, d_model=8, out_proj="mlp")


class WrongShape(Tanh):
    def forward(self, x: torch.Tensor, *, mask: torch.Tensor | None = None) -> torch.Tensor:
        return x[:, :-1]


class Complex(Tanh):
    def forward(self, x: torch.Tensor, *, mask: torch.Tensor | None = None) -> torch.Tensor:
        return torch.complex(x, x)


@pytest.mark.parametrize("mixer,match", [(WrongShape, "returned shape"), (Complex, "returned dtype")])
def test_bad_mixer_output_names_the_model(mixer: type, match: str) -> None:
    model = SequenceModel(spec(), mixer, d_model=8, name="mypkg:Bad")
    with pytest.raises(SsmbenchError, match=f"model 'mypkg:Bad'.*{match}"):
        model(torch.randn(2, 20, 3))


def test_mask_reaches_the_mixer() -> None:
    seen = []

    class Spy(Tanh):
        def forward(self, x: torch.Tensor, *, mask: torch.Tensor | None = None) -> torch.Tensor:
            seen.append(mask)
            return x

    mask = torch.zeros(2, 20, dtype=torch.bool)
    SequenceModel(spec(), Spy, d_model=8, n_layers=2)(torch.randn(2, 20, 3), mask)
    assert len(seen) == 2 and all(m is mask for m in seen)


class Minimal(nn.Module):
    """A mixer whose __init__ names only d_model: the standard arguments it lacks are not passed."""

    causal = True

    def __init__(self, d_model: int) -> None:
        super().__init__()
        self.lin = nn.Linear(d_model, d_model)

    def forward(self, x: torch.Tensor, *, mask: torch.Tensor | None = None) -> torch.Tensor:
        return self.lin(x)


def test_mixer_without_standard_arguments() -> None:
    assert SequenceModel(spec(), Minimal, d_model=8)(torch.randn(1, 20, 3)).shape == (1, 5, 2)
    with pytest.raises(ConfigError, match="model.bidirectional"):
        SequenceModel(spec(), Minimal, d_model=8, bidirectional=True)
