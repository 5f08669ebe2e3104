"""The producer-state snapshot (`<offset>.snapshot` in a partition directory), written by
ProducerStateManager.writeSnapshot (storage/src/main/resources/message/ProducerSnapshot.json):

    int16 version (1) | uint32 CRC-32C of the rest | ProducerSnapshot v1 fields after the version

Kafka's schema at apache/kafka 1eb7644349c, in kfs's notation (kfs/internal_topics/schema.py).
"""

from kfs.internal_topics.schema import parse

STORAGE = parse("""
ProducerSnapshot 1
  crc uint32 1
  producerEntries []ProducerEntry 1
    producerId int64 1
    epoch int16 1
    lastSequence int32 1
    lastOffset int64 1
    offsetDelta int32 1
    timestamp int64 1
    coordinatorEpoch int32 1
    currentTxnFirstOffset int64 1
""")
