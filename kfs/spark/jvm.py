"""kfs's JVM front for Spark: the column pruning a Python data source cannot ask for, and columnar reads.

PySpark's Python Data Source API hands a reader the whole schema and copies every column of every row
into the JVM, whatever the query reads; a `groupBy("topic").count()` paid for keys, values and decoded
JSON it never looked at. The front (kfs/spark/java/kfs/spark/) is a `format("kfs")` that plans and
hands over batches, nothing more:
- `ColumnPruningSource` tells Spark it prunes columns and plans the read with the pruned schema through
  Spark's own Python data source calls, so the Python reader (kfs.spark.source) builds only the columns
  asked for (kfs.spark.pruning);
- `ColumnarPythonScan` runs that read as Spark runs a Python data source's (its ArrowPythonRunner) and
  gives Spark the Arrow batches as columns, where Spark's own scan copies each row into an UnsafeRow;
  its runner (`NoDelayArrowPythonRunner`) turns Nagle's algorithm off on the socket to the task's Python
  worker, which Spark leaves on: a task's two first writes otherwise wait out a delayed ACK (~35 ms).
The decoding stays kfs's Python and C, in Spark's Python workers.

Spark's Python data source classes are internal, so the front is compiled here, against the PySpark
that is installed, the first time a session asks for it (`javac`, a JDK; ~2 s), and kept in
`$XDG_CACHE_HOME/kfs` under a name made of the PySpark version and the source's hash. Without a JDK,
or should a PySpark change break the compile, kfs says so once and the Python source serves
`format("kfs")` alone: every answer the same, the reads as slow as before.
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
import subprocess
import tempfile
import zipfile
from pathlib import Path
from typing import Any

log = logging.getLogger("kfs.spark")

SOURCES = Path(__file__).with_name("java")
CLASS_NAME = "kfs.spark.ColumnPruningSource"
PYTHON_NAME = "kfs_python"  # the Python source's name behind the front (ColumnPruningSource.PYTHON_NAME)
_FAILED: dict[str, str] = {}


def _source_files() -> list[Path]:
    return sorted(p for p in SOURCES.rglob("*") if p.is_file())


def _cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "kfs"


def jar_path() -> Path | None:
    """The front's jar for the installed PySpark, compiled on first use; None when it cannot be
    (no PySpark, no `javac`, a compile error: logged once)."""
    try:
        import pyspark
    except ImportError:
        return None
    digest = hashlib.sha256(pyspark.__version__.encode())
    for path in _source_files():
        digest.update(path.relative_to(SOURCES).as_posix().encode() + b"\0" + path.read_bytes())
    jar = _cache_dir() / f"kfs-spark-{pyspark.__version__}-{digest.hexdigest()[:16]}.jar"
    if jar.exists():
        return jar
    if jar.name in _FAILED:
        return None
    try:
        _compile(Path(pyspark.__file__).parent / "jars", jar)
    except (OSError, subprocess.CalledProcessError) as e:
        detail = getattr(e, "stderr", None) or str(e)
        _FAILED[jar.name] = detail
        log.warning("kfs: the Spark column-pruning front could not be built (%s); format(\"kfs\") reads "
                    "every column", str(detail).strip().splitlines()[-1] if str(detail).strip() else e)
        return None
    return jar


def _compile(spark_jars: Path, jar: Path) -> None:
    """javac the front against `spark_jars`, then zip it (with its service file) into `jar`, atomically."""
    javac = shutil.which("javac")
    if javac is None:
        raise OSError("no javac on PATH: install a JDK (openjdk-17-jdk-headless)")
    jar.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="kfs-jvm-") as tmp:
        classes = Path(tmp) / "classes"
        java = [str(p) for p in _source_files() if p.suffix == ".java"]
        subprocess.run([javac, "-nowarn", "-d", str(classes), "-cp", str(spark_jars / "*"), *java],
                       check=True, capture_output=True, text=True)
        partial = jar.with_name(f".{jar.name}.{os.getpid()}")  # (beside it: the rename stays atomic)
        try:
            with zipfile.ZipFile(partial, "w", zipfile.ZIP_DEFLATED) as out:
                for path in sorted(classes.rglob("*.class")):
                    out.write(path, path.relative_to(classes).as_posix())
                for path in sorted((SOURCES / "META-INF").rglob("*")):
                    if path.is_file():
                        out.write(path, path.relative_to(SOURCES).as_posix())
            os.replace(partial, jar)
        finally:
            partial.unlink(missing_ok=True)


def configure(builder: Any) -> Any:
    """`builder` (a `SparkSession.Builder`) with the front's jar added to `spark.jars` when it can be
    built: sessions kfs starts, and a user's, get column pruning from `kfs.spark.register`. Not with
    `KFS_SPARK_FRONT=0` (the Python source alone is then `format("kfs")`)."""
    if os.environ.get("KFS_SPARK_FRONT") == "0":
        return builder
    jar = jar_path()
    if jar is None:
        return builder
    return builder.config("spark.jars", str(jar))


def front(spark: Any) -> bool:
    """Whether `format("kfs")` is the JVM front in this session: already on its classpath (`configure`,
    `--jars`), or built and added now (`ADD JAR`). `KFS_SPARK_FRONT=0` keeps the Python source alone."""
    if loaded(spark):  # (on the classpath, it is `format("kfs")` whatever is asked: Spark finds it first)
        if os.environ.get("KFS_SPARK_FRONT") == "0":
            log.warning("KFS_SPARK_FRONT=0, but the session has kfs's JVM front on its classpath (spark.jars or "
                        "--jars): format(\"kfs\") is the front, format(\"%s\") the Python source alone", PYTHON_NAME)
        return True
    if os.environ.get("KFS_SPARK_FRONT") == "0":
        return False
    jar = jar_path()
    if jar is None or getattr(spark, "_jvm", None) is None:
        return False
    spark.sql(f"ADD JAR '{jar}'")
    return loaded(spark)


def loaded(spark: Any) -> bool:
    """Whether the session's JVM can load the front (its jar is on the driver's classpath)."""
    jvm = getattr(spark, "_jvm", None) or getattr(getattr(spark, "sparkContext", None), "_jvm", None)
    if jvm is None:  # (Spark Connect: no JVM in reach)
        return False
    try:
        jvm.org.apache.spark.util.Utils.classForName(CLASS_NAME, True, False)
    except Exception:
        return False
    return True
