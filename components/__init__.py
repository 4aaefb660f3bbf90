"""Reusable Keras layers and functions with no knowledge of runs.

Negative samplers (`samplers`, one registry), losses, ranking metrics, schedules,
dropout, seeded generators, and the data contract models need: the feature
`schema` and sequence `packing`. Imports nothing from `genni.models` or
`genni.pipeline`.
"""
