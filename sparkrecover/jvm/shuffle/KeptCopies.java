/*
 * The executor's keeping of finished map outputs (docs/shuffles.md,
 * docs/decisions/0026-kept-map-outputs-on-any-filesystem.md).
 *
 * Where the keep folder shares a filesystem with Spark's local directories and links were asked
 * for, a map output is two hard links and a meta file, made on the map task's thread before its
 * status reaches the driver (well under a millisecond). Anywhere else it is a copy: the task's end
 * opens the two files (so Spark removing them later cannot cut a copy short) and hands them to a
 * small pool of copier threads, which also open the keep folder's store if it is not open yet (an
 * S3 client takes seconds to start, and a map task must not wait for it on its own thread); the
 * task goes on at once unless COPIES copies are already waiting, which bounds how far keeping can
 * fall behind a slow store (the task then waits, and says how long in wait_us). A copy writes
 * data, then index, then meta; each is durable when written (a local copy is forced to disk, a
 * Hadoop stream's close is its upload). Only then is the driver told (KeepingPlugin), which
 * journals the map output: the record never runs ahead of the files.
 *
 * Keeping never fails a task: an error leaves the map output unkept, removes what was written,
 * and is said once (to the executor's log and, through the driver, to the journal).
 */
package sparkrecover.jvm.shuffle;

import java.io.File;
import java.io.IOException;
import java.nio.channels.FileChannel;
import java.nio.file.StandardOpenOption;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Semaphore;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;
import java.util.function.Supplier;

final class KeptCopies {
    /** Copier threads per executor: copies are I/O bound; two keep a store's latency hidden. */
    static final int THREADS = 2;
    /** Copies handed over and not finished, per executor, before a map task's end waits. */
    static final int COPIES = 16;

    private static final Semaphore SLOTS = new Semaphore(COPIES);
    private static volatile ExecutorService pool;
    private static volatile boolean stopping;

    private KeptCopies() {
    }

    /** What one finished map task wrote, and where it is to be kept. */
    static final class MapOutput {
        int shuffleId;
        String identity;
        int mapIndex;
        long taskAttemptId;
        File data;
        File index;
        long records;
        long rowBytes;

        String folder() {
            return identity + "/map-" + mapIndex + "-t" + taskAttemptId + "-"
                + Integer.toHexString(ThreadLocalRandom.current().nextInt() | 0x10000000);
        }
    }

    /**
     * Keeps one map output: at once when it is links into a local keep folder, else by the copier
     * threads. {@code stores} gives the keep folder's store (null: keep nothing), opening it on
     * first use; {@code local} says whether it is a local folder without opening it.
     */
    static void keep(Supplier<KeptStore> stores, boolean local, boolean links, MapOutput output) throws IOException {
        long started = System.nanoTime();
        String folder = output.folder();
        // A map task whose partition was empty may write no data file.
        boolean hasData = output.data.exists();
        if (links && local) {
            KeptStore store = stores.get();  // a local store opens at once
            if (store == null) {
                return;
            }
            try {
                if (hasData) {
                    store.link(output.data.toPath(), folder, "data");
                }
                store.link(output.index.toPath(), folder, "index");
                long dataBytes = hasData ? output.data.length() : 0;
                long indexBytes = output.index.length();
                long keepUs = (System.nanoTime() - started) / 1000;
                commit(store, output, folder, dataBytes, indexBytes, keepUs, 0, 0);
            } catch (IOException | RuntimeException error) {
                store.delete(folder);
                throw error;
            }
            return;
        }
        FileChannel data = hasData ? FileChannel.open(output.data.toPath(), StandardOpenOption.READ) : null;
        FileChannel index;
        try {
            index = FileChannel.open(output.index.toPath(), StandardOpenOption.READ);
        } catch (IOException error) {
            closeQuietly(data);
            throw error;
        }
        long waited = System.nanoTime();
        try {
            SLOTS.acquire();
        } catch (InterruptedException interrupted) {
            closeQuietly(data);
            closeQuietly(index);
            Thread.currentThread().interrupt();
            return;  // the task was killed: its output is not kept
        }
        long waitUs = (System.nanoTime() - waited) / 1000;
        long keepUs = (System.nanoTime() - started) / 1000;
        try {
            copier().execute(() -> copy(stores, output, folder, data, index, keepUs, waitUs));
        } catch (RuntimeException rejected) {  // the pool was shut down: the executor is stopping
            SLOTS.release();
            closeQuietly(data);
            closeQuietly(index);
        }
    }

