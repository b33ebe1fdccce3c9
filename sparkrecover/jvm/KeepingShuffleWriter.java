/*
 * The executor's side of keeping shuffle map outputs (docs/shuffles.md): Spark's own writer does
 * the work; once it has committed the map output (stop(true) returned a MapStatus), its data and
 * index files are hard-linked (or copied, when so configured) into a scratch folder under the keep
 * folder with a small meta file, and the folder is renamed to map-<mapIndex> in one step. So a
 * map-<i> folder is either whole or absent, and it exists before the task's status reaches the
 * driver, whose listener journals it: the record never runs ahead of the files.
 *
 * Keeping must never fail the task: any error leaves the map output unkept, and says so once.
 */
package sparkrecover.jvm;

import java.io.File;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.AtomicMoveNotSupportedException;
import java.nio.file.FileAlreadyExistsException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;

import org.apache.spark.TaskContext;
import org.apache.spark.scheduler.MapStatus;
import org.apache.spark.shuffle.IndexShuffleBlockResolver;
import org.apache.spark.shuffle.ShuffleWriter;

final class KeepingShuffleWriter<K, V> extends ShuffleWriter<K, V> {
    private final ShuffleWriter<K, V> inner;
    private final KeepingShuffleManager manager;
    private final int shuffleId;
    private final long mapId;
    private final String keepId;
    private final TaskContext context;
    private final Object rowBytesMetric;  // the serializer's dataSize SQLMetric (this task's copy), or null

    KeepingShuffleWriter(ShuffleWriter<K, V> inner, KeepingShuffleManager manager, int shuffleId, long mapId,
                         String keepId, TaskContext context, Object rowBytesMetric) {
        this.inner = inner;
        this.manager = manager;
        this.shuffleId = shuffleId;
        this.mapId = mapId;
        this.keepId = keepId;
        this.context = context;
        this.rowBytesMetric = rowBytesMetric;
    }

    @Override
    public void write(scala.collection.Iterator<scala.Product2<K, V>> records) throws IOException {
        inner.write(records);
    }

    @Override
    public scala.Option<MapStatus> stop(boolean success) {
        scala.Option<MapStatus> status = inner.stop(success);
        if (success && status != null && status.isDefined()) {
            try {
                keep();
            } catch (IOException | RuntimeException | LinkageError error) {
                KeepingShuffleManager.warnOnce("a shuffle map output was not kept: " + error);
            }
        }
        return status;
    }

    @Override
    public long[] getPartitionLengths() {
        return inner.getPartitionLengths();
    }

    private void keep() throws IOException {
        long started = System.nanoTime();
        IndexShuffleBlockResolver resolver = manager.shuffleBlockResolver();
        File data = resolver.getDataFile(shuffleId, mapId);
        File index = resolver.getIndexFile(shuffleId, mapId, scala.Option.<String[]>apply(null));
        int mapIndex = context.partitionId();
        Path shuffleFolder = manager.keepFolder().toPath().resolve(keepId);
        Path target = shuffleFolder.resolve("map-" + mapIndex);
        if (Files.exists(target)) {
            return;  // another attempt of this map task kept it first: the same bytes
        }
        Path scratch = shuffleFolder.resolve(".tmp-" + mapIndex + "-" + context.taskAttemptId());
        Files.createDirectories(scratch);
        try {
            // A map task whose partition was empty may write no data file.
            long dataBytes = data.exists() ? place(data.toPath(), scratch.resolve("data")) : 0;
            long indexBytes = place(index.toPath(), scratch.resolve("index"));
            long records = context.taskMetrics().shuffleWriteMetrics().recordsWritten();
            long rowBytes = KeepingShuffleManager.metricValue(rowBytesMetric);
            String meta = "records=" + records + "\nrow_bytes=" + rowBytes + "\ndata_bytes=" + dataBytes
                + "\nindex_bytes=" + indexBytes + "\nkeep_us=" + (System.nanoTime() - started) / 1000 + "\n";
            Files.write(scratch.resolve("meta"), meta.getBytes(StandardCharsets.UTF_8));
            try {
                Files.move(scratch, target, StandardCopyOption.ATOMIC_MOVE);
            } catch (FileAlreadyExistsException | java.nio.file.DirectoryNotEmptyException raced) {
                // kept by another attempt meanwhile
            } catch (AtomicMoveNotSupportedException error) {
                throw new IOException("the keep folder cannot rename atomically: " + error);
            }
        } finally {
            deleteQuietly(scratch);
        }
    }

    /** Hard link, or copy in copy mode; returns the file's size. */
    private long place(Path from, Path to) throws IOException {
        if (manager.copies()) {
            Files.copy(from, to);
        } else {
            Files.createLink(to, from);
        }
        return Files.size(to);
    }

    private static void deleteQuietly(Path folder) {
        File[] files = folder.toFile().listFiles();
        if (files != null) {
            for (File file : files) {
                file.delete();
            }
        }
        folder.toFile().delete();
    }
}
