// The Java side of benchmarks/bench_registry.py: Apache Avro's GenericDatumReader then JsonEncoder
// (what Confluent's kafka-avro-console-consumer runs) over length-prefixed datums, four passes over the
// same datums so that the last ones run with a warm JIT; prints each pass's microseconds per record.
// Needs Debian's libavro-java; compiled by bench_registry.py when javac is there.
import java.io.*;
import java.nio.file.*;
import java.util.*;
import org.apache.avro.Schema;
import org.apache.avro.generic.*;
import org.apache.avro.io.*;

public class AvroBench {
    public static void main(String[] args) throws Exception {
        Schema schema = new Schema.Parser().parse(new String(Files.readAllBytes(Paths.get(args[0])), "UTF-8"));
        DataInputStream in = new DataInputStream(new BufferedInputStream(new FileInputStream(args[1])));
        List<byte[]> datums = new ArrayList<>();
        while (in.available() > 0) { int n = in.readInt(); byte[] b = new byte[n]; in.readFully(b); datums.add(b); }
        GenericDatumReader<Object> reader = new GenericDatumReader<>(schema);
        GenericDatumWriter<Object> writer = new GenericDatumWriter<>(schema);
        for (int pass = 0; pass < 4; pass++) {
            long start = System.nanoTime();
            long bytes = 0;
            BinaryDecoder decoder = null; Object reuse = null;
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
            System.out.printf("pass %d: %.2f us/record (%d bytes of JSON)%n", pass, ns / 1000.0 / datums.size(), bytes);
        }
    }
}
