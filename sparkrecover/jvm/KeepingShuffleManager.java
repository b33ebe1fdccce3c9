/*
 * Shuffle map outputs that survive the driver (docs/shuffles.md, docs/decisions.md).
 *
 * Installed by `sparkrecover submit` as spark.shuffle.manager (only when the user chose none). It
 * is Spark's SortShuffleManager (Spark 4 requires a BlockingShuffleManager, which a subclass is;
 * delegating would not be), plus:
 *
 *  - driver, registerShuffle (inside the ShuffleDependency constructor, before the DAGScheduler
 *    creates the map stage): the shuffle's identity (ShuffleIdentity); a handle that carries the
 *    keep folder's name to the executors; and, when the plan lists kept map outputs of that
 *    identity whose files are still there with their recorded sizes, MapOutputTrackerMaster's
 *    registration of each of them at FallbackStorage's block manager, so the map stage finds them
 *    available and runs only the missing map tasks; reducers read them through FallbackStorage
 *    (spark.storage.decommission.fallbackStorage.path), from hard links laid out as it expects.
 *    Adaptive execution takes a stage's row count from its shuffle-write SQL metrics, which reused
 *    map outputs never update (0 rows would make AQEPropagateEmptyRelation drop real rows): the
 *    kept records and sizes are added to those metrics first, and when that step fails nothing is
 *    reused.
 *  - executor, getWriter: Spark's own writer wrapped by KeepingShuffleWriter, which keeps the
 *    committed files.
 *  - the listener (same jar) turns each finished map task whose output was kept into a line for
 *    the journal (mapKept); every refusal becomes a shuffle.unsupported line.
 *
 * Settings (spark.sparkrecover.shuffle.*, set by submit): dir (the keep folder, local), mode
 * (link | copy), script (the script's digest), reuse (a file listing kept outputs to reuse:
 * identity, map index, folder, data bytes, index bytes, records, row bytes; tab-separated).
 *
 * Internals that differ between Spark 3.5 and 4.x (registerMapOutput's return type,
 * MapStatus.apply's arity, Scala collections) are called by reflection; a failure refuses reuse
 * and is reported, never guessed around.
 */
package sparkrecover.jvm;

import java.io.File;
import java.io.IOException;
import java.lang.reflect.Method;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;

import org.apache.spark.ShuffleDependency;
import org.apache.spark.SparkConf;
import org.apache.spark.SparkContext;
import org.apache.spark.SparkEnv;
import org.apache.spark.TaskContext;
import org.apache.spark.shuffle.ShuffleHandle;
import org.apache.spark.shuffle.ShuffleWriteMetricsReporter;
import org.apache.spark.shuffle.ShuffleWriter;
import org.apache.spark.shuffle.sort.SortShuffleManager;

public class KeepingShuffleManager extends SortShuffleManager {
    public static final String DIR = "spark.sparkrecover.shuffle.dir";
    public static final String MODE = "spark.sparkrecover.shuffle.mode";
    public static final String SCRIPT = "spark.sparkrecover.shuffle.script";
    public static final String REUSE = "spark.sparkrecover.shuffle.reuse";
    public static final String FALLBACK_PATH = "spark.storage.decommission.fallbackStorage.path";
    /** Map ids of reused outputs: far above any task attempt id of the new application. */
    static final long MAP_ID_BASE = 1L << 52;
    static final int MAX_EXECUTIONS = 1000;

    private static volatile KeepingShuffleManager driverInstance;
    private static volatile boolean warned;

    private final SparkConf conf;
    private final File keepFolder;
    private final boolean copies;
    // Driver side: this application's shuffle ids -> identity (upstream shuffles' identities).
    private final Map<Integer, String> identities = new ConcurrentHashMap<Integer, String>();
    private final Map<Integer, String> stageNames = new ConcurrentHashMap<Integer, String>();
    private final Map<String, Map<String, Integer>> ordinals = new LinkedHashMap<String, Map<String, Integer>>() {
        private static final long serialVersionUID = 1L;

        @Override
        protected boolean removeEldestEntry(Map.Entry<String, Map<String, Integer>> eldest) {
            return size() > MAX_EXECUTIONS;
        }
    };
    private Map<String, List<KeptOutput>> reusable;  // loaded on first use, driver only

