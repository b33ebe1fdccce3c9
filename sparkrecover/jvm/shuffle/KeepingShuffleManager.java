/*
 * Shuffle map outputs that survive the driver (docs/shuffles.md,
 * docs/decisions/0025-kept-shuffle-map-outputs.md).
 *
 * Installed by `sparkrecover submit` as spark.shuffle.manager (only when the user chose none). It
 * is Spark's SortShuffleManager (Spark 4 requires a BlockingShuffleManager, which a subclass is;
 * delegating would not be), plus:
 *
 *  - driver, registerShuffle (inside the ShuffleDependency constructor, before the DAGScheduler
 *    creates the map stage): the shuffle's identity (ShuffleIdentity); a handle that carries the
 *    keep folder's name to the executors; and, when the plan lists kept map outputs of that
 *    identity whose files are still there with their recorded sizes, their registration
 *    (KeptRegistration), so the map stage runs only the missing map tasks. A range partitioning
 *    gets the bounds kept for its identity (KeptBounds), or keeps its own for the next attempt.
 *  - executors, getWriter: Spark's own writer wrapped by KeepingShuffleWriter, which keeps the
 *    committed files (KeptCopies) in the keep folder, local or on any Hadoop filesystem
 *    (KeptStore); the executor then tells the driver (KeepingPlugin), whose side here turns that
 *    into a journal line (received). Every refusal becomes a shuffle.unsupported line.
 *  - executors, reading: getReader learns from the handle where the reused map outputs are, and
 *    shuffleBlockResolver serves their blocks from there (KeptBlockResolver).
 *
 * Settings (spark.sparkrecover.shuffle.*, set by submit): dir (the keep folder: a local path or a
 * Hadoop URL), mode (link | copy), script (the script's digest), reuse (a file in the keep folder
 * listing kept outputs to reuse: identity, map index, folder, data bytes, index bytes, records, row
 * bytes; tab-separated).
 */
package sparkrecover.jvm.shuffle;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;

import org.apache.spark.ShuffleDependency;
import org.apache.spark.SparkConf;
import org.apache.spark.SparkContext;
import org.apache.spark.TaskContext;
import org.apache.spark.shuffle.IndexShuffleBlockResolver;
import org.apache.spark.shuffle.ShuffleHandle;
import org.apache.spark.shuffle.ShuffleReadMetricsReporter;
import org.apache.spark.shuffle.ShuffleReader;
import org.apache.spark.shuffle.ShuffleWriteMetricsReporter;
import org.apache.spark.shuffle.ShuffleWriter;
import org.apache.spark.shuffle.sort.SortShuffleManager;

import sparkrecover.jvm.bridge.SparkRecoverListener;

public class KeepingShuffleManager extends SortShuffleManager {
    public static final String DIR = "spark.sparkrecover.shuffle.dir";
    public static final String MODE = "spark.sparkrecover.shuffle.mode";
    public static final String SCRIPT = "spark.sparkrecover.shuffle.script";
    public static final String REUSE = "spark.sparkrecover.shuffle.reuse";
    /** Map ids of reused outputs: far above any task attempt id of the new application. */
    static final long MAP_ID_BASE = 1L << 52;
    static final int MAX_EXECUTIONS = 1000;

    private static volatile KeepingShuffleManager driverInstance;
    private static volatile boolean warned;
    private static volatile boolean failureJournaled;

    private final SparkConf conf;
    private final String keepRoot;
    private final boolean links;
    private volatile KeptStore store;
    private volatile KeptBlockResolver resolver;
    // Driver side: this application's shuffle ids -> identity (upstream shuffles' identities).
    private final Map<Integer, String> identities = new ConcurrentHashMap<Integer, String>();
    private final Map<Integer, String> stageNames = new ConcurrentHashMap<Integer, String>();
    private final Map<Integer, Integer> reduceCounts = new ConcurrentHashMap<Integer, Integer>();
    private final Map<String, Map<String, Integer>> ordinals = new LinkedHashMap<String, Map<String, Integer>>() {
        private static final long serialVersionUID = 1L;

        @Override
        protected boolean removeEldestEntry(Map.Entry<String, Map<String, Integer>> eldest) {
            return size() > MAX_EXECUTIONS;
        }
    };
    private Map<String, List<KeptOutput>> reusable;  // loaded on first use, driver only
    // Executor side: shuffle id -> per map index, the folder of the kept output reused (or null).
    private final Map<Integer, String[]> reused = new ConcurrentHashMap<Integer, String[]>();

    public KeepingShuffleManager(SparkConf conf) {
        super(conf);
        this.conf = conf;
        String dir = conf.get(DIR, "");
        this.keepRoot = dir.isEmpty() ? null : dir;
        this.links = !"copy".equals(conf.get(MODE, "link"));
    }

