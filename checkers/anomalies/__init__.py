"""The Spark checker's anomaly families (DataFrame API only) and the engine that runs them.

Each family module (offsets, values, ordering, watermarks, divergence, keys, groups) owns some anomaly kinds: its
`KINDS` lists their declarations (rundir/kinds.py), its functions find them as findings
(tables.finding), and its `examples` builds their examples. engine.py runs every family in FAMILIES.
"""
