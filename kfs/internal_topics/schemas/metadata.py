"""The records of the KRaft metadata log `__cluster_metadata` and its snapshots, by api key
(metadata/src/main/resources/common/metadata/; MetadataRecordType is generated from these).

Kafka's schemas at apache/kafka 1eb7644349c, in kfs's notation (kfs/internal_topics/schema.py), and
ClearElrRecord (api key 28) of Kafka 4.x.
"""

from kfs.internal_topics.schema import parse

METADATA = parse("""
AbortTransactionRecord 0 flex:0+ api:25
  reason string 0+ null:0+ tag:0:0+ =null

AccessControlEntryRecord 0 flex:0+ api:18
  id uuid 0+
  resourceType int8 0+
  resourceName string 0+
  patternType int8 0+
  principal string 0+
  host string 0+
  operation int8 0+
  permissionType int8 0+

BeginTransactionRecord 0 flex:0+ api:23
  name string 0+ null:0+ tag:0:0+ =null

BrokerRegistrationChangeRecord 0-2 flex:0+ api:17
  brokerId int32 0+
  brokerEpoch int64 0+
  fenced int8 0+ tag:0:0+
  inControlledShutdown int8 1+ tag:1:1+
  logDirs []uuid 2+ tag:2:2+

ClientQuotaRecord 0 flex:0+ api:14
  entity []EntityData 0+
    entityType string 0+
    entityName string 0+ null:0+
  key string 0+
  value float64 0+
  remove bool 0+

ClearElrRecord 0 flex:0+ api:28  # 4.x
  topicName string 0+

ConfigRecord 0 flex:0+ api:4
  resourceType int8 0+
  resourceName string 0+
  name string 0+
  value string 0+ null:0+

DelegationTokenRecord 0 flex:0+ api:10
  owner string 0+
  requester string 0+
  renewers []string 0+
  issueTimestamp int64 0+
  maxTimestamp int64 0+
  expirationTimestamp int64 0+
  tokenId string 0+

EndTransactionRecord 0 flex:0+ api:24

FeatureLevelRecord 0 flex:0+ api:12
  name string 0+
  featureLevel int16 0+

FenceBrokerRecord 0 flex:0+ api:7
  id int32 0+
  epoch int64 0+

NoOpRecord 0 flex:0+ api:20

PartitionChangeRecord 0-2 flex:0+ api:5
  partitionId int32 0+ =-1
  topicId uuid 0+
  isr []int32 0+ null:0+ tag:0:0+ =null
  leader int32 0+ tag:1:0+ =-2
  replicas []int32 0+ null:0+ tag:2:0+ =null
  removingReplicas []int32 0+ null:0+ tag:3:0+ =null
  addingReplicas []int32 0+ null:0+ tag:4:0+ =null
  leaderRecoveryState int8 0+ tag:5:0+ =-1
  directories []uuid 1+ null:1+ tag:8:1+ =null
  eligibleLeaderReplicas []int32 2+ null:2+ tag:6:2+ =null
  lastKnownElr []int32 2+ null:2+ tag:7:2+ =null

PartitionRecord 0-2 flex:0+ api:3
  partitionId int32 0+ =-1
  topicId uuid 0+
  replicas []int32 0+
  isr []int32 0+
  removingReplicas []int32 0+
  addingReplicas []int32 0+
  leader int32 0+ =-1
  leaderRecoveryState int8 0+ tag:0:0+ =0
  leaderEpoch int32 0+ =-1
  partitionEpoch int32 0+ =-1
  directories []uuid 1+
  eligibleLeaderReplicas []int32 2+ null:2+ tag:1:2+ =null
  lastKnownElr []int32 2+ null:2+ tag:2:2+ =null

ProducerIdsRecord 0 flex:0+ api:15
  brokerId int32 0+
  brokerEpoch int64 0+ =-1
  nextProducerId int64 0+

RegisterBrokerRecord 0-3 flex:0+ api:0
  brokerId int32 0+
  isMigratingZkBroker bool 2+ =false
  incarnationId uuid 0+
  brokerEpoch int64 0+
  endPoints []BrokerEndpoint 0+
    name string 0+
    host string 0+
    port uint16 0+
    securityProtocol int16 0+
  features []BrokerFeature 0+
    name string 0+
    minSupportedVersion int16 0+
    maxSupportedVersion int16 0+
  rack string 0+ null:0+
  fenced bool 0+ =true
  inControlledShutdown bool 1+ =false
  logDirs []uuid 3+ tag:0:3+

RegisterControllerRecord 0 flex:0+ api:27
  controllerId int32 0+
  incarnationId uuid 0+
  zkMigrationReady bool 0+
  endPoints []ControllerEndpoint 0+
    name string 0+
    host string 0+
    port uint16 0+
    securityProtocol int16 0+
  features []ControllerFeature 0+
    name string 0+
    minSupportedVersion int16 0+
    maxSupportedVersion int16 0+

RemoveAccessControlEntryRecord 0 flex:0+ api:19
  id uuid 0+

RemoveDelegationTokenRecord 0 flex:0+ api:26
  tokenId string 0+

RemoveTopicRecord 0 flex:0+ api:9
  topicId uuid 0+

RemoveUserScramCredentialRecord 0 flex:0+ api:22
  name string 0+
  mechanism int8 0+

TopicRecord 0 flex:0+ api:2
  name string 0+
  topicId uuid 0+

UnfenceBrokerRecord 0 flex:0+ api:8
  id int32 0+
  epoch int64 0+

UnregisterBrokerRecord 0 flex:0+ api:1
  brokerId int32 0+
  brokerEpoch int64 0+

UserScramCredentialRecord 0 flex:0+ api:11
  name string 0+
  mechanism int8 0+
  salt bytes 0+
  storedKey bytes 0+
  serverKey bytes 0+
  iterations int32 0+

ZkMigrationStateRecord 0 flex:0+ api:21
  zkMigrationState int8 0+
""")
