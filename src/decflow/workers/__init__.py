"""Code decflow does not own runs in worker processes and threads it can give up on.

Plugin backends and probe agents are installed or named third-party code: a `sys.exit`,
an `os._exit`, a crash or a hang in them must end as an errored case, never as the end of
the run without a report. `process` runs such code in an isolated child Python (`command`:
`-P -s`, no current directory on its path) behind a small message protocol (`frames`,
`serve` on the child's side) with a timeout per call; `threads` does the same for
callables handed to the SDK as objects, in daemon threads that are abandoned when a call
outlives its timeout. Every other child process decflow starts uses `command` too.
"""
