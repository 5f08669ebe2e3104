"""What a mount shows, for `kfs --help` and `kfs mount --help` (the README's tree, in short)."""

TREE_HELP = """\
kfs mount LOGDIR... MOUNTPOINT shows, read-only:
  MOUNTPOINT/<topic>-<partition>/
    messages.jsonl        every record from the log start, one JSON line each
    info.json             segments, offsets, sizes, damage
    offset/N              raw record batches from the batch holding offset N (also earliest, latest, -K)
    offset/N.jsonl        JSON lines from offset N; offset/N.value its value bytes, offset/N.json its value decoded
    time/T                as offset/, from the first record at or after T (ms or ISO-8601)
  MOUNTPOINT/.groups/     every consumer group's committed offsets and state (hidden entry)
  MOUNTPOINT/.schemas/    the schema registry's schemas, by id and by subject (hidden entry)
  MOUNTPOINT/.replicas/<broker>/<topic>-<partition>/   with several brokers' log dirs: each broker's copy of a
                          partition several hold, and its truncated.jsonl; <topic>-<partition>/ is then the
                          reference copy, with replicas.json (kfs replicas --json; hidden entry)
Names under offset/ and time/ are looked up, not listed. See README.md and docs/spec.md."""