    /** The keep folder's store (null when none is configured); opened on first use. */
    KeptStore store() {
        KeptStore current = store;
        if (current == null && keepRoot != null) {
            current = store = KeptStore.of(keepRoot, conf);
        }
        return current;
    }

    boolean links() {
        return links;
    }

    /** Whether the keep folder is a local path (known without opening its store). */
    boolean keepsLocally() {
        return keepRoot != null && KeptStore.isLocal(keepRoot);
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
            if (keepRoot == null) {
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
            // A range partitioning's bounds: saved by the identity's first registration, given to
            // every later one, before the map stage's tasks are serialized.
            KeptBounds.Applied bounds = null;
            Object partitioner = ShuffleIdentity.capturedPartitioner(dependency.rdd());
            if (partitioner instanceof org.apache.spark.RangePartitioner) {
                bounds = KeptBounds.apply(store(), identity, (org.apache.spark.RangePartitioner<?, ?>) partitioner);
            }
            identities.put(shuffleId, identity);
            reduceCounts.put(shuffleId, dependency.partitioner().numPartitions());
            if (stage != null) {
                stageNames.put(shuffleId, stage);
            }
            int numMaps = dependency.rdd().partitions().length;
            int numReduces = dependency.partitioner().numPartitions();
            String[] why = new String[1];
            int reusedCount = 0;
            List<KeptOutput> offered = reusable().get(identity);
            if (offered != null && !offered.isEmpty()) {
                String[] folders = KeptRegistration.register(
                    store(), shuffleId, dependency, identity, offered, numMaps, numReduces, why);
                if (folders != null) {
                    ((KeptShuffleHandles.Kept) kept).setReused(folders);
                    for (String folder : folders) {
                        reusedCount += folder == null ? 0 : 1;
                    }
                }
            }
            StringBuilder line = new StringBuilder(256).append("{\"k\":\"shuffle.registered\"");
            SparkRecoverListener.string(line.append(",\"shuffle\":"), identity);
            line.append(",\"spark_shuffle\":").append(shuffleId);
            appendStage(line, stage);
            line.append(",\"maps\":").append(numMaps).append(",\"reduces\":").append(numReduces)
                .append(",\"reused\":").append(reusedCount)
                .append(",\"time_ms\":").append(System.currentTimeMillis());
            // The script is part of the identity: the command line can tell before a resume
            // that an edited script plans none of these shuffles again.
            SparkRecoverListener.string(line.append(",\"script\":"), conf.get(SCRIPT, ""));
            if (why[0] != null) {
                SparkRecoverListener.string(line.append(",\"reuse_refused\":"), why[0]);
            }
            if (bounds != null) {
                SparkRecoverListener.string(line.append(",\"bounds\":"), bounds.used);
                SparkRecoverListener.string(line.append(",\"sampled_bounds\":"), bounds.sampled);
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
        if (!io.endsWith(".LocalDiskShuffleDataIO") && !io.equals(KeepingShuffleDataIO.class.getName())) {
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

    private synchronized Map<String, List<KeptOutput>> reusable() {
        if (reusable == null) {
            reusable = new HashMap<String, List<KeptOutput>>();
            String file = conf.get(REUSE, "");
            if (!file.isEmpty()) {
                try {
                    String text = new String(store().read(file), StandardCharsets.UTF_8);
                    for (String line : text.split("\n")) {
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
     * SQL execution's plan (ShuffleIdentity). driver/tasks/partitions.py probes a write's RDD this way.
     */
    public static org.apache.spark.rdd.RDD<org.apache.spark.sql.catalyst.InternalRow> queryRdd(
            final org.apache.spark.sql.execution.QueryExecution qe) {
        scala.Function0<org.apache.spark.rdd.RDD<org.apache.spark.sql.catalyst.InternalRow>> body = () -> qe.toRdd();
        return org.apache.spark.sql.execution.SQLExecution.withNewExecutionId(
            qe, scala.Option.<String>empty(), body);
    }

    /**
     * An executor's message that a map output was kept (KeepingPlugin), as a journal line of
     * finished work; false when this JVM has no driver side (the message is then not for it).
     */
    static boolean received(String message) {
        KeepingShuffleManager manager = driverInstance;
        if (manager == null) {
            return false;
        }
        String[] fields = message.split("\t");
        if (fields.length == 2 && KeepingPlugin.FAILED.equals(fields[0])) {
            if (!failureJournaled) {
                failureJournaled = true;
                manager.unsupported(-1, null, fields[1]);
            }
            return true;
        }
        if (fields.length != 12 || !KeepingPlugin.KEPT.equals(fields[0])) {
            return true;
        }
        int shuffleId = Integer.parseInt(fields[1]);
        String identity = fields[2];
        if (!identity.equals(manager.identities.get(shuffleId))) {
            return true;  // not a shuffle of this application as the driver knows it
        }
        StringBuilder line = new StringBuilder(256).append("{\"k\":\"shuffle.map\"");
        SparkRecoverListener.string(line.append(",\"shuffle\":"), identity);
        line.append(",\"spark_shuffle\":").append(shuffleId);
        appendStage(line, manager.stageNames.get(shuffleId));
        line.append(",\"map\":").append(Integer.parseInt(fields[3]));
        SparkRecoverListener.string(line.append(",\"path\":"), fields[4]);
        String[] keys = {"data_bytes", "index_bytes", "records", "row_bytes", "keep_us", "copy_us", "wait_us"};
        for (int i = 0; i < keys.length; i++) {
            line.append(",\"").append(keys[i]).append("\":").append(Long.parseLong(fields[5 + i]));
        }
        SparkRecoverListener.emitFinishedWork(line.append('}'));
        KeptServing.durable(shuffleId, Integer.parseInt(fields[3]), fields[4]);
        return true;
    }

    /** The driver's side (KeptServing asks it): identity, stage name, reduce count; or null. */
    static Object[] driverSide(int shuffleId) {
        KeepingShuffleManager manager = driverInstance;
        return manager == null ? null : new Object[] {manager.identities.get(shuffleId),
            manager.stageNames.get(shuffleId), manager.reduceCounts.get(shuffleId), manager.store()};
    }

    // -- executors -------------------------------------------------------------------------------

    @Override
    public <K, V> ShuffleWriter<K, V> getWriter(ShuffleHandle handle, long mapId, TaskContext context,
                                                 ShuffleWriteMetricsReporter metrics) {
        ShuffleWriter<K, V> writer = super.getWriter(handle, mapId, context, metrics);
        if (!(handle instanceof KeptShuffleHandles.Kept) || keepRoot == null) {
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

    @Override
    public <K, C> ShuffleReader<K, C> getReader(ShuffleHandle handle, int startMapIndex, int endMapIndex,
                                                int startPartition, int endPartition, TaskContext context,
                                                ShuffleReadMetricsReporter metrics) {
        if (handle instanceof KeptShuffleHandles.Kept) {
            String[] folders = ((KeptShuffleHandles.Kept) handle).reused();
            if (folders != null && reused.put(handle.shuffleId(), folders) == null) {
                IndexShuffleBlockResolver blocks = shuffleBlockResolver();
                if (blocks instanceof KeptBlockResolver) {
                    ((KeptBlockResolver) blocks).prefetch(handle.shuffleId(), folders);
                }
            }
        }
        return super.getReader(handle, startMapIndex, endMapIndex, startPartition, endPartition, context, metrics);
    }

    @Override
    public boolean unregisterShuffle(int shuffleId) {
        reused.remove(shuffleId);
        KeptServing.forget(shuffleId);
        KeptBlockResolver current = resolver;
        if (current != null) {
            current.forget(shuffleId);
        }
        return super.unregisterShuffle(shuffleId);
    }

    /** Spark's resolver, plus the kept map outputs a resumed application reuses. */
    @Override
    public IndexShuffleBlockResolver shuffleBlockResolver() {
        KeptBlockResolver current = resolver;
        if (current == null) {
            if (conf == null) {
                return super.shuffleBlockResolver();  // called from Spark's constructor, before ours ran
            }
            synchronized (this) {
                if (resolver == null) {
                    resolver = new KeptBlockResolver(conf, super.shuffleBlockResolver(), this);
                }
                current = resolver;
            }
        }
        return current;
    }

    /**
     * The folder of the kept output reused for a map index of a shuffle, or of a lost executor's
     * output the driver serves from its copy (asked of the driver once); else null.
     */
    String keptFolder(int shuffleId, int mapIndex) {
        String[] folders = reused.get(shuffleId);
        String folder = folders == null || mapIndex < 0 || mapIndex >= folders.length ? null : folders[mapIndex];
        return folder != null || mapIndex < 0 ? folder : KeptServing.servedFolder(shuffleId, mapIndex);
    }

    // -- journal lines ---------------------------------------------------------------------------

    private void unsupported(int shuffleId, String stage, String reason) {
        StringBuilder line = new StringBuilder(256).append("{\"k\":\"shuffle.unsupported\"");
        line.append(",\"spark_shuffle\":").append(shuffleId < 0 ? "null" : String.valueOf(shuffleId));
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
