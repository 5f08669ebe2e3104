package kfs.spark;

import java.io.File;
import java.net.URISyntaxException;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.EnumSet;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;

import org.apache.spark.SparkContext;
import org.apache.spark.SparkContext$;
import org.apache.spark.sql.catalyst.parser.CatalystSqlParser$;
import org.apache.spark.sql.connector.catalog.SupportsRead;
import org.apache.spark.sql.connector.catalog.Table;
import org.apache.spark.sql.connector.catalog.TableCapability;
import org.apache.spark.sql.connector.catalog.TableProvider;
import org.apache.spark.sql.connector.expressions.Transform;
import org.apache.spark.sql.connector.read.Scan;
import org.apache.spark.sql.connector.read.ScanBuilder;
import org.apache.spark.sql.connector.expressions.aggregate.Aggregation;
import org.apache.spark.sql.connector.read.SupportsPushDownAggregates;
import org.apache.spark.sql.connector.read.SupportsPushDownFilters;
import org.apache.spark.sql.connector.read.SupportsPushDownRequiredColumns;
import org.apache.spark.sql.execution.datasources.v2.python.PythonDataSourceCreationResult;
import org.apache.spark.sql.execution.datasources.v2.python.PythonDataSourceReadInfo;
import org.apache.spark.sql.execution.datasources.v2.python.PythonDataSourceV2;
import org.apache.spark.sql.execution.datasources.v2.python.PythonFilterPushdownResult;
import org.apache.spark.sql.execution.datasources.v2.python.PythonScan;
import org.apache.spark.sql.internal.SQLConf;
import org.apache.spark.sql.sources.DataSourceRegister;
import org.apache.spark.sql.sources.Filter;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.util.CaseInsensitiveStringMap;

import scala.Option;

/**
 * {@code format("kfs")}: kfs's Python data source with the column pruning the Python Data Source API
 * cannot ask for, read as columns.
 *
 * <p>Spark hands a Python data source's reader the whole schema whatever the query reads, and copies
 * every column of every row from the Python worker into the JVM: for a count, most of the work. This
 * class is the planner's side of the source: it tells Spark it prunes columns
 * ({@link SupportsPushDownRequiredColumns}) and plans the read with the pruned schema through Spark's
 * own Python data source calls, so the Python reader (kfs.spark.source) is given the columns the query
 * reads and builds only those; {@link ColumnarPythonScan} then runs that read as Spark runs a Python
 * data source's, and hands Spark its Arrow batches as columns. Records are still decoded by kfs's
 * Python and C in Spark's Python workers.
 *
 * <p>It is compiled against the installed PySpark by kfs.spark.jvm (Spark's Python data source classes
 * are internal ones), and only used when kfs.spark.register finds it on the session's classpath.
 */
public final class ColumnPruningSource implements TableProvider, DataSourceRegister {
  /** The name kfs.spark.register gives the Python data source when this class fronts it. */
  public static final String PYTHON_NAME = "kfs_python";

  private final PythonDataSourceV2 python = new PythonDataSourceV2();

  public ColumnPruningSource() {
    python.setShortName(PYTHON_NAME);
  }

  @Override
  public String shortName() {
    return "kfs";
  }

  @Override
  public StructType inferSchema(CaseInsensitiveStringMap options) {
    return python.inferSchema(options);
  }

  @Override
  public boolean supportsExternalMetadata() {
    return true;
  }

  @Override
  public Table getTable(StructType schema, Transform[] partitioning, Map<String, String> properties) {
    return new PrunableTable(python, schema);
  }

  /**
   * Whether every executor has this jar on its classpath: a local master (one JVM), or a session started
   * with it in {@code spark.jars}. A jar added to a running session ({@code ADD JAR}, as
   * kfs.spark.register does) reaches a cluster's executors in a class loader their task deserializer
   * does not use, so there the scan stays Spark's own.
   */
  static boolean executorsLoadThisJar() {
    Option<SparkContext> active = SparkContext$.MODULE$.getActive();
    if (active.isEmpty()) {
      return false;
    }
    SparkContext context = active.get();
    if (context.isLocal()) {
      return true;
    }
    String here;
    try {
      here = new File(ColumnPruningSource.class.getProtectionDomain().getCodeSource().getLocation().toURI())
          .getName();
    } catch (URISyntaxException | SecurityException | NullPointerException e) {
      return false;
    }
    for (String jar : context.conf().get("spark.jars", "").split(",")) {
      String name = jar.trim();
      if (!name.isEmpty() && new File(name.replaceFirst("^file:", "")).getName().equals(here)) {
        return true;
      }
    }
    return false;
  }

  private static final class PrunableTable implements Table, SupportsRead {
    private final PythonDataSourceV2 python;
    private final StructType schema;

    PrunableTable(PythonDataSourceV2 python, StructType schema) {
      this.python = python;
      this.schema = schema;
    }

    @Override
    public String name() {
      return "kfs";
    }

    @SuppressWarnings("deprecation")
    @Override
    public StructType schema() {
      return schema;
    }

    @Override
    public Set<TableCapability> capabilities() {
      return EnumSet.of(TableCapability.BATCH_READ);
    }

    @Override
    public ScanBuilder newScanBuilder(CaseInsensitiveStringMap options) {
      return new PruningScanBuilder(python, schema, options);
    }
  }

