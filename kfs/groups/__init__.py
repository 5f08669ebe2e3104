"""Consumer groups as of any moment, from `__consumer_offsets` (docs/spec.md section 8, `kfs groups`).

    replay.py   the scan: last record per key at or before T, transactions as the coordinator does
    state.py    decode the survivors: committed offsets, classic and KIP-848 groups
    reader.py   the entry point the CLI and the mount share (incremental at the log end)
    render.py   JSON lines and the table
    codec.py    the seam to the decoder of Kafka's internal-topic schemas
    collector.py  the cycle collector paused during a replay (it walked the replay's objects for nothing)
"""
