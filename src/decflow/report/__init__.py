"""The report model: pure functions over report dicts, below the pipeline that builds them
and the views that render them — report versions, loading and verifying stored reports,
and what a report's sections decide (e.g. which property cases failed)."""