    public KeepingShuffleManager(SparkConf conf) {
        super(conf);
        this.conf = conf;
        String dir = conf.get(DIR, "");
        this.keepFolder = dir.isEmpty() ? null : new File(dir);
        this.copies = "copy".equals(conf.get(MODE, "link"));
    }

    File keepFolder() {
        return keepFolder;
    }

    boolean copies() {
        return copies;
    }

    // -- driver ----------------------------------------------------------------------------------

    @Override
    @SuppressWarnings({"rawtypes", "unchecked"})
    public <K, V, C> ShuffleHandle registerShuffle(int shuffleId, ShuffleDependency<K, V, C> dependency) {
        ShuffleHandle handle = super.registerShuffle(shuffleId, dependency);
        driverInstance = this;
        SparkContext context = null;
        String stage = null;
        try {
            context = dependency.rdd().context();
            stage = context.getLocalProperty(SparkRecoverListener.STAGE_PROPERTY);
            if (keepFolder == null) {
                throw new ShuffleIdentity.Refused("no keep folder configured (" + DIR + ")");
            }
            String refusal = unsupportedSetting();
            if (refusal != null) {
                throw new ShuffleIdentity.Refused(refusal);
            }
            String digest = ShuffleIdentity.digest(dependency, context, conf, conf.get(SCRIPT, ""), identities);
            String identity = ShuffleIdentity.identity(digest, ordinal(context, digest));
            ShuffleHandle kept = KeptShuffleHandles.wrap(handle, dependency, identity);
            if (kept == null) {
                throw new ShuffleIdentity.Refused("an unknown shuffle handle " + handle.getClass().getName());
            }
            identities.put(shuffleId, identity);
            if (stage != null) {
                stageNames.put(shuffleId, stage);
            }
            int numMaps = dependency.rdd().partitions().length;
            int numReduces = dependency.partitioner().numPartitions();
            String[] why = new String[1];
            int reused = reuse(shuffleId, dependency, identity, numMaps, numReduces, why);
            StringBuilder line = new StringBuilder(256).append("{\"k\":\"shuffle.registered\"");
            SparkRecoverListener.string(line.append(",\"shuffle\":"), identity);
            line.append(",\"spark_shuffle\":").append(shuffleId);
            appendStage(line, stage);
            line.append(",\"maps\":").append(numMaps).append(",\"reduces\":").append(numReduces)
                .append(",\"reused\":").append(reused)
                .append(",\"time_ms\":").append(System.currentTimeMillis());
            // The script is part of the identity: the command line can tell before a resume
            // that an edited script plans none of these shuffles again.
            SparkRecoverListener.string(line.append(",\"script\":"), conf.get(SCRIPT, ""));
            if (why[0] != null) {
                SparkRecoverListener.string(line.append(",\"reuse_refused\":"), why[0]);
            }
            SparkRecoverListener.emitLine(line.append('}'));
            return kept;
        } catch (ShuffleIdentity.Refused refused) {
            unsupported(shuffleId, stage, refused.getMessage());
        } catch (RuntimeException | LinkageError error) {
            unsupported(shuffleId, stage, "Spark internals differ on this version: " + error);
        } catch (StackOverflowError error) {
            unsupported(shuffleId, stage, "its lineage is too deep to identify");
        }
        return handle;
    }

    /** Settings under which kept files cannot be read back or are not Spark's sort-shuffle files. */
    private String unsupportedSetting() {
        if (conf.getBoolean("spark.io.encryption.enabled", false)) {
            return "spark.io.encryption.enabled: shuffle files are encrypted with a key of this application only";
        }
        if (conf.getBoolean("spark.shuffle.push.enabled", false)) {
            return "push-based shuffle (spark.shuffle.push.enabled) merges map outputs remotely";
        }
        String io = conf.get("spark.shuffle.sort.io.plugin.class",
                             "org.apache.spark.shuffle.sort.io.LocalDiskShuffleDataIO");
        if (!io.endsWith(".LocalDiskShuffleDataIO")) {
            return "a custom shuffle storage plugin (spark.shuffle.sort.io.plugin.class=" + io + ")";
        }
        if (conf.getBoolean("spark.shuffle.useOldFetchProtocol", false)) {
            return "spark.shuffle.useOldFetchProtocol names map outputs by map index";
        }
        return null;
    }

