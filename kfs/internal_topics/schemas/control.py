"""Control records, the records of control batches: their key (ControlRecordType's struct, int16
version and int16 type, read without a version prefix), the transaction marker value
(EndTransactionMarker: int16 version, then EndTxnMarker), and KRaft's messages in `__cluster_metadata`
and its snapshots, each its bare message at version 0 whose first field is its own int16 Version
(ControlRecordUtils; clients/src/main/resources/common/message/).

Kafka's schemas at apache/kafka 1eb7644349c, in kfs's notation (kfs/internal_topics/schema.py).
"""

from kfs.internal_topics.schema import parse

CONTROL = parse("""
ControlRecordKey 0
  version int16 0+
  type int16 0+

EndTxnMarker 0
  coordinatorEpoch int32 0+

LeaderChangeMessage 0-1 flex:0+
  version int16 0+
  leaderId int32 0+
  voters []Voter 0+
    voterId int32 0+
    voterDirectoryId uuid 1+
  grantingVoters []Voter 0+

SnapshotHeaderRecord 0 flex:0+
  version int16 0+
  lastContainedLogTimestamp int64 0+

SnapshotFooterRecord 0 flex:0+
  version int16 0+

KRaftVersionRecord 0 flex:0+
  version int16 0+
  kRaftVersion int16 0+

VotersRecord 0 flex:0+
  version int16 0+
  voters []Voter 0+
    voterId int32 0+
    voterDirectoryId uuid 0+
    endpoints []Endpoint 0+
      name string 0+
      host string 0+
      port uint16 0+
    kRaftVersionFeature KRaftVersionFeature 0+
      minSupportedVersion int16 0+
      maxSupportedVersion int16 0+
""")
