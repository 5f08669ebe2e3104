package kfs.spark;

import java.util.HashMap;
import java.util.List;
import java.util.Map;

import org.apache.arrow.vector.complex.StructVector;
import org.apache.spark.JobArtifactSet$;
import org.apache.spark.JobArtifactState;
import org.apache.spark.TaskContext;
import org.apache.spark.api.python.ChainedPythonFunctions;
import org.apache.spark.api.python.PythonEvalType$;
import org.apache.spark.api.python.PythonFunction;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.GenericInternalRow;
import org.apache.spark.sql.connector.metric.CustomMetric;
import org.apache.spark.sql.connector.metric.CustomTaskMetric;
import org.apache.spark.sql.connector.read.Batch;
import org.apache.spark.sql.connector.read.InputPartition;
import org.apache.spark.sql.connector.read.PartitionReader;
import org.apache.spark.sql.connector.read.PartitionReaderFactory;
import org.apache.spark.sql.connector.read.Scan;
import org.apache.spark.sql.execution.datasources.v2.python.PythonCustomMetric;
import org.apache.spark.sql.execution.datasources.v2.python.PythonDataSourceReadInfo;
import org.apache.spark.sql.execution.datasources.v2.python.PythonInputPartition;
import org.apache.spark.sql.execution.datasources.v2.python.UserDefinedPythonDataSource;
import org.apache.spark.sql.execution.metric.SQLMetric;
import org.apache.spark.sql.execution.python.ArrowPythonRunner;
import org.apache.spark.sql.internal.SQLConf;
import org.apache.spark.sql.types.DataType$;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.vectorized.ArrowColumnVector;
import org.apache.spark.sql.vectorized.ColumnVector;
import org.apache.spark.sql.vectorized.ColumnarBatch;

import scala.Option;
import scala.Tuple2;
import scala.jdk.javaapi.CollectionConverters;

/**
 * The read of a Python data source, handed to Spark as the columnar batches the Python worker sends.
 *
 * <p>Spark's own plan of a Python data source read (PythonScan) turns every Arrow batch from the Python
 * worker into rows and copies each row into an UnsafeRow before anything reads it: for a count by topic
 * that copy, and the row-by-row metrics that go with it, were a third of the JVM's work. Here the same
 * Python read function runs through the same runner (ArrowPythonRunner, as Spark's
 * MapInBatchEvaluatorFactory runs it), and the batch's columns are given to Spark as they arrived, so
 * generated code reads them in place (DirectArrowColumn).
 */
final class ColumnarPythonScan implements Scan, Batch {
  private final UserDefinedPythonDataSource source;
  private final PythonDataSourceReadInfo info;
  private final StructType readSchema;
  private final String description;

  ColumnarPythonScan(UserDefinedPythonDataSource source, PythonDataSourceReadInfo info, StructType readSchema,
      String description) {
    this.source = source;
    this.info = info;
    this.readSchema = readSchema;
    this.description = description;
  }

  @Override
  public StructType readSchema() {
    return readSchema;
  }

  @Override
  public String description() {
    return description;
  }

  @Override
  public Batch toBatch() {
    return this;
  }

  @Override
  public CustomMetric[] supportedCustomMetrics() {
    return source.createPythonMetrics();
  }

  @Override
  public InputPartition[] planInputPartitions() {
    List<byte[]> pickled = CollectionConverters.asJava(info.partitions());
    InputPartition[] partitions = new InputPartition[pickled.size()];
    for (int i = 0; i < partitions.length; i++) {
      partitions[i] = new PythonInputPartition(i, pickled.get(i));
    }
    return partitions;
  }

  @Override
  public PartitionReaderFactory createReaderFactory() {
    Option<JobArtifactState> artifacts = JobArtifactSet$.MODULE$.getCurrentJobArtifactState();
    Option<String> artifactUuid = artifacts.isDefined() ? Option.apply(artifacts.get().uuid()) : Option.empty();
    Option<String> sessionUuid = Option.empty();
    Option<org.apache.spark.sql.classic.SparkSession> session =
        org.apache.spark.sql.classic.SparkSession$.MODULE$.getActiveSession();
    if (session.isDefined()) {
      sessionUuid = Option.apply(session.get().sessionUUID());
    }
    return new ReaderFactory(source, source.createPythonFunction(info.func()), readSchema, artifactUuid,
        sessionUuid);
  }

  private static final class ReaderFactory implements PartitionReaderFactory {
    private static final long serialVersionUID = 1L;
    private final UserDefinedPythonDataSource source;
    private final PythonFunction read;
    private final StructType schema;
    private final Option<String> artifactUuid;
    private final Option<String> sessionUuid;

