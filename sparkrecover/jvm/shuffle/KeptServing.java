/*
 * A lost executor's map outputs served from their kept copies, in the running application
 * (docs/shuffles.md, "An executor lost while the application runs";
 * docs/decisions/0047-lost-executor-served-from-copies.md).
 *
 * On a cluster, KeepingShuffleDataIO tells Spark that shuffle storage is reliable, so neither the
 * DAGScheduler nor the map stage's task set drops a lost executor's map outputs. This listener does
 * it instead, as soon as the executor is removed: each of its map outputs whose copy is durable
 * (the driver journaled it: received from the executor after the copy's files were in place) is
 * registered again at FallbackStorage's block manager id with map id MAP_ID_BASE + map index, as a
 * resumed application registers kept outputs, and executors read it through KeptBlockResolver
 * (which asks the driver for its folder); every other output of that executor is removed, as Spark
 * would have removed it, and its map task runs again. A slot a fetch failure emptied first is
 * filled from its copy too (sizes read from the kept index). A re-pointed output is at another
 * location than the one a reducer's fetch failure names, so Spark's unregisterMapOutput (which
 * checks the location) and removeOutputsOnExecutor leave it alone.
 *
 * One journal line per shuffle that had outputs there (shuffle.served): which map indexes were
 * served, which run again and why. Any failure here removes the executor's outputs as Spark would
 * have (nothing is served on a guess).
 */
package sparkrecover.jvm.shuffle;

import java.lang.reflect.Method;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;

import org.apache.spark.MapOutputTrackerMaster;
import org.apache.spark.ShuffleStatus;
import org.apache.spark.SparkContext;
import org.apache.spark.SparkEnv;
import org.apache.spark.scheduler.MapStatus;
import org.apache.spark.scheduler.SparkListener;
import org.apache.spark.scheduler.SparkListenerExecutorRemoved;

import sparkrecover.jvm.bridge.SparkRecoverListener;

final class KeptServing extends SparkListener {
    /** Set once the listener is installed: only then does KeepingShuffleDataIO claim reliable storage. */
    static volatile boolean installed;

    // Driver side: spark shuffle id -> map index -> folder of its durable copy (journaled).
    private static final Map<Integer, Map<Integer, String>> DURABLE = new ConcurrentHashMap<>();
    // Executor side: "<shuffle id>/<map index>" -> the folder of a served map output's copy.
    private static final Map<String, String> SERVED = new ConcurrentHashMap<>();
    // One executor loss at a time, off the listener bus's thread (an index may be read from S3).
    private static final ExecutorService WORKER = Executors.newSingleThreadExecutor(runnable -> {
        Thread thread = new Thread(runnable, "sparkrecover-serving");
        thread.setDaemon(true);
        return thread;
    });

    private KeptServing() {
    }

    /** Installs the listener on the driver (KeepingPlugin's driver side), when serving is asked for. */
    static void install(SparkContext context) {
        // Not with dynamic allocation: Spark would then remove executors holding map outputs whose
        // copies may not be durable yet, counting on storage this is not. Not with the external
        // shuffle service: it serves a lost executor's outputs itself, durable copies or not.
        if (!context.conf().getBoolean(KeepingShuffleDataIO.SERVE, false) || context.isLocal()
                || context.conf().getBoolean("spark.dynamicAllocation.enabled", false)
                || context.conf().getBoolean("spark.shuffle.service.enabled", false)) {
            return;
        }
        try {
            context.listenerBus().addToQueue(new KeptServing(), "sparkrecover");
        } catch (RuntimeException | LinkageError error) {
            context.addSparkListener(new KeptServing());
        }
        installed = true;
    }

    /** A map output's copy is durable (the driver journals it now). */
    static void durable(int shuffleId, int mapIndex, String folder) {
        DURABLE.computeIfAbsent(shuffleId, id -> new ConcurrentHashMap<>()).put(mapIndex, folder);
    }

    /** The shuffle is gone (unregistered, on the driver or an executor). */
    static void forget(int shuffleId) {
        DURABLE.remove(shuffleId);
        SERVED.keySet().removeIf(key -> key.startsWith(shuffleId + "/"));
    }

    /** Executor side: the folder of a served map output's copy, asked of the driver once; or null. */
    static String servedFolder(int shuffleId, int mapIndex) {
        String key = shuffleId + "/" + mapIndex;
        String folder = SERVED.get(key);
        if (folder == null) {
            folder = KeepingPlugin.askFolder(shuffleId, mapIndex);
            if (folder != null) {
                SERVED.put(key, folder);
            }
        }
        return folder;
    }

    /** The folder of a served map output's copy, for an executor that reads it (null: none). */
    static String folder(int shuffleId, int mapIndex) {
        Map<Integer, String> folders = DURABLE.get(shuffleId);
        return folders == null ? null : folders.get(mapIndex);
    }

    @Override
    public void onExecutorRemoved(SparkListenerExecutorRemoved event) {
        String executor = event.executorId();
        WORKER.execute(() -> serve(executor));
    }

