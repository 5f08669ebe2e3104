#!/bin/bash
# Rebuilds benchmarks/kafka-side-bench.jar: KafkaSideBench.java and the Apache Kafka classes it uses, compiled
# from Kafka's source (no Maven, no network) against Debian's jars.
#   benchmarks/java/build.sh KAFKA_GIT_DIR
# KAFKA_GIT_DIR: a clone of apache/kafka holding commit 1eb7644349c (trunk of 2024-09, the commit the
# Kafka-written test fixtures were made with). javac's -sourcepath compiles only the classes the program
# reaches (the record layer, FileRecords, OffsetIndex and TimeIndex). One cut outside that code, as for the
# fixtures: the OpenTelemetry decompression of PushTelemetryRequest.
set -euo pipefail
KAFKA_COMMIT=1eb7644349c
kafka=$1
here=$(cd "$(dirname "$0")" && pwd)
w=$(mktemp -d /tmp/kfs-bench-build.XXXX)
trap 'rm -rf "$w"' EXIT
J=/usr/share/java
for jar in lz4-java snappy-java zstd-jni slf4j-api jackson-databind argparse4j; do
  [ -e "$J/$jar.jar" ] || { echo "build.sh: $J/$jar.jar missing: apt-get install liblz4-java libsnappy-java" \
    "libzstd-jni-java libslf4j-java libjackson2-databind-java libargparse4j-java" >&2; exit 1; }
done
git -C "$kafka" archive "$KAFKA_COMMIT" clients/src/main storage/src/main storage/api/src/main server-common/src/main \
  generator/src/main | tar -x -C "$w"
cd "$w"
python3 - <<'PY'
p='clients/src/main/java/org/apache/kafka/common/requests/PushTelemetryRequest.java'
s=open(p).read().replace('import org.apache.kafka.common.telemetry.internals.ClientTelemetryUtils;\n','')
s=s.replace('ClientTelemetryUtils.decompress(this.data.metrics(), cType)','null')
open(p,'w').write(s)
p='generator/src/main/java/org/apache/kafka/message/MessageGenerator.java'
s=open(p).read().replace('JSON_SERDE.registerModule(new Jdk8Module());','').replace('import com.fasterxml.jackson.datatype.jdk8.Jdk8Module;','')
open(p,'w').write(s)
PY
GCP=gen-classes:$J/jackson-databind.jar:$J/jackson-core.jar:$J/jackson-annotations.jar:$J/argparse4j.jar
mkdir -p gen-classes classes
javac -nowarn -d gen-classes -cp "$GCP" $(find generator/src/main/java -name '*.java')
java -cp "$GCP" org.apache.kafka.message.MessageGenerator -p org.apache.kafka.common.message \
  -o generated/clients/org/apache/kafka/common/message -i clients/src/main/resources/common/message \
  -t ApiMessageTypeGenerator -m MessageDataGenerator JsonConverterGenerator
CP=$J/lz4-java.jar:$J/snappy-java.jar:$J/zstd-jni.jar:$J/slf4j-api.jar:$J/jackson-databind.jar:$J/jackson-core.jar:$J/jackson-annotations.jar
SP=clients/src/main/java:generated/clients:storage/src/main/java:storage/api/src/main/java:server-common/src/main/java
javac -nowarn -proc:none -g:none --release 17 -d classes -cp "$CP" -sourcepath "$SP" "$here/KafkaSideBench.java"
printf 'Kafka-Commit: %s\nMain-Class: KafkaSideBench\n' "$(git -C "$kafka" rev-parse "$KAFKA_COMMIT")" > manifest.txt
jar --create --file "$here/../kafka-side-bench.jar" --manifest manifest.txt -C classes .
ls -l "$here/../kafka-side-bench.jar"
