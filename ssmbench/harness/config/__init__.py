"""What a run is: the request, the resolved config and the one resolver, presets, task groups, model names, the dataset folder."""
