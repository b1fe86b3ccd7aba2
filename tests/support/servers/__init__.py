"""Real HTTP servers on 127.0.0.1 for backend tests (started and stopped by the tests)."""
