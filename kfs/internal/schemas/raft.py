"""KRaft's control records: the values of control batches in `__cluster_metadata` and its snapshots
(clients/src/main/resources/common/message/; ControlRecordType names the type in the key).

Kafka's schemas at apache/kafka 1eb7644349c, in kfs's notation (kfs/internal/schema.py).
"""

from kfs.internal.schema import parse

RAFT = parse("""
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
