package kfs.spark;

import org.apache.arrow.vector.BaseFixedWidthVector;
import org.apache.arrow.vector.BaseVariableWidthVector;
import org.apache.arrow.vector.BigIntVector;
import org.apache.arrow.vector.BitVector;
import org.apache.arrow.vector.DateDayVector;
import org.apache.arrow.vector.Float4Vector;
import org.apache.arrow.vector.Float8Vector;
import org.apache.arrow.vector.IntVector;
import org.apache.arrow.vector.SmallIntVector;
import org.apache.arrow.vector.TimeStampMicroTZVector;
import org.apache.arrow.vector.TimeStampMicroVector;
import org.apache.arrow.vector.TinyIntVector;
import org.apache.arrow.vector.ValueVector;
import org.apache.arrow.vector.VarBinaryVector;
import org.apache.arrow.vector.VarCharVector;
import org.apache.arrow.vector.complex.StructVector;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.Decimal;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.vectorized.ArrowColumnVector;
import org.apache.spark.sql.vectorized.ColumnVector;
import org.apache.spark.sql.vectorized.ColumnarArray;
import org.apache.spark.sql.vectorized.ColumnarMap;
import org.apache.spark.unsafe.Platform;
import org.apache.spark.unsafe.types.UTF8String;

/**
 * A column of the runner's current Arrow batch, read in place at its buffers' addresses.
 *
 * <p>Spark's ArrowColumnVector reads each value through Arrow's ArrowBuf, which checks the buffer's
 * reference count and bounds on every access: those checks and the accessors' indirections were ~40%
 * of a sum of one decoded field's JVM samples, ~20% of a count by topic's (JFR). Spark's own
 * off-heap vectors (OffHeapColumnVector) read their memory with Platform's unchecked loads; this
 * column does the same over the batch's Arrow buffers, for the types kfs's columns are made of: fixed
 * width numbers, booleans, dates and timestamps, strings and binaries with 32-bit offsets, and structs
 * of them. Other types (lists, maps, decimals, ...) stay ArrowColumnVectors (`of`).
 *
 * <p>The addresses are the current batch's: the reader makes the batch's columns anew for every batch
 * the runner loads, and Spark has read a batch before it asks for the next. The buffers are the runner's:
 * nothing here frees them.
 */
final class DirectArrowColumn extends ColumnVector {
  private final int nulls;
  private final long validity;
  private final long data;     // values (fixed width), or bytes (strings, binaries)
  private final long offsets;  // strings and binaries: their int32 offsets
  private final ColumnVector[] children;  // structs

  private DirectArrowColumn(DataType type, ValueVector vector, long data, long offsets, ColumnVector[] children) {
    super(type);
    this.nulls = vector.getNullCount();
    this.validity = nulls == 0 ? 0L : vector.getValidityBuffer().memoryAddress();
    this.data = data;
    this.offsets = offsets;
    this.children = children;
  }

  /**
   * `vector` (of Spark type `type`, its first `rows` values read) as a column Spark reads in place, or
   * as Spark's own Arrow column. Its buffers are checked to hold those rows first (offsets in order and
   * within the data): unchecked loads past a buffer would read another object's memory, or crash the
   * JVM, where ArrowColumnVector throws.
   */
  static ColumnVector of(ValueVector vector, DataType type, int rows) {
    if (readInPlace(vector) || vector instanceof BitVector) {
      BaseFixedWidthVector fixed = (BaseFixedWidthVector) vector;
      long bytes = vector instanceof BitVector ? (rows + 7L) / 8 : (long) fixed.getTypeWidth() * rows;
      check(vector, rows, fixed.getDataBuffer().capacity() >= bytes);
      return new DirectArrowColumn(type, vector, fixed.getDataBufferAddress(), 0L, null);
    }
    if (vector instanceof VarCharVector || vector instanceof VarBinaryVector) {
      BaseVariableWidthVector variable = (BaseVariableWidthVector) vector;
      check(vector, rows, offsetsWithin(variable, rows));
      return new DirectArrowColumn(type, vector, variable.getDataBufferAddress(), variable.getOffsetBufferAddress(),
          null);
    }
    if (vector instanceof StructVector struct && type instanceof StructType fields) {
      check(vector, rows, true);
      ColumnVector[] children = new ColumnVector[fields.fields().length];
      for (int i = 0; i < children.length; i++) {
        children[i] = of(struct.getChildByOrdinal(i), fields.fields()[i].dataType(), rows);
      }
      return new DirectArrowColumn(type, vector, 0L, 0L, children);
    }
    return new RunnerOwnedColumn(vector);
  }