    ReaderFactory(UserDefinedPythonDataSource source, PythonFunction read, StructType schema,
        Option<String> artifactUuid, Option<String> sessionUuid) {
      this.source = source;
      this.read = read;
      this.schema = schema;
      this.artifactUuid = artifactUuid;
      this.sessionUuid = sessionUuid;
    }

    @Override
    public boolean supportColumnarReads(InputPartition partition) {
      return true;
    }

    @Override
    public PartitionReader<InternalRow> createReader(InputPartition partition) {
      throw new UnsupportedOperationException("kfs: this scan is read in columnar batches only");
    }

    @Override
    public PartitionReader<ColumnarBatch> createColumnarReader(InputPartition partition) {
      return new Reader(this, (PythonInputPartition) partition);
    }
  }

  /** One task: the Python read function run over its pickled partition; each output batch's columns. */
  private static final class Reader implements PartitionReader<ColumnarBatch> {
    private final ReaderFactory factory;
    private final scala.collection.immutable.Map<String, SQLMetric> metrics = PythonCustomMetric.pythonMetrics();
    private final scala.collection.Iterator<ColumnarBatch> batches;
    private ColumnarBatch current;

    Reader(ReaderFactory factory, PythonInputPartition partition) {
      this.factory = factory;
      SQLConf conf = SQLConf.get();
      StructType inputSchema = new StructType(new StructField[] {
          new StructField("struct", UserDefinedPythonDataSource.readInputSchema(), true,
              org.apache.spark.sql.types.Metadata.empty())});
      List<Tuple2<ChainedPythonFunctions, Object>> functions = List.of(new Tuple2<>(
          new ChainedPythonFunctions(CollectionConverters.asScala(List.of(factory.read)).toList()), (Object) 0L));
      ArrowPythonRunner runner = new NoDelayArrowPythonRunner(  // (Spark's runner, Nagle off: its comment)
          CollectionConverters.asScala(functions).toList(),
          PythonEvalType$.MODULE$.SQL_MAP_ARROW_ITER_UDF(),
          new int[][] {{0}},
          inputSchema,
          conf.sessionLocalTimeZone(),
          conf.arrowUseLargeVarTypes(),
          ArrowPythonRunner.getPythonRunnerConfMap(conf),
          metrics,
          factory.artifactUuid,
          factory.sessionUuid);
      // The input: one row holding a struct of the pickled partition, as MapInBatchEvaluatorFactory wraps it.
      InternalRow row = new GenericInternalRow(new Object[] {
          new GenericInternalRow(new Object[] {partition.pickedPartition()})});
      scala.collection.Iterator<InternalRow> rows =
          CollectionConverters.asScala(List.of(row).iterator());
      scala.collection.Iterator<scala.collection.Iterator<InternalRow>> inputs =
          CollectionConverters.asScala(List.of(rows).iterator());
      TaskContext context = TaskContext.get();
      this.batches = runner.compute(inputs, context.partitionId(), context);
    }

    @Override
    public boolean next() {
      if (!batches.hasNext()) {
        return false;
      }
      ColumnarBatch batch = batches.next();
      // The read function's rows come as one struct column: its fields are the scan's columns.
      ArrowColumnVector struct = (ArrowColumnVector) batch.column(0);
      if (current == null && !DataType$.MODULE$.equalsIgnoreCompatibleNullability(struct.dataType(), factory.schema)) {
        throw new IllegalStateException("kfs: the Python reader's batches are " + struct.dataType().simpleString()
            + ", not the planned " + factory.schema.simpleString());
      }
      StructVector fields = (StructVector) struct.getValueVector();
      int width = factory.schema.fields().length;
      ColumnVector[] columns = new ColumnVector[width];
      for (int i = 0; i < width; i++) {
        columns[i] = DirectArrowColumn.of(fields.getChildByOrdinal(i), factory.schema.fields()[i].dataType(),
            batch.numRows());
      }
      current = new ColumnarBatch(columns, batch.numRows());
      return true;
    }

    @Override
    public ColumnarBatch get() {
      return current;
    }

    @Override
    public void close() {
      // (the runner is closed by its task-completion listener, as Spark's own read leaves it)
    }

    @Override
    public CustomTaskMetric[] currentMetricsValues() {
      Map<String, Object> values = new HashMap<>();
      for (Map.Entry<String, SQLMetric> metric : CollectionConverters.asJava(metrics).entrySet()) {
        values.put(metric.getKey(), metric.getValue().value());
      }
      return factory.source.createPythonTaskMetrics(
          scala.collection.immutable.Map$.MODULE$.from(CollectionConverters.asScala(values)));
    }
  }
}
