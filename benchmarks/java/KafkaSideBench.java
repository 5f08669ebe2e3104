import java.io.BufferedOutputStream;
import java.io.File;
import java.io.FileOutputStream;
import java.io.FileDescriptor;
import java.io.PrintStream;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.Locale;

import org.apache.kafka.common.compress.Compression;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.internals.RecordHeader;
import org.apache.kafka.common.record.FileLogInputStream.FileChannelRecordBatch;
import org.apache.kafka.common.record.FileRecords;
import org.apache.kafka.common.record.MemoryRecords;
import org.apache.kafka.common.record.MemoryRecordsBuilder;
import org.apache.kafka.common.record.Record;
import org.apache.kafka.common.record.RecordBatch;
import org.apache.kafka.common.record.TimestampType;
import org.apache.kafka.common.utils.Utils;
import org.apache.kafka.storage.internals.log.LogFileUtils;
import org.apache.kafka.storage.internals.log.OffsetIndex;
import org.apache.kafka.storage.internals.log.TimeIndex;

/**
 * The Java side of kfs's benchmark, on Apache Kafka's own classes.
 *
 *   write PARTITION_DIR RECORDS MODE [SEGMENT_BYTES]
 *       a partition written as a broker writes it: MemoryRecordsBuilder batches of 20 records (MODE mixed:
 *       none and lz4 alternating; none: uncompressed), JSON values, a key and one header, appended to
 *       FileRecords with OffsetIndex and TimeIndex entries by LogSegment's rules (index interval, roll, close).
 *   dump PASSES FILE...
 *       what `kafka-dump-log.sh --deep-iteration --print-data-log` prints: a line per batch and per record,
 *       iterating FileRecords (CRC checked per batch); PASSES times in one JVM, each pass's seconds on stderr.
 */
public final class KafkaSideBench {
    private static final long T0 = 1_700_000_000_000L;
    private static final int BATCH_RECORDS = 20;
    private static final int INDEX_INTERVAL_BYTES = 4096;  // the broker's index.interval.bytes default

    public static void main(String[] args) throws Exception {
        if (args.length >= 3 && args[0].equals("write")) {
            write(new File(args[1]), Long.parseLong(args[2]), args.length > 3 ? args[3] : "mixed",
                  args.length > 4 ? Integer.parseInt(args[4]) : 128 << 20);
        } else if (args.length >= 3 && args[0].equals("dump")) {
            int passes = Integer.parseInt(args[1]);
            PrintStream out = new PrintStream(new BufferedOutputStream(new FileOutputStream(FileDescriptor.out), 1 << 16), false);
            for (int pass = 1; pass <= passes; pass++) {
                long start = System.nanoTime();
                for (int i = 2; i < args.length; i++) dump(new File(args[i]), out);
                out.flush();
                System.err.printf(Locale.ROOT, "pass %d: %.6f s%n", pass, (System.nanoTime() - start) / 1e9);
            }
        } else {
            System.err.println("usage: KafkaSideBench write PARTITION_DIR RECORDS [mixed|none] [SEGMENT_BYTES]"
                               + " | dump PASSES FILE...");
            System.exit(2);
        }
    }

    /** A segment being written: Kafka's FileRecords, OffsetIndex and TimeIndex, appended to by LogSegment.append's
     *  index interval rule and closed by onBecomeInactiveSegment's steps (LogSegment itself would bring the
     *  producer-state and config classes into the jar). */
    private static final class Segment {
        final FileRecords log;
        final OffsetIndex offsetIndex;
        final TimeIndex timeIndex;
        int bytesSinceLastIndexEntry;
        long maxTimestampSoFar = RecordBatch.NO_TIMESTAMP;
        long offsetOfMaxTimestampSoFar = -1;

        Segment(File dir, long base) throws Exception {
            log = FileRecords.open(LogFileUtils.logFile(dir, base));
            offsetIndex = new OffsetIndex(LogFileUtils.offsetIndexFile(dir, base), base, 10 << 20);
            timeIndex = new TimeIndex(LogFileUtils.timeIndexFile(dir, base), base, 10 << 20);
        }

        void append(MemoryRecords records, long largestOffset, long largestTimestamp) throws Exception {
            int physicalPosition = log.sizeInBytes();
            log.append(records);
            if (largestTimestamp > maxTimestampSoFar) {
                maxTimestampSoFar = largestTimestamp;
                offsetOfMaxTimestampSoFar = largestOffset;
            }
            if (bytesSinceLastIndexEntry > INDEX_INTERVAL_BYTES) {
                offsetIndex.append(largestOffset, physicalPosition);
                timeIndex.maybeAppend(maxTimestampSoFar, offsetOfMaxTimestampSoFar);
                bytesSinceLastIndexEntry = 0;
            }
            bytesSinceLastIndexEntry += records.sizeInBytes();
        }

