package kfs.spark;

import java.util.ArrayList;
import java.util.List;
import java.util.Set;

import org.apache.spark.sql.connector.expressions.Expression;
import org.apache.spark.sql.connector.expressions.NamedReference;
import org.apache.spark.sql.connector.expressions.aggregate.AggregateFunc;
import org.apache.spark.sql.connector.expressions.aggregate.Aggregation;
import org.apache.spark.sql.connector.expressions.aggregate.Count;
import org.apache.spark.sql.connector.expressions.aggregate.CountStar;
import org.apache.spark.sql.connector.expressions.aggregate.Max;
import org.apache.spark.sql.connector.expressions.aggregate.Min;
import org.apache.spark.sql.connector.expressions.aggregate.Sum;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.Metadata;
import org.apache.spark.sql.types.MetadataBuilder;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;

/**
 * The aggregates of a query the Python reader computes per task (Spark's partial aggregation pushed into
 * the scan, as its Parquet and JDBC sources do): what Spark would otherwise copy row by row out of the
 * Python worker and aggregate in the JVM. Spark still aggregates the tasks' partial rows (no complete
 * pushdown), so a partial is what its own partial aggregate would have been.
 *
 * <p>Taken: {@code count(*)}, {@code count(col)}, {@code sum} of an int or long column, {@code min} /
 * {@code max} of an int, long or timestamp column (nested fields too: {@code sum(value_decoded.amount)}),
 * grouped by nothing or by {@code topic} / {@code partition} (few groups a task). Anything else (distinct,
 * other functions or types, other groupings) is left to Spark, as are queries with pushed filters.
 *
 * <p>The read schema is the partial rows' (grouping columns, then one column an aggregate); each field's
 * metadata says what it is ({@code kfs.aggregate}: group, count_star, count, sum, min, max;
 * {@code kfs.column}: the path of the column it reads; {@code kfs.ansi}: whether a sum that overflows a
 * long is an error, as in Spark's ANSI mode, or wraps), which the Python reader
 * (kfs.spark.aggregates) reads.
 */
final class AggregatePushdown {
  static final String KIND = "kfs.aggregate";
  static final String COLUMN = "kfs.column";
  static final String ANSI = "kfs.ansi";
  private static final Set<String> GROUPABLE = Set.of("topic", "partition");
  private static final Set<DataType> SUMMABLE = Set.of(DataTypes.IntegerType, DataTypes.LongType);
  private static final Set<DataType> ORDERED =
      Set.of(DataTypes.IntegerType, DataTypes.LongType, DataTypes.TimestampType);

  private AggregatePushdown() {}

  /** The partial rows' schema for {@code aggregation} over {@code schema}, or null: not taken. */
  static StructType partialSchema(Aggregation aggregation, StructType schema, boolean ansi) {
    List<StructField> fields = new ArrayList<>();
    for (Expression grouping : aggregation.groupByExpressions()) {
      String[] path = path(grouping);
      if (path == null || path.length != 1 || !GROUPABLE.contains(path[0])) {
        return null;
      }
      DataType type = typeAt(schema, path);
      if (type == null) {
        return null;
      }
      fields.add(new StructField(path[0], type, true, metadata("group", path, ansi)));
    }
    int ordinal = 0;
    for (AggregateFunc function : aggregation.aggregateExpressions()) {
      StructField field = partialField(function, schema, "agg" + ordinal++, ansi);
      if (field == null) {
        return null;
      }
      fields.add(field);
    }
    return new StructType(fields.toArray(new StructField[0]));
  }

  private static StructField partialField(AggregateFunc function, StructType schema, String name, boolean ansi) {
    if (function instanceof CountStar) {
      return new StructField(name, DataTypes.LongType, false, metadata("count_star", new String[0], ansi));
    }
    String kind;
    Expression column;
    Set<DataType> types = null;
    if (function instanceof Count count && !count.isDistinct()) {
      kind = "count";
      column = count.column();
    } else if (function instanceof Sum sum && !sum.isDistinct()) {
      kind = "sum";
      column = sum.column();
      types = SUMMABLE;
    } else if (function instanceof Min min) {
      kind = "min";
      column = min.column();
      types = ORDERED;
    } else if (function instanceof Max max) {
      kind = "max";
      column = max.column();
      types = ORDERED;
    } else {
      return null;
    }
    String[] path = path(column);
    DataType type = path == null ? null : typeAt(schema, path);
    if (type == null || (types != null && !types.contains(type))) {
      return null;
    }
    DataType partial = kind.equals("count") || kind.equals("sum") ? DataTypes.LongType : type;
    return new StructField(name, partial, !kind.equals("count"), metadata(kind, path, ansi));
  }

  private static String[] path(Expression expression) {
    return expression instanceof NamedReference reference ? reference.fieldNames() : null;
  }

  /** The type of the (possibly nested) column at {@code path}, or null where there is none. */
  private static DataType typeAt(StructType schema, String[] path) {
    DataType type = schema;
    for (String name : path) {
      if (!(type instanceof StructType struct) || struct.getFieldIndex(name).isEmpty()) {
        return null;
      }
      type = struct.apply(name).dataType();
    }
    return type;
  }

  private static Metadata metadata(String kind, String[] path, boolean ansi) {
    return new MetadataBuilder().putString(KIND, kind).putStringArray(COLUMN, path).putBoolean(ANSI, ansi).build();
  }

  /** What the scan's description shows of it. */
  static String describe(Aggregation aggregation) {
    List<String> parts = new ArrayList<>();
    for (AggregateFunc function : aggregation.aggregateExpressions()) {
      parts.add(function.describe());
    }
    List<String> groups = new ArrayList<>();
    for (Expression grouping : aggregation.groupByExpressions()) {
      groups.add(grouping.describe());
    }
    return " PushedAggregates: " + parts + " PushedGroupBy: " + groups;
  }
}
