"""Evaluators (installed as `ssmbench.evaluators`): name -> ("module:Class", summary)."""

BUILTIN: dict[str, tuple[str, str]] = {}