  /** Whether a string or binary vector's offsets for `rows` values are there, in order, within its data. */
  private static boolean offsetsWithin(BaseVariableWidthVector vector, int rows) {
    if (rows == 0) {
      return true;
    }
    if (vector.getOffsetBuffer().capacity() < 4L * (rows + 1L)) {
      return false;
    }
    long at = vector.getOffsetBufferAddress();
    int previous = Platform.getInt(null, at);
    if (previous < 0) {
      return false;
    }
    for (int i = 1; i <= rows; i++) {
      int next = Platform.getInt(null, at + 4L * i);
      if (next < previous) {
        return false;
      }
      previous = next;
    }
    return previous <= vector.getDataBuffer().capacity();
  }

  /** IllegalStateException unless `vector` holds `rows` values, its validity bits and (`buffers`) its data. */
  private static void check(ValueVector vector, int rows, boolean buffers) {
    boolean validity = vector.getNullCount() == 0 || vector.getValidityBuffer().capacity() >= (rows + 7L) / 8;
    if (vector.getValueCount() < rows || !validity || !buffers) {
      throw new IllegalStateException("kfs: the Python reader's batch has a " + vector.getField()
          + " column whose buffers do not hold its " + rows + " rows");
    }
  }

  /** The fixed-width vectors read in place by their width: 1, 2, 4 and 8-byte numbers, dates,
   * microsecond timestamps (BitVector too, by bits; not decimals). */
  private static boolean readInPlace(ValueVector vector) {
    return vector instanceof TinyIntVector || vector instanceof SmallIntVector || vector instanceof IntVector
        || vector instanceof DateDayVector || vector instanceof Float4Vector || vector instanceof BigIntVector
        || vector instanceof Float8Vector || vector instanceof TimeStampMicroTZVector
        || vector instanceof TimeStampMicroVector;
  }

  /**
   * A column of the runner's batch left to Spark's ArrowColumnVector. Spark closes a columnar scan's
   * batch when it has read it (ColumnarBatch.closeIfFreeable), but these vectors are the runner's,
   * loaded again with the next batch and closed by the runner at the end of the task: a closed struct
   * vector would have lost its fields.
   */
  static final class RunnerOwnedColumn extends ArrowColumnVector {
    RunnerOwnedColumn(ValueVector vector) {
      super(vector);
    }

    @Override
    public void closeIfFreeable() {
    }
  }

  /** Bit i of the bitmap at `bits` (validity, or a BitVector's values), least significant bit first. */
  private static boolean bit(long bits, int i) {
    return (Platform.getByte(null, bits + (i >> 3)) & (1 << (i & 7))) != 0;
  }

  /** Where value i of a string or binary column starts in its data (and value i - 1 ends). */
  private int offset(int i) {
    return Platform.getInt(null, offsets + 4L * i);
  }

  @Override
  public void close() {
  }

  @Override
  public void closeIfFreeable() {
  }

  @Override
  public boolean hasNull() {
    return nulls > 0;
  }

  @Override
  public int numNulls() {
    return nulls;
  }

  @Override
  public boolean isNullAt(int rowId) {
    return nulls > 0 && !bit(validity, rowId);
  }

  @Override
  public boolean getBoolean(int rowId) {
    return bit(data, rowId);
  }

  @Override
  public byte getByte(int rowId) {
    return Platform.getByte(null, data + rowId);
  }

  @Override
  public short getShort(int rowId) {
    return Platform.getShort(null, data + 2L * rowId);
  }

  @Override
  public int getInt(int rowId) {
    return Platform.getInt(null, data + 4L * rowId);
  }

  @Override
  public long getLong(int rowId) {
    return Platform.getLong(null, data + 8L * rowId);
  }

  @Override
  public float getFloat(int rowId) {
    return Platform.getFloat(null, data + 4L * rowId);
  }

  @Override
  public double getDouble(int rowId) {
    return Platform.getDouble(null, data + 8L * rowId);
  }

  @Override
  public UTF8String getUTF8String(int rowId) {
    if (isNullAt(rowId)) {
      return null;
    }
    int start = offset(rowId);
    return UTF8String.fromAddress(null, data + start, offset(rowId + 1) - start);
  }

  @Override
  public byte[] getBinary(int rowId) {
    if (isNullAt(rowId)) {
      return null;
    }
    int start = offset(rowId);
    byte[] bytes = new byte[offset(rowId + 1) - start];
    Platform.copyMemory(null, data + start, bytes, Platform.BYTE_ARRAY_OFFSET, bytes.length);
    return bytes;
  }

  @Override
  public ColumnVector getChild(int ordinal) {
    return children[ordinal];
  }

  @Override
  public ColumnarArray getArray(int rowId) {
    throw unsupported("array");
  }

  @Override
  public ColumnarMap getMap(int ordinal) {
    throw unsupported("map");
  }

  @Override
  public Decimal getDecimal(int rowId, int precision, int scale) {
    throw unsupported("decimal");
  }

  private UnsupportedOperationException unsupported(String what) {
    return new UnsupportedOperationException("kfs: a " + dataType().simpleString() + " column read as a " + what);
  }
}
