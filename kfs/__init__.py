"""kfs: read Apache Kafka log directories without a broker.

Layers, each importing only the ones above it in this list:
  kfs.record   the on-disk formats: record batches (v2) and legacy message sets (v0/v1), codecs
  kfs.storage  Kafka's storage model: log dirs, partition logs, segments, offset/time indexes
  kfs.views    what users read: JSON lines, raw byte ranges, values, partition summaries
  kfs.fuse     the FUSE binding (paths in, errno out)
  kfs.spark    the PySpark data source and jobs
  kfs.cli      the `kfs` command
"""

__version__ = "0.1.0"
