"""Metamorphic properties: seeded transformations, comparisons' inputs, minimisation.

Pure code: nothing here calls a backend. Entry points: `generate.generate` and
`generate.apply_steps`; per-property summaries and checks in `summary`; greedy shrinking in
`minimize`; paraphrase providers in `paraphrasers`.
"""