    private int ordinal(SparkContext context, String digest) {
        String execution = context.getLocalProperty(ShuffleIdentity.EXECUTION_ID);
        synchronized (ordinals) {
            Map<String, Integer> seen = ordinals.get(execution);
            if (seen == null) {
                seen = new HashMap<String, Integer>();
                ordinals.put(execution, seen);
            }
            Integer count = seen.get(digest);
            int ordinal = count == null ? 0 : count;
            seen.put(digest, ordinal + 1);
            return ordinal;
        }
    }

    /** Registers the plan's kept outputs of this identity that are intact; returns how many. */
    @SuppressWarnings("rawtypes")
    private int reuse(int shuffleId, ShuffleDependency dependency, String identity, int numMaps, int numReduces,
                      String[] why) {
        List<KeptOutput> kept = reusable().get(identity);
        if (kept == null || kept.isEmpty()) {
            return 0;
        }
        try {
            String fallback = conf.get(FALLBACK_PATH, "");
            if (fallback.isEmpty() || !fallback.endsWith("/")) {
                throw new ShuffleIdentity.Refused(FALLBACK_PATH + " is not set (or lacks its trailing /)");
            }
            List<KeptOutput> intact = new ArrayList<KeptOutput>();
            long records = 0, rowBytes = 0, bytes = 0;
            for (KeptOutput output : kept) {
                long[] sizes = output.intactSizes(keepFolder, numReduces);
                if (output.mapIndex < numMaps && sizes != null) {
                    output.sizes = sizes;
                    intact.add(output);
                    records += output.records;
                    rowBytes += output.rowBytes;
                    bytes += output.dataBytes;
                }
            }
            if (intact.isEmpty()) {
                why[0] = "no kept map output is intact";
                return 0;
            }
            // The adaptive statistics first: without them nothing may be reused.
            Object[] metrics = writeMetrics(dependency);
            Object tracker = SparkEnv.get().mapOutputTracker();
            Method register = tracker.getClass().getMethod("registerShuffle", int.class, int.class, int.class);
            Method registerMap = findMethod(tracker.getClass(), "registerMapOutput", 3);
            Object location = blockManagerId();
            Method apply = findMethod(Class.forName("org.apache.spark.scheduler.MapStatus$"), "apply", -1);
            Object statusFactory = Class.forName("org.apache.spark.scheduler.MapStatus$").getField("MODULE$").get(null);
            String appId = SparkEnv.get().conf().getAppId();
            File shuffleDir = new File(new File(stripScheme(fallback), appId), String.valueOf(shuffleId));
            List<Object[]> statuses = new ArrayList<Object[]>();
            for (KeptOutput output : intact) {
                long mapId = MAP_ID_BASE + output.mapIndex;
                output.placeForFallback(keepFolder, shuffleDir, shuffleId, mapId);
                Object status = apply.getParameterCount() == 4
                    ? apply.invoke(statusFactory, location, output.sizes, mapId, 0L)
                    : apply.invoke(statusFactory, location, output.sizes, mapId);
                statuses.add(new Object[] {output.mapIndex, status});
            }
            Method[] add = {adder(metrics[0]), adder(metrics[1]), metrics[2] == null ? null : adder(metrics[2])};
            register.invoke(tracker, shuffleId, numMaps, numReduces);
            try {
                for (Object[] status : statuses) {
                    registerMap.invoke(tracker, shuffleId, status[0], status[1]);
                }
            } catch (ReflectiveOperationException | RuntimeException error) {
                // Half registered is worse than none: the DAGScheduler registers the shuffle afresh.
                tracker.getClass().getMethod("unregisterShuffle", int.class).invoke(tracker, shuffleId);
                throw error;
            }
            add[0].invoke(metrics[0], rowBytes);
            add[1].invoke(metrics[1], records);
            if (add[2] != null) {
                add[2].invoke(metrics[2], bytes);
            }
            return intact.size();
        } catch (ShuffleIdentity.Refused refused) {
            why[0] = refused.getMessage();
        } catch (ReflectiveOperationException | IOException | RuntimeException | LinkageError error) {
            why[0] = "Spark internals differ on this version: " + error;
        }
        return 0;
    }

