"""A sequential contract run (`--sequential`): the call stage that sends cases batch by
batch and stops once every gate is decided (`calls`), the gates it tracks (`gates`, and the
diagnostics': `diagnostics`), what it should cost (`plan`) and the evidence replayed for its
report (`summary`). The inference itself is `decflow.metrics.sequential` and
`sequential_composite`."""
