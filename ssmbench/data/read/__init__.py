"""Reading a dataset folder: the map-style dataset, row readers, samplers, batch transport and task streams."""