    private static void copy(Supplier<KeptStore> stores, MapOutput output, String folder, FileChannel data,
                             FileChannel index, long keepUs, long waitUs) {
        long started = System.nanoTime();
        KeptStore store = null;
        try {
            if (stopping) {
                return;  // queued when the executor began to stop: nothing written yet
            }
            store = stores.get();  // the first copies wait here for a remote store to open
            if (store == null) {
                return;
            }
            long dataBytes = data == null ? 0 : data.size();
            long indexBytes = index.size();
            KeptStore.Abort abort = () -> stopping;
            if (data != null) {
                store.copy(data, dataBytes, folder, "data", abort);
            }
            store.copy(index, indexBytes, folder, "index", abort);
            if (stopping) {
                throw new IOException("the executor is stopping");
            }
            commit(store, output, folder, dataBytes, indexBytes, keepUs, (System.nanoTime() - started) / 1000, waitUs);
        } catch (IOException | RuntimeException | LinkageError error) {
            if (store != null) {
                store.delete(folder);
            }
            if (!stopping) {
                failed("a shuffle map output could not be copied to " + (store != null ? store.root : "the keep folder")
                       + ": " + error);
            }
        } finally {
            closeQuietly(data);
            closeQuietly(index);
            SLOTS.release();
        }
    }

    /** Writes meta (the folder is whole from then on) and tells the driver. */
    private static void commit(KeptStore store, MapOutput output, String folder, long dataBytes, long indexBytes,
                               long keepUs, long copyUs, long waitUs) throws IOException {
        Map<String, Long> meta = new LinkedHashMap<String, Long>();
        meta.put("records", output.records);
        meta.put("row_bytes", output.rowBytes);
        meta.put("data_bytes", dataBytes);
        meta.put("index_bytes", indexBytes);
        meta.put("keep_us", keepUs);
        meta.put("copy_us", copyUs);
        meta.put("wait_us", waitUs);
        store.commit(folder, KeptStore.utf8(KeptStore.meta(meta)));
        StringBuilder message = new StringBuilder(200).append(KeepingPlugin.KEPT);
        Object[] fields = {output.shuffleId, output.identity, output.mapIndex, folder, dataBytes, indexBytes,
                           output.records, output.rowBytes, keepUs, copyUs, waitUs};
        for (Object field : fields) {
            message.append('\t').append(field);
        }
        KeepingPlugin.tellDriver(message.toString());
    }

    static void failed(String why) {
        KeepingShuffleManager.warnOnce(why);
        KeepingPlugin.tellDriverOnce(KeepingPlugin.FAILED + "\t" + why);
    }

    private static ExecutorService copier() {
        ExecutorService current = pool;
        if (current == null) {
            synchronized (KeptCopies.class) {
                if (pool == null) {
                    stopping = false;
                    pool = Executors.newFixedThreadPool(THREADS, task -> {
                        Thread thread = new Thread(task, "sparkrecover-keep-copier");
                        thread.setDaemon(true);
                        return thread;
                    });
                }
                current = pool;
            }
        }
        return current;
    }

    /**
     * The executor is stopping: copies in flight stop between chunks and remove what they wrote,
     * so a stopped application leaves no half-copied folder behind (those would never be read:
     * they have no meta). Waits a little for them.
     */
    static void shutdown() {
        ExecutorService current;
        synchronized (KeptCopies.class) {
            current = pool;
            pool = null;
            stopping = true;
        }
        if (current != null) {
            current.shutdown();
            try {
                current.awaitTermination(2, TimeUnit.SECONDS);
            } catch (InterruptedException interrupted) {
                Thread.currentThread().interrupt();
            }
        }
    }

    private static void closeQuietly(FileChannel channel) {
        if (channel != null) {
            try {
                channel.close();
            } catch (IOException ignored) {
                // read-only: nothing lost
            }
        }
    }
}