  /**
   * Filters as Spark's PythonScanBuilder pushes them (to the Python reader's pushFilters), columns
   * pruned or aggregates taken ({@link AggregatePushdown}), and the read planned once, in {@link #build},
   * with the pruned (or partial rows') schema.
   */
  private static final class PruningScanBuilder implements ScanBuilder, SupportsPushDownFilters,
      SupportsPushDownRequiredColumns, SupportsPushDownAggregates {
    private final PythonDataSourceV2 python;
    private final StructType schema;
    private final CaseInsensitiveStringMap options;
    private StructType readSchema;
    private Filter[] offered = new Filter[0];
    private Filter[] pushed = new Filter[0];
    private String pushedAggregates = "";

    PruningScanBuilder(PythonDataSourceV2 python, StructType schema, CaseInsensitiveStringMap options) {
      this.python = python;
      this.schema = schema;
      this.options = options;
      this.readSchema = schema;
    }

    private PythonDataSourceCreationResult created() {
      return python.getOrCreateDataSourceInPython(PYTHON_NAME, options, Option.apply(schema));
    }

    @Override
    public Filter[] pushFilters(Filter[] filters) {
      if (!SQLConf.get().pythonFilterPushDown() || filters.length == 0) {
        return filters;
      }
      Option<PythonFilterPushdownResult> result =
          python.source().pushdownFiltersInPython(created(), schema, filters);
      if (result.isEmpty()) {
        return filters;
      }
      offered = filters;
      pushed = select(filters, result.get(), true);
      return select(filters, result.get(), false);
    }

    private static Filter[] select(Filter[] filters, PythonFilterPushdownResult result, boolean wanted) {
      List<Filter> out = new ArrayList<>();
      scala.collection.Iterator<Object> flags = result.isFilterPushed().iterator();
      for (Filter filter : filters) {
        if ((Boolean) flags.next() == wanted) {
          out.add(filter);
        }
      }
      return out.toArray(new Filter[0]);
    }

    @Override
    public Filter[] pushedFilters() {
      return pushed;
    }

    /**
     * Takes the aggregation when {@link AggregatePushdown} does and no filter was pushed (the reader
     * that pushes them is planned with the columns they name); option {@code aggregatePushdown=false}
     * leaves every aggregation to Spark.
     */
    @Override
    public boolean pushAggregation(Aggregation aggregation) {
      if (offered.length > 0 || !options.getBoolean("aggregatePushdown", true)) {
        return false;
      }
      StructType partial = AggregatePushdown.partialSchema(aggregation, schema, SQLConf.get().ansiEnabled());
      if (partial == null) {
        return false;
      }
      readSchema = partial;
      pushedAggregates = AggregatePushdown.describe(aggregation);
      return true;
    }

    @Override
    public void pruneColumns(StructType required) {
      // The columns the filters offered to the reader name are read whole: PySpark plans the read that
      // pushes them only with a schema holding every column a filter names.
      Set<String> filtered = new HashSet<>();
      for (Filter filter : offered) {
        for (String name : filter.references()) {
          filtered.add(CatalystSqlParser$.MODULE$.parseMultipartIdentifier(name).head());
        }
      }
      List<StructField> fields = new ArrayList<>();
      for (StructField field : schema.fields()) {
        if (filtered.contains(field.name())) {
          fields.add(field);
        } else if (required.getFieldIndex(field.name()).isDefined()) {
          fields.add(required.apply(field.name()));
        }
      }
      // No column at all (a count): keep the cheapest one, so the Python worker's batches still carry
      // their row counts (a batch of no columns would cross to the JVM as no rows).
      if (fields.isEmpty()) {
        fields.add(schema.apply("partition"));
      }
      readSchema = new StructType(fields.toArray(new StructField[0]));
    }

    @Override
    public Scan build() {
      PythonDataSourceReadInfo info;
      if (offered.length > 0) {
        // The read is planned again, with the pruned schema, by the reader that pushes filters: it
        // must push the same ones Spark has already dropped from its plan.
        Option<PythonFilterPushdownResult> result =
            python.source().pushdownFiltersInPython(created(), readSchema, offered);
        if (result.isEmpty() || !Arrays.equals(select(offered, result.get(), true), pushed)) {
          throw new IllegalStateException(
              "kfs: the Python reader pushed other filters when the read was planned again");
        }
        info = result.get().readInfo();
      } else {
        info = python.source().createReadInfoInPython(created(), readSchema, false);
      }
      // The read planned for this scan is the scan's own: two scans of one DataFrame (a self-join) read
      // different columns. Spark gets its batches as columns (ColumnarPythonScan) where the executors can
      // load this jar; else as rows, through Spark's own scan (still of the pruned columns).
      String description = "kfs " + readSchema.simpleString() + " PushedFilters: " + Arrays.toString(pushed)
          + pushedAggregates;
      if (executorsLoadThisJar()) {
        return new ColumnarPythonScan(python.source(), info, readSchema, description);
      }
      PythonDataSourceV2 scanSource = new PythonDataSourceV2();
      scanSource.setShortName(PYTHON_NAME);
      scanSource.setReadInfo(info);
      return new PythonScan(scanSource, PYTHON_NAME, readSchema, options, pushed);
    }
  }
}
