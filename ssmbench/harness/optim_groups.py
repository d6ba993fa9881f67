"""Kept for plug-ins written against docs/models.md: `ssmbench.harness.optim_groups.param_groups` is
`ssmbench.harness.models.optim_groups.param_groups` (no ssmbench module imports this one)."""

from .models.optim_groups import describe as describe
from .models.optim_groups import param_groups as param_groups
