"""The records of `__consumer_offsets`: offset commits, classic groups, KIP-848 consumer groups and
KIP-932 share groups (group-coordinator/src/main/resources/common/message/ in apache/kafka).

A key's version is its record type: 0 and 1 OffsetCommitKey, 2 GroupMetadataKey, 3 and up the
types of GroupCoordinatorRecordSerde; the value of a key of type T is the value schema named like it.

Kafka's schemas at apache/kafka 1eb7644349c, in kfs's notation (kfs/internal_topics/schema.py), with what
Kafka 4.x added since (marked "4.x"): tagged fields, which older readers skip, and record type 16.
"""

from kfs.internal_topics.schema import parse

GROUP_COORDINATOR = parse("""
ConsumerGroupCurrentMemberAssignmentKey 8
  groupId string 8
  memberId string 8

ConsumerGroupCurrentMemberAssignmentValue 0 flex:0+
  memberEpoch int32 0+
  previousMemberEpoch int32 0+
  state int8 0+
  assignedPartitions []TopicPartitions 0+
    topicId uuid 0+
    partitions []int32 0+
    assignmentEpochs []int32 0+ null:0+ tag:0:0+ =null  # 4.x (KIP-1251)
  partitionsPendingRevocation []TopicPartitions 0+

ConsumerGroupMemberMetadataKey 5
  groupId string 5
  memberId string 5

ConsumerGroupMemberMetadataValue 0 flex:0+
  instanceId string 0+ null:0+
  rackId string 0+ null:0+
  clientId string 0+
  clientHost string 0+
  subscribedTopicNames []string 0+
  subscribedTopicRegex string 0+ null:0+
  rebalanceTimeoutMs int32 0+ =-1
  serverAssignor string 0+ null:0+
  # the default is an empty struct: Kafka's schema says JSON null, which its generator reads as none given
  classicMemberMetadata ClassicMemberMetadata 0+ null:0+ tag:0:0+
    sessionTimeoutMs int32 0+
    supportedProtocols []ClassicProtocol 0+
      name string 0+
      metadata bytes 0+

ConsumerGroupMetadataKey 3
  groupId string 3

ConsumerGroupMetadataValue 0 flex:0+
  epoch int32 0+
  metadataHash int64 0+ tag:0:0+ =0  # 4.x (KIP-1101)
  creationTimeMs int64 0+ tag:1:0+ =-1  # 4.x

ConsumerGroupPartitionMetadataKey 4
  groupId string 4

ConsumerGroupPartitionMetadataValue 0 flex:0+
  topics []TopicMetadata 0+
    topicId uuid 0+
    topicName string 0+
    numPartitions int32 0+
    partitionMetadata []PartitionMetadata 0+
      partition int32 0+
      racks []string 0+

ConsumerGroupTargetAssignmentMemberKey 7
  groupId string 7
  memberId string 7

ConsumerGroupTargetAssignmentMemberValue 0 flex:0+
  topicPartitions []TopicPartition 0+
    topicId uuid 0+
    partitions []int32 0+

ConsumerGroupTargetAssignmentMetadataKey 6
  groupId string 6

ConsumerGroupTargetAssignmentMetadataValue 0 flex:0+
  assignmentEpoch int32 0+
  assignmentTimestamp int64 0+ tag:0:0+ =0  # 4.x (KIP-1263)

ConsumerGroupRegularExpressionKey 16  # 4.x
  groupId string 16
  regularExpression string 16

ConsumerGroupRegularExpressionValue 0 flex:0+  # 4.x
  topics []string 0+
  version int64 0+
  timestamp int64 0+

GroupMetadataKey 2
  group string 2

GroupMetadataValue 0-4 flex:4+
  protocolType string 0+
  generation int32 0+
  protocol string 0+ null:0+
  leader string 0+ null:0+
  currentStateTimestamp int64 2+ =-1
  members []MemberMetadata 0+
    memberId string 0+
    groupInstanceId string 3+ null:3+ =null
    clientId string 0+
    clientHost string 0+
    rebalanceTimeout int32 1+ =-1
    sessionTimeout int32 0+
    subscription bytes 0+
    assignment bytes 0+

OffsetCommitKey 0-1
  group string 0-1
  topic string 0-1
  partition int32 0-1

OffsetCommitValue 0-4 flex:4+
  offset int64 0+
  leaderEpoch int32 3+ =-1
  metadata string 0+
  commitTimestamp int64 0+
  expireTimestamp int64 1 =-1

ShareGroupCurrentMemberAssignmentKey 14
  groupId string 14
  memberId string 14

ShareGroupCurrentMemberAssignmentValue 0 flex:0+
  memberEpoch int32 0+
  previousMemberEpoch int32 0+
  state int8 0+
  assignedPartitions []TopicPartitions 0+
    topicId uuid 0+
    partitions []int32 0+

ShareGroupMemberMetadataKey 10
  groupId string 10
  memberId string 10

ShareGroupMemberMetadataValue 0 flex:0+
  rackId string 0+ null:0+
  clientId string 0+
  clientHost string 0+
  subscribedTopicNames []string 0+

ShareGroupMetadataKey 11
  groupId string 11

ShareGroupMetadataValue 0 flex:0+
  epoch int32 0+

ShareGroupPartitionMetadataKey 9
  groupId string 9

ShareGroupPartitionMetadataValue 0 flex:0+
  topics []TopicMetadata 0+
    topicId uuid 0+
    topicName string 0+
    numPartitions int32 0+
    partitionMetadata []PartitionMetadata 0+
      partition int32 0+
      racks []string 0+

ShareGroupStatePartitionMetadataKey 15
  groupId string 15

ShareGroupStatePartitionMetadataValue 0 flex:0+
  initializedTopics []TopicPartitionsInfo 0+
    topicId uuid 0+
    topicName string 0+
    partitions []int32 0+
  deletingTopics []TopicInfo 0+
    topicId uuid 0+
    topicName string 0+

ShareGroupTargetAssignmentMemberKey 13
  groupId string 13
  memberId string 13

ShareGroupTargetAssignmentMemberValue 0 flex:0+
  topicPartitions []TopicPartition 0+
    topicId uuid 0+
    partitions []int32 0+

ShareGroupTargetAssignmentMetadataKey 12
  groupId string 12

ShareGroupTargetAssignmentMetadataValue 0 flex:0+
  assignmentEpoch int32 0+
""")
