/*
 * The driver's registration of kept map outputs in a resumed application (KeepingShuffleManager,
 * docs/shuffles.md): inside registerShuffle, before the DAGScheduler creates the map stage, each
 * kept output of the shuffle's identity whose files are intact is registered with
 * MapOutputTrackerMaster at FallbackStorage's block manager id, map id MAP_ID_BASE + map index, so
 * the map stage finds it available and runs only the missing map tasks.
 *
 * Adaptive execution takes a stage's row count from its shuffle-write SQL metrics, which reused
 * map outputs never update (0 rows would make AQEPropagateEmptyRelation drop real rows): the kept
 * records and sizes are added to those metrics first, and when that step fails nothing is reused.
 *
 * Internals that differ between Spark 3.5 and 4.x (registerMapOutput's return type,
 * MapStatus.apply's arity, Scala collections) are called by reflection; a failure refuses reuse
 * and is reported, never guessed around.
 */
package sparkrecover.jvm.shuffle;

import java.io.IOException;
import java.lang.reflect.Method;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;

import org.apache.spark.ShuffleDependency;
import org.apache.spark.SparkEnv;

final class KeptRegistration {
    /** Index files read at once when the keep folder is remote (one request each). */
    private static final int PARALLEL_READS = 8;

    private KeptRegistration() {
    }

    /**
     * Registers the intact ones of {@code kept}; returns the folders registered per map index
     * (null where none), and sets {@code why[0]} when none could be.
     */
    @SuppressWarnings("rawtypes")
    static String[] register(KeptStore store, int shuffleId, ShuffleDependency dependency, String identity,
                             List<KeptOutput> kept, int numMaps, int numReduces, String[] why) {
        try {
            Map<String, Long> listed = store.sizes(identity);
            List<KeptOutput> intact = intact(store, listed, kept, numMaps, numReduces);
            if (intact.isEmpty()) {
                why[0] = "no kept map output is intact";
                return null;
            }
            long records = 0, rowBytes = 0, bytes = 0;
            for (KeptOutput output : intact) {
                records += output.records;
                rowBytes += output.rowBytes;
                bytes += output.dataBytes;
            }
            // The adaptive statistics first: without them nothing may be reused.
            Object[] metrics = writeMetrics(dependency);
            Object tracker = SparkEnv.get().mapOutputTracker();
            Method register = tracker.getClass().getMethod("registerShuffle", int.class, int.class, int.class);
            Method registerMap = findMethod(tracker.getClass(), "registerMapOutput", 3);
            Object location = blockManagerId();
            Method apply = findMethod(Class.forName("org.apache.spark.scheduler.MapStatus$"), "apply", -1);
            Object statusFactory = Class.forName("org.apache.spark.scheduler.MapStatus$").getField("MODULE$").get(null);
            List<Object[]> statuses = new ArrayList<Object[]>();
            String[] folders = new String[numMaps];
            for (KeptOutput output : intact) {
                long mapId = KeepingShuffleManager.MAP_ID_BASE + output.mapIndex;
                Object status = apply.getParameterCount() == 4
                    ? apply.invoke(statusFactory, location, output.sizes, mapId, 0L)
                    : apply.invoke(statusFactory, location, output.sizes, mapId);
                statuses.add(new Object[] {output.mapIndex, status});
                folders[output.mapIndex] = output.folder;
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
            return folders;
        } catch (ShuffleIdentity.Refused refused) {
            why[0] = refused.getMessage();
        } catch (ReflectiveOperationException | IOException | RuntimeException | LinkageError error) {
            why[0] = "Spark internals differ on this version, or the keep folder cannot be read: " + error;
        }
        return null;
    }

    /** The kept outputs whose files are intact; on a remote store their indexes are read in parallel. */
    private static List<KeptOutput> intact(KeptStore store, Map<String, Long> listed, List<KeptOutput> kept,
                                           int numMaps, int numReduces) {
        List<KeptOutput> candidates = new ArrayList<KeptOutput>();
        boolean[] seen = new boolean[numMaps];
        for (KeptOutput output : kept) {
            if (output.mapIndex >= 0 && output.mapIndex < numMaps && !seen[output.mapIndex]) {
                seen[output.mapIndex] = true;
                candidates.add(output);
            }
        }
        List<KeptOutput> intact = new ArrayList<KeptOutput>();
        if (store.local() || candidates.size() < 2) {
            for (KeptOutput output : candidates) {
                output.sizes = output.intactSizes(store, listed, numReduces);
                if (output.sizes != null) {
                    intact.add(output);
                }
            }
            return intact;
        }
        ExecutorService readers = Executors.newFixedThreadPool(Math.min(PARALLEL_READS, candidates.size()));
        try {
            List<Future<long[]>> sizes = new ArrayList<Future<long[]>>();
            for (KeptOutput output : candidates) {
                sizes.add(readers.submit(() -> output.intactSizes(store, listed, numReduces)));
            }
            for (int i = 0; i < candidates.size(); i++) {
                try {
                    candidates.get(i).sizes = sizes.get(i).get();
                } catch (java.util.concurrent.ExecutionException error) {
                    candidates.get(i).sizes = null;
                }
                if (candidates.get(i).sizes != null) {
                    intact.add(candidates.get(i));
                }
            }
        } catch (InterruptedException interrupted) {
            Thread.currentThread().interrupt();
            intact.clear();
        } finally {
            readers.shutdownNow();
        }
        return intact;
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

    static Object blockManagerId() throws ReflectiveOperationException {
        Class<?> fallback = Class.forName("org.apache.spark.storage.FallbackStorage$");
        Object module = fallback.getField("MODULE$").get(null);
        return fallback.getMethod("FALLBACK_BLOCK_MANAGER_ID").invoke(module);
    }

    /** A public method by name and parameter count (-1: the one with the most parameters). */
    static Method findMethod(Class<?> cls, String name, int parameters) throws NoSuchMethodException {
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
}
