"""The versions of the files this tool writes, so a reader of an old run knows what wrote it.

A run folder's manifest.json and every results.ndjson line carry `formatVersion`; an export
folder carries export.toml (its format, version and the software that wrote it). Raise a
version when a field changes meaning in a way an older reader would get wrong (renamed,
re-scaled, re-meant); adding an optional field does not. A file without the field predates
0.2.0 and is version 1: nothing changed meaning before then.
"""

RUN_FORMAT = 1  # manifest.json and results.ndjson records
EXPORT_FORMAT = 1  # export.toml beside the exported files

FIELD = "formatVersion"
