package kfs.spark;

import java.io.IOException;
import java.net.StandardSocketOptions;
import java.nio.channels.SocketChannel;

import org.apache.spark.SparkEnv;
import org.apache.spark.TaskContext;
import org.apache.spark.api.python.BasePythonRunner;
import org.apache.spark.api.python.ChainedPythonFunctions;
import org.apache.spark.api.python.PythonWorker;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.execution.metric.SQLMetric;
import org.apache.spark.sql.execution.python.ArrowPythonRunner;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.vectorized.ColumnarBatch;

import scala.Option;
import scala.Tuple2;

/**
 * Spark's ArrowPythonRunner, with Nagle's algorithm off on the socket to the task's Python worker.
 *
 * <p>A task's first message to its worker goes out in two writes: the command, then the input (the
 * pickled partition). Spark leaves Nagle on, so the second write waits for the first to be acknowledged,
 * and the worker, reused and so in the kernel's interactive mode, delays that acknowledgement by up to
 * the delayed-ACK timeout (40 ms on Linux): each kfs task stood idle ~35 ms before its read began (a tiny
 * count's scan task took 70 ms, 33 ms with Nagle off). Spark turned Nagle off for the same stall on its
 * state-store socket (SPARK-51667); here it is turned off for the reads kfs runs, on the worker this task
 * was given, before anything is written to it. A Unix-domain socket
 * (spark.python.unix.domain.socket.enabled) has no Nagle and is left as it is.
 */
final class NoDelayArrowPythonRunner extends ArrowPythonRunner {

  NoDelayArrowPythonRunner(scala.collection.immutable.Seq<Tuple2<ChainedPythonFunctions, Object>> funcs,
      int evalType, int[][] argOffsets, StructType schema, String timeZoneId, boolean largeVarTypes,
      scala.collection.immutable.Map<String, String> workerConf,
      scala.collection.immutable.Map<String, SQLMetric> metrics, Option<String> jobArtifactUuid,
      Option<String> sessionUuid) {
    super(funcs, evalType, argOffsets, schema, timeZoneId, largeVarTypes, workerConf, metrics, jobArtifactUuid,
        sessionUuid);
  }

  @Override
  @SuppressWarnings("unchecked")  // (the trait's Writer comes back raw from Scala)
  public BasePythonRunner<scala.collection.Iterator<InternalRow>, ColumnarBatch>.Writer newWriter(SparkEnv env,
      PythonWorker worker, scala.collection.Iterator<scala.collection.Iterator<InternalRow>> input,
      int partitionIndex, TaskContext context) {
    noDelay(worker.channel());
    return super.newWriter(env, worker, input, partitionIndex, context);
  }

  /** Nagle off on a TCP channel; anything else (a Unix-domain socket) or a refusal leaves it as it is. */
  static void noDelay(SocketChannel channel) {
    try {
      if (channel.supportedOptions().contains(StandardSocketOptions.TCP_NODELAY)) {
        channel.setOption(StandardSocketOptions.TCP_NODELAY, true);
      }
    } catch (IOException | UnsupportedOperationException e) {
      // (a closed or odd channel: the read goes on as Spark would run it, only slower to start)
    }
  }
}
