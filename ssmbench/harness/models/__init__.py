"""The model side: the harness-owned backbone, building a model from `--model`, the causality check, optimiser
groups.

The names plug-ins and docs/models.md use are importable from here: `build_model`, `causality_checks`,
`check_causality`, `CausalityReport`, `SequenceModel`, `param_groups`.
"""

from .backbone import SequenceModel as SequenceModel
from .build import CausalityReport as CausalityReport
from .build import build_model as build_model
from .build import causality_checks as causality_checks
from .build import check_causality as check_causality
from .optim_groups import param_groups as param_groups
