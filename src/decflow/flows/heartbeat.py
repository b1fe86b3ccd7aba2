"""Crash detection's constants, without importing Prefect (the command line reads them for
its options, the follower process before it imports anything): decflow's flow runs
heartbeat every `HEARTBEAT_S` seconds, and a run silent for the automation's window is
marked Crashed (`crash_detection`); a flow's process tells its follower it finished
by writing `FINISHED` (`crashes`)."""

HEARTBEAT_S = 30  # the shortest interval Prefect allows
DEFAULT_WINDOW_S = 90  # three heartbeats missed
MIN_WINDOW_S = HEARTBEAT_S + 10  # a heartbeat late by up to 10 s is not a crash
FINISHED = b"finished\n"
