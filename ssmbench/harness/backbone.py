"""Kept for plug-ins written against docs/models.md: `ssmbench.harness.backbone.SequenceModel` is
`ssmbench.harness.models.backbone.SequenceModel` (no ssmbench module imports this one)."""

from .models.backbone import SequenceModel as SequenceModel
