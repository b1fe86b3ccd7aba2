"""Work on stored runs without a new run: re-gating with an edited contract (no backend
call) and replaying stored property failures."""
