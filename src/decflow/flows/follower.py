"""The follower process of a flow run (`python -m decflow.flows.follower FLOW_RUN_ID
MESSAGE`, started by `decflow.flows.crash_by_follower.followed_run`).

It waits on its standard input, the read end of a pipe from the flow's process: `FINISHED`
then end of file means the flow finished and reports its own state; end of file alone
means the flow's process died, and the follower ends the flow run Crashed. Until then it
imports only the standard library (it lives as long as every flow run).
"""

from __future__ import annotations

import sys
import time
from uuid import UUID

from decflow.tasks.heartbeat import FINISHED

# The server records task-run states from the events the dead process sent just before
# dying, a moment later (importing Prefect here takes about that long): the task runs are
# looked at twice.
PASSES_AFTER_S = (0.0, 10.0)


def follow(flow_run_id: UUID, message: str) -> None:
    if sys.stdin.buffer.read().endswith(FINISHED):
        return
    from prefect import get_client

    from decflow.flows.crash_by_follower import crash_flow_run

    started = time.monotonic()
    for after in PASSES_AFTER_S:
        time.sleep(max(0.0, started + after - time.monotonic()))
        with get_client(sync_client=True) as client:
            crash_flow_run(client, flow_run_id, message)


if __name__ == "__main__":
    follow(UUID(sys.argv[1]), sys.argv[2])
