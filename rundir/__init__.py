"""The run-directory contract: what a run leaves on disk and how every part reads and writes it.

The bottom layer above the broker. The harness writes run directories, the checkers and the reports
read them, and this package imports none of them:

    formats.py   paths, file names, record and JSON schemas, the columnar (Parquet) schemas
    kinds.py     the anomaly kinds results.json reports, each declared once (family, summary, whether it
                 fails a run by default, whether it is timed, its example fields)
    history.py   the history writer (one JSON line per operation, crash-safe)
    store.py     the results store: run directory names, test.json, `latest` links
    verdict.py   reading results.json back: the verdict's exit code and the one verdict line
    exits.py     the root error (HighwaterError) and the exit codes every command shares
    settings.py  declared settings (name, type, default, range, doc) and the one validator and TOML
                 line finder that the config, scenario, suite, schedule and nodes-file loaders share

docs/formats.md describes the files; docs/architecture.md shows the layers.
"""