    /**
     * The SQL metrics adaptive execution reads a stage's statistics from: the serializer's
     * dataSize and the write processor's records written (and bytes written, shown in the UI).
     */
    @SuppressWarnings("rawtypes")
    private static Object[] writeMetrics(ShuffleDependency dependency) throws ShuffleIdentity.Refused {
        Class<?> sqlMetric;
        try {
            sqlMetric = Class.forName("org.apache.spark.sql.execution.metric.SQLMetric");
        } catch (ClassNotFoundException error) {
            throw new ShuffleIdentity.Refused("no SQL metrics on this Spark");
        }
        Object dataSize = ShuffleIdentity.fieldOfType(dependency.serializer(), sqlMetric, "dataSize");
        Object processor = ShuffleIdentity.call(dependency, "shuffleWriterProcessor");
        Object map = ShuffleIdentity.fieldOfType(processor, scala.collection.Map.class, null);
        Object records = map == null ? null : mapValue(map, "shuffleRecordsWritten");
        Object bytes = map == null ? null : mapValue(map, "shuffleBytesWritten");
        if (dataSize == null || records == null || !sqlMetric.isInstance(records)) {
            throw new ShuffleIdentity.Refused("the shuffle-write metrics adaptive execution reads could not be "
                                              + "found on this Spark, and a reused stage would look empty to it");
        }
        return new Object[] {dataSize, records, sqlMetric.isInstance(bytes) ? bytes : null};
    }

    private static Object mapValue(Object map, String key) throws ShuffleIdentity.Refused {
        try {
            Object option = map.getClass().getMethod("get", Object.class).invoke(map, key);
            return ((scala.Option<?>) option).isDefined() ? ((scala.Option<?>) option).get() : null;
        } catch (ReflectiveOperationException | RuntimeException error) {
            throw new ShuffleIdentity.Refused("reading the shuffle-write metrics failed on this Spark: " + error);
        }
    }

    private static Method adder(Object metric) throws ReflectiveOperationException {
        return metric.getClass().getMethod("add", long.class);
    }

    static long metricValue(Object metric) {
        if (metric == null) {
            return -1;
        }
        try {
            return ((Number) metric.getClass().getMethod("value").invoke(metric)).longValue();
        } catch (ReflectiveOperationException | RuntimeException error) {
            return -1;
        }
    }

    private static Object blockManagerId() throws ReflectiveOperationException {
        Class<?> fallback = Class.forName("org.apache.spark.storage.FallbackStorage$");
        Object module = fallback.getField("MODULE$").get(null);
        return fallback.getMethod("FALLBACK_BLOCK_MANAGER_ID").invoke(module);
    }

    /** A public method by name and parameter count (-1: the one with the most parameters). */
    private static Method findMethod(Class<?> cls, String name, int parameters) throws NoSuchMethodException {
        Method found = null;
        for (Method method : cls.getMethods()) {
            if (!method.getName().equals(name) || method.isBridge()) {
                continue;
            }
            if (parameters >= 0 ? method.getParameterCount() == parameters
                    : (method.getParameterCount() >= 3
                       && (found == null || method.getParameterCount() > found.getParameterCount()))) {
                found = method;
            }
        }
        if (found == null) {
            throw new NoSuchMethodException(cls.getName() + "." + name);
        }
        return found;
    }

    private static String stripScheme(String path) {
        return path.startsWith("file:") ? java.net.URI.create(path).getPath() : path;
    }

    private synchronized Map<String, List<KeptOutput>> reusable() {
        if (reusable == null) {
            reusable = new HashMap<String, List<KeptOutput>>();
            String file = conf.get(REUSE, "");
            if (!file.isEmpty()) {
                try {
                    for (String line : Files.readAllLines(new File(file).toPath(), StandardCharsets.UTF_8)) {
                        KeptOutput output = KeptOutput.parse(line);
                        if (output != null) {
                            List<KeptOutput> list = reusable.get(output.identity);
                            if (list == null) {
                                list = new ArrayList<KeptOutput>();
                                reusable.put(output.identity, list);
                            }
                            list.add(output);
                        }
                    }
                } catch (IOException | RuntimeException error) {
                    warnOnce("the kept shuffle outputs to reuse could not be read (" + error + "); computing them again");
                }
            }
        }
        return reusable;
    }

