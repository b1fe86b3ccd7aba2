"""Memory bounds for what decflow reads from untrusted files (golden datasets, production
records), checked before the memory is taken; over a bound is one `DatasetError` naming
the file and the row. SECURITY.md lists them.

Parquet is where a few kilobytes become gigabytes: pages are compressed (a megabyte of
one repeated byte is a few hundred bytes on disk) and a dictionary-encoded column repeats
one stored value in every row (a 7 KB file held one 1 MB `input` 3,000 times: 3 GB once
decoded, and validate went past 5 GB): `decflow.data.parquet_bounds` checks a row group
before and right after reading it. Text formats (JSONL, JSON, CSV) take no more memory
than their bytes plus the parsed values, which `MAX_JSON_VALUES` and the nesting limit of
`decflow.strictjson` bound.

Constants only (no polars): the JSONL block reader, which runs while a check still imports
its libraries, reads them too.
"""

from __future__ import annotations

MAX_FIELD_BYTES = 1 << 20  # one value of a golden case: input, id, metadata JSON, ...
MAX_RECORD_FIELD_BYTES = 64 << 20  # one value of a production record (logged prompts)
MAX_GROUP_ROWS = 1 << 21  # rows of one Parquet row group (read at once)
MAX_GROUP_VALUES = 1 << 26  # values of one row group, nested ones included
MAX_GROUP_BYTES = 512 << 20  # one row group decompressed, and once read as plain data
MAX_DATASET_BYTES = 256 << 20  # a golden dataset: its file (read whole), and its data once read
MAX_JSON_VALUES = 1 << 20  # values of one JSON document (a line, a cell, an answer)
MAX_JSON_FILE_VALUES = 1 << 23  # values of a .json file, read whole as one document
MAX_RECORD_LINE_BYTES = 128 << 20  # one line of a JSONL record file
MAX_LABELS_BYTES = 64 << 20  # a monitor's labels file: read whole, and once decompressed


def mib(size: int) -> str:
    return f"{size / (1 << 20):,.0f} MiB" if size >= 1 << 20 else f"{size:,} bytes"




def long_line(path: object, line: int) -> str:
    """The message for line `line` of JSONL file `path` past `MAX_RECORD_LINE_BYTES`."""
    return (f"{path}: line {line:,}: longer than {mib(MAX_RECORD_LINE_BYTES)}; a record "
            "line holds at most that (SECURITY.md)")
