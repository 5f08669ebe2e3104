"""The consumer protocol's subscription and assignment, the bytes a classic group of protocol type
"consumer" keeps per member (clients/src/main/resources/common/message/ConsumerProtocol*.json).

Kafka's schemas at apache/kafka 1eb7644349c, in kfs's notation (kfs/internal_topics/schema.py).
"""

from kfs.internal_topics.schema import parse

CONSUMER_PROTOCOL = parse("""
ConsumerProtocolSubscription 0-3
  topics []string 0+
  userData bytes 0+ null:0+ =null
  ownedPartitions []TopicPartition 1+
    topic string 1+
    partitions []int32 1+
  generationId int32 2+ =-1
  rackId string 3+ null:3+ =null

ConsumerProtocolAssignment 0-3
  assignedPartitions []TopicPartition 0+
    topic string 0+
    partitions []int32 0+
  userData bytes 0+ null:0+ =null
""")
