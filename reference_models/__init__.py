"""Reference sequence mixers (installed as `ssmbench.reference_models`): name -> ("module:Class", summary)."""

BUILTIN: dict[str, tuple[str, str]] = {}