    private static void serve(String executor) {
        MapOutputTrackerMaster tracker;
        try {
            tracker = (MapOutputTrackerMaster) SparkEnv.get().mapOutputTracker();
        } catch (RuntimeException | LinkageError error) {
            return;  // the application is stopping
        }
        List<StringBuilder> lines = new ArrayList<>();
        try {
            Object location = KeptRegistration.blockManagerId();
            Method registerMap = KeptRegistration.findMethod(tracker.getClass(), "registerMapOutput", 3);
            Class<?> factory = Class.forName("org.apache.spark.scheduler.MapStatus$");
            Method apply = KeptRegistration.findMethod(factory, "apply", -1);
            Object statusFactory = factory.getField("MODULE$").get(null);
            scala.collection.Iterator<scala.Tuple2<Object, ShuffleStatus>> shuffles = tracker.shuffleStatuses().iterator();
            while (shuffles.hasNext()) {
                scala.Tuple2<Object, ShuffleStatus> entry = shuffles.next();
                int shuffleId = (Integer) entry._1();
                ShuffleStatus shuffle = entry._2();
                MapStatus[] statuses = shuffle.withMapStatuses(current -> current.clone());
                Map<Integer, String> copies = DURABLE.get(shuffleId);
                Object[] side = KeepingShuffleManager.driverSide(shuffleId);
                String identity = side == null ? null : (String) side[0];
                List<Integer> served = new ArrayList<>();
                List<Integer> again = new ArrayList<>();
                boolean anyHere = false;
                for (int mapIndex = 0; mapIndex < statuses.length; mapIndex++) {
                    MapStatus status = statuses[mapIndex];
                    boolean here = status != null && executor.equals(status.location().executorId());
                    anyHere |= here;
                    String folder = copies == null ? null : copies.get(mapIndex);
                    if (!here && !(status == null && folder != null)) {
                        continue;
                    }
                    long[] sizes = folder == null ? null : sizes(status, folder, side);
                    if (sizes == null) {
                        if (here) {
                            again.add(mapIndex);
                        }
                        continue;
                    }
                    long mapId = KeepingShuffleManager.MAP_ID_BASE + mapIndex;
                    Object kept = apply.getParameterCount() == 4
                        ? apply.invoke(statusFactory, location, sizes, mapId, 0L)
                        : apply.invoke(statusFactory, location, sizes, mapId);
                    registerMap.invoke(tracker, shuffleId, mapIndex, kept);
                    served.add(mapIndex);
                }
                if (!served.isEmpty()) {
                    shuffle.invalidateSerializedMapOutputStatusCache();
                }
                if (anyHere || !served.isEmpty()) {
                    lines.add(line(shuffleId, identity, side == null ? null : (String) side[1], executor,
                                   statuses.length, served, again));
                }
            }
        } catch (ReflectiveOperationException | RuntimeException | LinkageError error) {
            lines.clear();
            StringBuilder line = new StringBuilder(256).append("{\"k\":\"shuffle.unsupported\",\"spark_shuffle\":null");
            SparkRecoverListener.string(line.append(",\"stage\":null,\"reason\":"),
                                        "serving a lost executor's map outputs failed: " + error);
            lines.add(line.append('}'));
        }
        // What was not re-pointed goes, as Spark would have dropped it (and the epoch moves on, so
        // executors fetch the new locations).
        try {
            tracker.removeOutputsOnExecutor(executor);
        } catch (RuntimeException error) {
            tracker.incrementEpoch();
        }
        for (StringBuilder line : lines) {
            SparkRecoverListener.emitFinishedWork(line);
        }
    }

    /** Per reduce partition: from the lost output's status, or (a slot emptied) from the kept index. */
    private static long[] sizes(MapStatus status, String folder, Object[] side) {
        if (side == null || side[2] == null) {
            return null;
        }
        int reduces = (Integer) side[2];
        if (status != null) {
            long[] sizes = new long[reduces];
            for (int reduce = 0; reduce < reduces; reduce++) {
                sizes[reduce] = status.getSizeForBlock(reduce);
            }
            return sizes;
        }
        KeptStore store = (KeptStore) side[3];
        if (store == null) {
            return null;
        }
        try {
            long[] offsets = store.offsets(folder);
            if (offsets.length != reduces + 1) {
                return null;
            }
            long[] sizes = new long[reduces];
            for (int reduce = 0; reduce < reduces; reduce++) {
                sizes[reduce] = offsets[reduce + 1] - offsets[reduce];
            }
            return sizes;
        } catch (java.io.IOException | RuntimeException error) {
            return null;
        }
    }

    private static StringBuilder line(int shuffleId, String identity, String stage, String executor, int maps,
                                      List<Integer> served, List<Integer> again) {
        StringBuilder line = new StringBuilder(256).append("{\"k\":\"shuffle.served\"");
        line.append(",\"shuffle\":");
        if (identity == null) {
            line.append("null");
        } else {
            SparkRecoverListener.string(line, identity);
        }
        line.append(",\"spark_shuffle\":").append(shuffleId);
        line.append(",\"stage\":");
        if (stage == null) {
            line.append("null");
        } else {
            SparkRecoverListener.string(line, stage);
        }
        SparkRecoverListener.string(line.append(",\"executor\":"), executor);
        line.append(",\"maps\":").append(maps);
        line.append(",\"served\":").append(served.toString().replace(" ", ""));
        line.append(",\"recomputed\":").append(again.toString().replace(" ", ""));
        String why = identity == null ? "its map outputs are not kept (shuffle.unsupported says why)"
            : again.isEmpty() ? null : "their copies were not yet durable";
        line.append(",\"why\":");
        if (why == null) {
            line.append("null");
        } else {
            SparkRecoverListener.string(line, why);
        }
        return line.append(",\"time_ms\":").append(System.currentTimeMillis()).append('}');
    }
}
