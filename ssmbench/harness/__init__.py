"""The model side: backbone, model building and the causality check, optimiser groups, and the training harness."""
