/*
 * Spark's block resolver, plus kept map outputs (docs/shuffles.md,
 * docs/decisions/0025-kept-shuffle-map-outputs.md).
 *
 * A resumed application registers each reused map output at FallbackStorage's block manager id
 * with map id MAP_ID_BASE + map index. Spark's fetcher treats that block manager as local, so a
 * reducer asks BlockManager.getLocalBlockData, which asks this resolver first: blocks of those map
 * ids are served straight from the keep folder as streams (KeptBlock), the index read once per
 * map output and executor. Every other block is Spark's (super). Nothing is laid out per
 * application, and FallbackStorage's reader (a new Hadoop Configuration and a whole block on the
 * heap per block) is never reached.
 *
 * On a remote store an index is a request of its own, and Spark asks for its local blocks one
 * after the other: the first reducer of a shuffle on an executor would wait for one round trip
 * per map output in turn. So as soon as a reducer learns which outputs are reused (prefetch), the
 * indexes not yet known here are all requested at once, on the fetch threads, and each block
 * waits only for its own.
 *
 * The constructor takes the base resolver's map of map tasks per shuffle, whose declared type
 * differs between Spark 3.5 (java.util.Map) and 4.x (ConcurrentMap): the jar is compiled against
 * the Spark it runs in (launch/jvm_files/listener_jar.py), so the one source fits both.
 */
package sparkrecover.jvm.shuffle;

import java.io.IOException;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.RejectedExecutionException;

import org.apache.spark.SparkConf;
import org.apache.spark.network.buffer.ManagedBuffer;
import org.apache.spark.shuffle.IndexShuffleBlockResolver;
import org.apache.spark.storage.BlockId;
import org.apache.spark.storage.ShuffleBlockBatchId;
import org.apache.spark.storage.ShuffleBlockId;

final class KeptBlockResolver extends IndexShuffleBlockResolver {
    private static final int CACHED_INDEXES = 4096;

    private final KeepingShuffleManager manager;
    // "<shuffle id>/<map index>" -> the kept index's offsets, read or being read, most recently
    // used last. A read that failed is dropped, so a later reducer tries again.
    private final Map<String, CompletableFuture<long[]>> offsets =
        new LinkedHashMap<String, CompletableFuture<long[]>>(64, 0.75f, true) {
            private static final long serialVersionUID = 1L;

            @Override
            protected boolean removeEldestEntry(Map.Entry<String, CompletableFuture<long[]>> eldest) {
                return size() > CACHED_INDEXES;
            }
        };

    KeptBlockResolver(SparkConf conf, IndexShuffleBlockResolver base, KeepingShuffleManager manager) {
        super(conf, null, base.taskIdMapsForShuffle());
        this.manager = manager;
    }

    @Override
    public ManagedBuffer getBlockData(BlockId blockId, scala.Option<String[]> dirs) {
        int shuffleId, start, end;
        long mapId;
        if (blockId instanceof ShuffleBlockId) {
            ShuffleBlockId block = (ShuffleBlockId) blockId;
            shuffleId = block.shuffleId();
            mapId = block.mapId();
            start = block.reduceId();
            end = start + 1;
        } else if (blockId instanceof ShuffleBlockBatchId) {
            ShuffleBlockBatchId batch = (ShuffleBlockBatchId) blockId;
            shuffleId = batch.shuffleId();
            mapId = batch.mapId();
            start = batch.startReduceId();
            end = batch.endReduceId();
        } else {
            return super.getBlockData(blockId, dirs);
        }
        if (mapId < KeepingShuffleManager.MAP_ID_BASE) {
            return super.getBlockData(blockId, dirs);
        }
        int mapIndex = (int) (mapId - KeepingShuffleManager.MAP_ID_BASE);
        KeptStore store = manager.store();
        String folder = manager.keptFolder(shuffleId, mapIndex);
        IOException broken = null;
        long[] bounds = null;
        if (store == null || folder == null) {
            broken = new IOException("no kept map output " + mapIndex + " of shuffle " + shuffleId
                                     + " is known to this executor");
        } else {
            try {
                bounds = offsetsOf(store, shuffleId, mapIndex, folder);
                if (end >= bounds.length) {
                    throw new IOException("the kept index has " + (bounds.length - 1) + " partitions, not " + end);
                }
            } catch (IOException | RuntimeException error) {
                broken = error instanceof IOException ? (IOException) error : new IOException(error);
            }
        }
        if (broken != null) {
            // Its size only feeds metrics; reading it fails as the kept output's fetch failure.
            return new KeptBlock(store, folder, -1, 0, 1, shuffleId, mapIndex, mapId, start, broken);
        }
        return new KeptBlock(store, folder, bounds[bounds.length - 1], bounds[start], bounds[end] - bounds[start], shuffleId, mapIndex, mapId,
                             start, null);
    }

    private long[] offsetsOf(KeptStore store, int shuffleId, int mapIndex, String folder) throws IOException {
        String key = shuffleId + "/" + mapIndex;
        CompletableFuture<long[]> known;
        CompletableFuture<long[]> mine = null;
        synchronized (offsets) {
            known = offsets.get(key);
            if (known == null) {
                known = mine = new CompletableFuture<long[]>();
                offsets.put(key, mine);
            }
        }
        if (mine != null) {
            read(store, key, folder, mine);  // on this thread: nobody asked for it ahead
        }
        try {
            return known.get();
        } catch (ExecutionException failed) {
            Throwable cause = failed.getCause();
            throw cause instanceof IOException ? (IOException) cause : new IOException(cause);
        } catch (InterruptedException interrupted) {
            Thread.currentThread().interrupt();
            throw new java.io.InterruptedIOException("interrupted while reading a kept index");
        }
    }

    private void read(KeptStore store, String key, String folder, CompletableFuture<long[]> into) {
        try {
            into.complete(store.offsets(folder));
        } catch (IOException | RuntimeException error) {
            synchronized (offsets) {
                offsets.remove(key, into);
            }
            into.completeExceptionally(error);
        }
    }

    /**
     * A reducer of {@code shuffleId} is about to ask for blocks of the kept outputs in {@code folders}
     * (per map index): on a remote store, request every index not yet known here, in parallel.
     */
    void prefetch(int shuffleId, String[] folders) {
        KeptStore store;
        try {
            store = manager.store();
        } catch (RuntimeException unreachable) {
            return;  // getBlockData meets the same when asked for a block
        }
        if (store == null || store.local()) {
            return;  // a local index is read faster than a thread is handed the work
        }
        for (int mapIndex = 0; mapIndex < folders.length; mapIndex++) {
            String folder = folders[mapIndex];
            if (folder == null) {
                continue;
            }
            String key = shuffleId + "/" + mapIndex;
            CompletableFuture<long[]> mine;
            synchronized (offsets) {
                if (offsets.containsKey(key)) {
                    continue;
                }
                mine = new CompletableFuture<long[]>();
                offsets.put(key, mine);
            }
            try {
                KeptBlock.FETCHERS.execute(() -> read(store, key, folder, mine));
            } catch (RejectedExecutionException busy) {
                read(store, key, folder, mine);
            }
        }
    }

    /** The shuffle is gone (unregistered): its kept indexes are no longer needed here. */
    void forget(int shuffleId) {
        String prefix = shuffleId + "/";
        synchronized (offsets) {
            offsets.keySet().removeIf(key -> key.startsWith(prefix));
        }
    }
}
