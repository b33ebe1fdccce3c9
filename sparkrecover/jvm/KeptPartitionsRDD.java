/*
 * The RDD a resumed write runs (docs/design.md §4a): its parent's partitions, one to one, with the
 * partitions whose output was kept from a crashed attempt left empty.
 *
 * compute() returns an empty iterator for a kept partition without asking the parent for its
 * iterator, so nothing upstream runs for it: no file scan, no Python worker, no shuffle read.
 * Every other partition is the parent's own iterator. The first attempt of a write runs through
 * this class too (with nothing kept), so that "partition i" is the same thing in both attempts.
 *
 * Preferred locations need no override: this RDD has none of its own, and Spark's scheduler then
 * takes those of the first partition of its narrow (one-to-one) dependency, i.e. the parent's.
 * Like every class in this jar it calls and overrides nothing whose signature mentions a Scala
 * collection (Seq differs between Scala 2.12 and 2.13), so one class file runs on Spark 3.5 and 4.
 * scala.collection.Iterator and scala.Option have the same binary name in both.
 */
package sparkrecover.jvm;

import java.util.BitSet;

import org.apache.spark.Partition;
import org.apache.spark.Partitioner;
import org.apache.spark.TaskContext;
import org.apache.spark.rdd.RDD;
import scala.Enumeration;
import scala.Option;
import scala.collection.Iterator;
import scala.collection.Iterator$;
import scala.reflect.ClassTag;
import scala.reflect.ClassTag$;

public final class KeptPartitionsRDD<T> extends RDD<T> {
    private static final long serialVersionUID = 1L;

    private RDD<T> parent;  // null once checkpointed (clearDependencies), as in Spark's own RDDs
    private final BitSet kept;
    private final int keptCount;
    private final transient Option<Partitioner> partitioning;

    /** @param kept the kept partition ids, comma-separated ("" or null: none). */
    public KeptPartitionsRDD(RDD<T> parent, String kept) {
        this(parent, parse(kept));
    }

    public KeptPartitionsRDD(RDD<T> parent, int[] kept) {
        super(parent, KeptPartitionsRDD.<T>anyRef());
        this.parent = parent;
        this.kept = new BitSet();
        int partitions = parent.partitions().length;
        for (int id : kept) {
            if (id < 0 || id >= partitions) {
                throw new IllegalArgumentException("kept partition " + id + " does not exist: the RDD has "
                                                   + partitions + " partitions");
            }
            this.kept.set(id);
        }
        this.keptCount = this.kept.cardinality();
        this.partitioning = parent.partitioner();
    }

    @SuppressWarnings("unchecked")
    private static <T> ClassTag<T> anyRef() {
        return (ClassTag<T>) (ClassTag<?>) ClassTag$.MODULE$.AnyRef();
    }

    static int[] parse(String text) {
        if (text == null || text.trim().isEmpty()) {
            return new int[0];
        }
        String[] parts = text.split(",");
        int[] ids = new int[parts.length];
        for (int i = 0; i < parts.length; i++) {
            ids[i] = Integer.parseInt(parts[i].trim());
        }
        return ids;
    }

    public boolean isKept(int partition) {
        return kept.get(partition);
    }

    /** How many partitions are kept (not computed). */
    public int keptCount() {
        return keptCount;
    }

    @Override
    public Iterator<T> compute(Partition split, TaskContext context) {
        if (kept.get(split.index())) {
            return empty();
        }
        return parent.iterator(split, context);
    }

    /** Scala 2.12's Iterator.empty is an Iterator[Nothing] value, 2.13's a generic method: both
     * compile to empty()Lscala/collection/Iterator;, so called without a type argument and cast. */
    @SuppressWarnings("unchecked")
    private static <T> Iterator<T> empty() {
        return (Iterator<T>) (Iterator<?>) Iterator$.MODULE$.empty();
    }

    @Override
    public Partition[] getPartitions() {
        return parent.partitions();
    }

    @Override
    public Option<Partitioner> partitioner() {
        // Read on the driver only (like Spark's own @transient partitioner); null while the
        // superclass constructor runs.
        return partitioning == null ? Option.<Partitioner>empty() : partitioning;
    }

    /** The parent's level: leaving partitions empty on purpose changes nothing about the others. */
    @Override
    public Enumeration.Value getOutputDeterministicLevel() {
        return parent == null ? super.getOutputDeterministicLevel() : parent.outputDeterministicLevel();
    }

    @Override
    public void clearDependencies() {
        super.clearDependencies();
        parent = null;
    }
}