        void close() throws Exception {
            timeIndex.maybeAppend(maxTimestampSoFar, offsetOfMaxTimestampSoFar, true);
            offsetIndex.trimToValidSize();
            timeIndex.trimToValidSize();
            log.trim();
            offsetIndex.close();
            timeIndex.close();
            log.close();
        }
    }

    static void write(File dir, long records, String mode, int segmentBytes) throws Exception {
        dir.mkdirs();
        Segment segment = new Segment(dir, 0);
        ByteBuffer buffer = ByteBuffer.allocate(1 << 20);
        long offset = 0;
        for (long batchNo = 0; offset < records; batchNo++) {
            Compression compression = mode.equals("mixed") && batchNo % 2 == 1
                ? Compression.lz4().build() : Compression.NONE;
            buffer.clear();
            MemoryRecordsBuilder builder = MemoryRecords.builder(buffer, RecordBatch.CURRENT_MAGIC_VALUE, compression,
                                                                 TimestampType.CREATE_TIME, offset);
            for (int i = 0; i < BATCH_RECORDS && offset < records; i++, offset++) {
                long user = (offset * 7919) % 5000;
                String key = "user-" + user;
                String value = String.format(Locale.ROOT,
                    "{\"order_id\": %d, \"user\": \"user-%d\", \"total\": %d.%02d, \"currency\": \"EUR\", "
                    + "\"items\": [{\"sku\": \"sku-%d\", \"qty\": %d}], \"note\": \"order %d of the benchmark\"}",
                    offset, user, offset % 500, offset % 100, offset % 997, 1 + offset % 5, offset);
                Header[] headers = {new RecordHeader("trace-id", Long.toHexString(offset * 2654435761L)
                                                     .getBytes(StandardCharsets.UTF_8))};
                builder.append(T0 + offset, key.getBytes(StandardCharsets.UTF_8), value.getBytes(StandardCharsets.UTF_8),
                               headers);
            }
            MemoryRecords batch = builder.build();
            RecordBatch first = batch.batches().iterator().next();
            if (segment.log.sizeInBytes() + batch.sizeInBytes() > segmentBytes) {  // LogSegment.shouldRoll's size rule
                segment.close();
                segment = new Segment(dir, first.baseOffset());
            }
            segment.append(batch, first.lastOffset(), first.maxTimestamp());
        }
        segment.close();
    }

    static void dump(File file, PrintStream out) throws Exception {
        FileRecords records = FileRecords.open(file, false);
        try {
            long position = 0;
            StringBuilder line = new StringBuilder(512);
            for (FileChannelRecordBatch batch : records.batches()) {
                line.setLength(0);
                line.append("baseOffset: ").append(batch.baseOffset()).append(" lastOffset: ").append(batch.lastOffset())
                    .append(" count: ").append(batch.countOrNull()).append(" baseSequence: ").append(batch.baseSequence())
                    .append(" lastSequence: ").append(batch.lastSequence()).append(" producerId: ").append(batch.producerId())
                    .append(" producerEpoch: ").append(batch.producerEpoch())
                    .append(" partitionLeaderEpoch: ").append(batch.partitionLeaderEpoch())
                    .append(" isTransactional: ").append(batch.isTransactional())
                    .append(" isControl: ").append(batch.isControlBatch())
                    .append(" deleteHorizonMs: ").append(batch.deleteHorizonMs())
                    .append(" position: ").append(position).append(' ').append(batch.timestampType()).append(": ")
                    .append(batch.maxTimestamp()).append(" size: ").append(batch.sizeInBytes())
                    .append(" magic: ").append(batch.magic())
                    .append(" compresscodec: ").append(batch.compressionType().name)
                    .append(" crc: ").append(batch.checksum()).append(" isvalid: ").append(batch.isValid());
                out.println(line);
                for (Record record : batch) {
                    line.setLength(0);
                    line.append("| offset: ").append(record.offset()).append(' ').append(batch.timestampType())
                        .append(": ").append(record.timestamp()).append(" keySize: ").append(record.keySize())
                        .append(" valueSize: ").append(record.valueSize()).append(" sequence: ").append(record.sequence())
                        .append(" headerKeys: [");
                    Header[] headers = record.headers();
                    for (int h = 0; h < headers.length; h++) line.append(h == 0 ? "" : ",").append(headers[h].key());
                    line.append(']');
                    if (!batch.isControlBatch()) {
                        if (record.hasKey()) line.append(" key: ").append(Utils.utf8(record.key()));
                        line.append(" payload: ").append(record.hasValue() ? Utils.utf8(record.value()) : "null");
                    }
                    out.println(line);
                }
                position += batch.sizeInBytes();
            }
        } finally {
            records.closeHandlers();
        }
    }
}
