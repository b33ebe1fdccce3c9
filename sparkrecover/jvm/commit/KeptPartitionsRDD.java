/*
 * The RDD a resumed write runs (docs/design.md §4a): its parent's partitions, one to one, with the
 * partitions whose output was kept from a crashed attempt left empty.
 *
 * compute() returns an empty iterator for a kept partition without asking the parent for its
 * iterator, so nothing upstream runs for it: no file scan, no Python worker, no shuffle read.
 * Every other partition is the parent's own iterator. The first attempt of a write runs through
 * this class too (with nothing kept), so that "partition i" is the same thing in both attempts.
 *
 * Preferred locations: with nothing kept, none of its own, so Spark's scheduler takes the parent's
 * (the first partition of its narrow, one-to-one dependency). In a resumed write, the computed
 * partitions' tasks go first: each prefers the hosts of live executors (the parent's own hosts where
 * some executor runs on them, so data locality stays), and each kept partition none at all, which
 * Spark's scheduler offers an executor only when no computed task can be placed on it (NO_PREF
 * comes after NODE_LOCAL, with no locality wait). "None at all" is a list holding only null: the
 * DAGScheduler drops null locations but stops looking further up at a non-empty list, where an
 * empty one would hand the kept partition the parent's hosts (for kept map outputs, FallbackStorage's
 * host, which no executor has: the scheduler would then wait spark.locality.wait for it). A kept task
 * costs a task's start and nothing else, but on a new application's executors the first task of
 * each pays for the JVM's warm-up (class loading, the Python worker's start): a computed one then
 * pays it once, where a kept one first and a computed one after would each pay their part.
 *
 * Unlike the rest of this jar, getPreferredLocations has a Scala collection in its signature
 * (Seq: scala.collection.Seq on Scala 2.12, scala.collection.immutable.Seq on 2.13): it returns an
 * immutable List, which fits both, and the jar is compiled against the Spark it runs in.
 * scala.collection.Iterator and scala.Option have the same binary name in both.
 */
package sparkrecover.jvm.commit;

import java.util.BitSet;

import java.util.LinkedHashSet;
import java.util.Set;

import org.apache.spark.Partition;
import org.apache.spark.Partitioner;
import org.apache.spark.SparkExecutorInfo;
import org.apache.spark.TaskContext;
import org.apache.spark.rdd.RDD;
import org.apache.spark.scheduler.TaskLocation;
import scala.Enumeration;
import scala.Option;
import scala.collection.Iterator;
import scala.collection.Iterator$;
import scala.collection.immutable.List;
import scala.collection.immutable.Nil$;
import scala.reflect.ClassTag;
import scala.reflect.ClassTag$;

public final class KeptPartitionsRDD<T> extends RDD<T> {
    private static final long serialVersionUID = 1L;

    private RDD<T> parent;  // null once checkpointed (clearDependencies), as in Spark's own RDDs
    private final BitSet kept;
    private final int keptCount;
    private final transient Option<Partitioner> partitioning;
    // Driver side: liveHosts(), and when it was asked (System.nanoTime).
    private transient volatile Set<String> liveHosts;
    private transient volatile long liveHostsAt;

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
    public List<String> getPreferredLocations(Partition split) {
        if (keptCount == 0 || parent == null) {
            return nothing();  // the parent's, as Spark's scheduler finds them by itself
        }
        if (kept.get(split.index())) {
            return nothing().$colon$colon((String) null);  // no preference, and no parent's either
        }
        Set<String> live = liveHosts();
        Set<String> own = new LinkedHashSet<String>();
        scala.collection.Iterable<TaskLocation> parents = context().getPreferredLocs(parent, split.index());
        for (Iterator<TaskLocation> each = parents.iterator(); each.hasNext(); ) {
            String host = each.next().host();
            if (live.contains(host)) {
                own.add(host);
            }
        }
        List<String> hosts = nothing();
        for (String host : own.isEmpty() ? live : own) {
            hosts = hosts.$colon$colon(host);
        }
        return hosts;
    }

    /**
     * The hosts of live executors, asked of Spark once per second at most: the DAGScheduler asks
     * for every partition's locations in a row when it submits the stage, and a list of executors
     * built per partition would cost partitions x executors there.
     */
    private Set<String> liveHosts() {
        long now = System.nanoTime();
        Set<String> known = liveHosts;
        if (known != null && now - liveHostsAt < 1_000_000_000L) {
            return known;
        }
        Set<String> hosts = new LinkedHashSet<String>();
        for (SparkExecutorInfo executor : context().statusTracker().getExecutorInfos()) {
            hosts.add(executor.host());
        }
        liveHosts = hosts;
        liveHostsAt = now;
        return hosts;
    }

    @SuppressWarnings("unchecked")
    private static List<String> nothing() {
        return (List<String>) (List<?>) Nil$.MODULE$;
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
