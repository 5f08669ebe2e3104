#!/usr/bin/env bash
# The README's first command: install what is missing, mount the bundled sample log dirs under
# mountpoints/demo, and show a few real reads. Safe to run again (it remounts).
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
cd "$repo"
sample="tests/fixtures/kafka-written/logdirs"
mnt="mountpoints/demo"

if [ "$(id -u)" = 0 ] && ! command -v fusermount3 >/dev/null; then
  echo "demo: installing FUSE (apt-get install fuse3 libfuse2)"
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq fuse3 libfuse2 >/dev/null
fi
if ! python3 -c "import kfs.fuse.binding" 2>/dev/null || ! command -v kfs >/dev/null; then
  echo "demo: installing kfs (pip install -e .)"
  python3 -m pip install -q -e .
fi

mkdir -p "$mnt"
if mountpoint -q "$mnt"; then kfs umount "$mnt"; fi
kfs mount "$sample/broker-a" "$sample/broker-b" "$mnt"
echo "demo: mounted $sample/broker-{a,b} at $mnt (unmount with: kfs umount $mnt)"

show() { printf '\n$ %s\n' "$*"; (cd "$mnt" && eval "$@") || true; }
show "ls"
show "ls orders-0"
show "head -n 2 orders-0/messages.jsonl | cut -c 1-150"
show "cat orders-0/offset/268.value | cut -c 1-60"
show "head -c 200 orders-0/offset/1500 | od -A d -t x1 | head -n 3"
show "tail -n 1 payments-0/messages.jsonl | jq -c '{offset, key, headers}'"
show "grep -c refund orders-0/messages.jsonl"
show "head -n 1 'orders-0/time/2018-05-15T11:45:30Z.jsonl' | jq -c '{offset, timestamp, key}'"
show "jq -r '.key' audit.events-v2-3/offset/-3.jsonl"
show "jq '{log_start_offset, log_end_offset, segments: (.segments | length)}' metrics_raw-0/info.json"
