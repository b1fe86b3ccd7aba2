"""Crash detection's constants, without importing Prefect (the command line reads them for
its options, the follower process before it imports anything): decflow's flow runs, and
each task run while its body runs, heartbeat every `HEARTBEAT_S` seconds (task runs with
the event `TASK_HEARTBEAT`), runs and tasks tagged `WATCHED_TAG` are watched, and one
silent for the automations' window is marked Crashed (`flows.crash_by_heartbeat`); a flow's
process tells its follower it finished by writing `FINISHED` (`flows.crash_by_follower`)."""

HEARTBEAT_S = 30  # the shortest interval Prefect allows
DEFAULT_WINDOW_S = 90  # three heartbeats missed
MIN_WINDOW_S = HEARTBEAT_S + 10  # a heartbeat late by up to 10 s is not a crash
FINISHED = b"finished\n"
WATCHED_TAG = "decflow-heartbeat"
TASK_HEARTBEAT = "decflow.task-run.heartbeat"
