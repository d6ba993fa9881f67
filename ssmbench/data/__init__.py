"""Everything about dataset folders: plan, build, shards, manifest, de-duplication, verification, cards, preview,
size estimates and in-memory streaming. Imports numpy, h5py and numba (lazily), never torch."""
