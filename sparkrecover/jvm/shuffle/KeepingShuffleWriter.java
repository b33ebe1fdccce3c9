/*
 * The executor's side of keeping shuffle map outputs (docs/shuffles.md): Spark's own writer does
 * the work; once it has committed the map output (stop(true) returned a MapStatus), its data and
 * index files are handed to KeptCopies, which links them into the keep folder at once or copies
 * them there in the background, and tells the driver once they are whole.
 *
 * Keeping must never fail the task: any error leaves the map output unkept, and says so once.
 */
package sparkrecover.jvm.shuffle;

import java.io.IOException;

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
                KeptCopies.failed("a shuffle map output was not kept: " + error);
            }
        }
        return status;
    }

    @Override
    public long[] getPartitionLengths() {
        return inner.getPartitionLengths();
    }

    private void keep() throws IOException {
        IndexShuffleBlockResolver resolver = manager.shuffleBlockResolver();
        KeptCopies.MapOutput output = new KeptCopies.MapOutput();
        output.shuffleId = shuffleId;
        output.identity = keepId;
        output.mapIndex = context.partitionId();
        output.taskAttemptId = context.taskAttemptId();
        output.data = resolver.getDataFile(shuffleId, mapId);
        output.index = resolver.getIndexFile(shuffleId, mapId, scala.Option.<String[]>apply(null));
        output.records = context.taskMetrics().shuffleWriteMetrics().recordsWritten();
        output.rowBytes = KeptRegistration.metricValue(rowBytesMetric);
        // The store itself is not asked for here: a remote one may still be opening (an S3 client
        // starts in seconds), and the map task must not wait for it (KeptCopies).
        KeptCopies.keep(manager::store, manager.keepsLocally(), manager.links(), output);
    }
}
