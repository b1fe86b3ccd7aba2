"""Views of a report dict: text for the terminal, HTML (inline SVG), Markdown, JUnit XML, and
the probe's text view. Views decide nothing; what a report means comes from
`decflow.report`."""
