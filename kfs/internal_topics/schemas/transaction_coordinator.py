"""The records of `__transaction_state` (transaction-coordinator/src/main/resources/common/message/).

Kafka's schemas at apache/kafka 1eb7644349c, in kfs's notation (kfs/internal_topics/schema.py).
"""

from kfs.internal_topics.schema import parse

TRANSACTION_COORDINATOR = parse("""
TransactionLogKey 0
  transactionalId string 0

TransactionLogValue 0-1 flex:1+
  producerId int64 0+
  previousProducerId int64 1+ tag:0:1+ =-1
  nextProducerId int64 1+ tag:1:1+ =-1
  producerEpoch int16 0+
  transactionTimeoutMs int32 0+
  transactionStatus int8 0+
  transactionPartitions []PartitionsSchema 0+ null:0+
    topic string 0+
    partitionIds []int32 0+
  transactionLastUpdateTimestampMs int64 0+
  transactionStartTimestampMs int64 0+
  clientTransactionVersion int16 1+ tag:2:1+ =0
""")