    /**
     * The query's RDD ({@code toRdd}), computed inside a SQL execution of its own: with adaptive
     * execution that runs the map stages of its shuffles, and a shuffle is identified through its
     * SQL execution's plan (ShuffleIdentity). driver/partitions.py probes a write's RDD this way.
     */
    public static org.apache.spark.rdd.RDD<org.apache.spark.sql.catalyst.InternalRow> queryRdd(
            final org.apache.spark.sql.execution.QueryExecution qe) {
        scala.Function0<org.apache.spark.rdd.RDD<org.apache.spark.sql.catalyst.InternalRow>> body = () -> qe.toRdd();
        return org.apache.spark.sql.execution.SQLExecution.withNewExecutionId(
            qe, scala.Option.<String>empty(), body);
    }

    // -- executors -------------------------------------------------------------------------------

    @Override
    public <K, V> ShuffleWriter<K, V> getWriter(ShuffleHandle handle, long mapId, TaskContext context,
                                                 ShuffleWriteMetricsReporter metrics) {
        ShuffleWriter<K, V> writer = super.getWriter(handle, mapId, context, metrics);
        if (!(handle instanceof KeptShuffleHandles.Kept) || keepFolder == null) {
            return writer;
        }
        Object rowBytes = null;
        try {
            Class<?> sqlMetric = Class.forName("org.apache.spark.sql.execution.metric.SQLMetric");
            Object dependency = ((org.apache.spark.shuffle.BaseShuffleHandle<?, ?, ?>) handle).dependency();
            rowBytes = ShuffleIdentity.fieldOfType(
                ((ShuffleDependency<?, ?, ?>) dependency).serializer(), sqlMetric, "dataSize");
        } catch (ClassNotFoundException | RuntimeException | LinkageError error) {
            rowBytes = null;
        }
        return new KeepingShuffleWriter<K, V>(writer, this, handle.shuffleId(), mapId,
                                              ((KeptShuffleHandles.Kept) handle).keepId(), context, rowBytes);
    }

    // -- the listener's questions ----------------------------------------------------------------

    /**
     * The journal line for a map task of this application's shuffle that finished, when its output
     * is kept (its map-<i> folder exists, whole); null otherwise. Called on the listener's thread.
     */
    static String mapKept(int shuffleId, int mapIndex) {
        KeepingShuffleManager manager = driverInstance;
        if (manager == null || manager.keepFolder == null) {
            return null;
        }
        String identity = manager.identities.get(shuffleId);
        if (identity == null) {
            return null;
        }
        Path folder = manager.keepFolder.toPath().resolve(identity).resolve("map-" + mapIndex);
        Map<String, Long> meta = readMeta(folder.resolve("meta"));
        if (meta == null) {
            return null;
        }
        StringBuilder line = new StringBuilder(256).append("{\"k\":\"shuffle.map\"");
        SparkRecoverListener.string(line.append(",\"shuffle\":"), identity);
        line.append(",\"spark_shuffle\":").append(shuffleId);
        appendStage(line, manager.stageNames.get(shuffleId));
        line.append(",\"map\":").append(mapIndex);
        SparkRecoverListener.string(line.append(",\"path\":"), identity + "/map-" + mapIndex);
        for (String key : new String[] {"data_bytes", "index_bytes", "records", "row_bytes", "keep_us"}) {
            Long value = meta.get(key);
            line.append(",\"").append(key).append("\":").append(value == null ? -1 : value);
        }
        return line.append('}').toString();
    }

    static Map<String, Long> readMeta(Path meta) {
        try {
            Map<String, Long> values = new HashMap<String, Long>();
            for (String entry : Files.readAllLines(meta, StandardCharsets.UTF_8)) {
                int eq = entry.indexOf('=');
                if (eq > 0) {
                    values.put(entry.substring(0, eq), Long.parseLong(entry.substring(eq + 1).trim()));
                }
            }
            return values;
        } catch (IOException | RuntimeException error) {
            return null;
        }
    }

    private void unsupported(int shuffleId, String stage, String reason) {
        StringBuilder line = new StringBuilder(256).append("{\"k\":\"shuffle.unsupported\"");
        line.append(",\"spark_shuffle\":").append(shuffleId);
        appendStage(line, stage);
        SparkRecoverListener.string(line.append(",\"reason\":"), reason);
        SparkRecoverListener.emitLine(line.append('}'));
    }

    private static void appendStage(StringBuilder line, String stage) {
        line.append(",\"stage\":");
        if (stage == null) {
            line.append("null");
        } else {
            SparkRecoverListener.string(line, stage);
        }
    }

    static void warnOnce(String message) {
        if (!warned) {
            warned = true;
            System.err.println("sparkrecover: warning: " + message);
        }
    }
}
