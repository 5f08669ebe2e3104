// The Java side of benchmarks/bench_registry.py: Apache Avro's GenericDatumReader then JsonEncoder
// (what Confluent's kafka-avro-console-consumer runs) over length-prefixed datums. Needs Debian's
// libavro-java; compiled by bench_registry.py when javac is there.
//   java AvroBench SCHEMA DATUMS           four passes over the datums in memory, so that the last ones run
//                                          with a warm JIT; prints each pass's wall and CPU microseconds per
//                                          record (CPU: the whole process's, its JIT and GC threads too)
//   java AvroBench SCHEMA DATUMS --print   the whole process's work, start to finish: one pass that reads the
//                                          datums file and prints each datum's JSON on a line to stdout, as
//                                          the console consumer prints a record
import java.io.*;
import java.lang.management.ManagementFactory;
import java.nio.file.*;
import java.util.*;
import org.apache.avro.Schema;
import org.apache.avro.generic.*;
import org.apache.avro.io.*;

public class AvroBench {
    public static void main(String[] args) throws Exception {
        Schema schema = new Schema.Parser().parse(new String(Files.readAllBytes(Paths.get(args[0])), "UTF-8"));
        DataInputStream in = new DataInputStream(new BufferedInputStream(new FileInputStream(args[1]), 1 << 20));
        GenericDatumReader<Object> reader = new GenericDatumReader<>(schema);
        GenericDatumWriter<Object> writer = new GenericDatumWriter<>(schema);
        if (args.length > 2 && args[2].equals("--print")) {
            OutputStream stdout = new BufferedOutputStream(new FileOutputStream(FileDescriptor.out), 1 << 16);
            ByteArrayOutputStream out = new ByteArrayOutputStream(1 << 12);
            JsonEncoder encoder = EncoderFactory.get().jsonEncoder(schema, out);
            BinaryDecoder decoder = null;
            byte[] b = new byte[1 << 16];
            while (in.available() > 0) {
                int n = in.readInt();
                if (n > b.length) b = new byte[n];
                in.readFully(b, 0, n);
                decoder = DecoderFactory.get().binaryDecoder(b, 0, n, decoder);
                Object v = reader.read(null, decoder);
                encoder.configure(out);
                writer.write(v, encoder);
                encoder.flush();
                out.write('\n');
                out.writeTo(stdout);
                out.reset();
            }
            stdout.flush();
            return;
        }
        List<byte[]> datums = new ArrayList<>();
        while (in.available() > 0) { int n = in.readInt(); byte[] b = new byte[n]; in.readFully(b); datums.add(b); }
        com.sun.management.OperatingSystemMXBean os =
            (com.sun.management.OperatingSystemMXBean) ManagementFactory.getOperatingSystemMXBean();
        for (int pass = 0; pass < 4; pass++) {
            long start = System.nanoTime();
            long cpuStart = os.getProcessCpuTime();
            long bytes = 0;
            BinaryDecoder decoder = null;
            ByteArrayOutputStream out = new ByteArrayOutputStream(1 << 20);
            JsonEncoder encoder = EncoderFactory.get().jsonEncoder(schema, out);
            for (byte[] d : datums) {
                decoder = DecoderFactory.get().binaryDecoder(d, decoder);
                Object v = reader.read(null, decoder);
                encoder.configure(out);
                writer.write(v, encoder);
                encoder.flush();
                bytes += out.size(); out.reset();
            }
            long ns = System.nanoTime() - start;
            long cpu = os.getProcessCpuTime() - cpuStart;
            System.out.printf("pass %d: %.2f us/record wall, %.2f us/record CPU (%d bytes of JSON)%n", pass,
                ns / 1000.0 / datums.size(), cpu / 1000.0 / datums.size(), bytes);
        }
    }
}
