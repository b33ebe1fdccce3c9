/*
 * What each partition of a write reads (task-level resume, docs/task-resume.md): for every
 * partition of an RDD, a digest of the leaf inputs it reaches -- file slices (path, start, length,
 * modification time) for file scans, the partition's index for other leaves -- and, for a
 * partition that reads a shuffle, a digest of everything the shuffle's map side reads (all its map
 * partitions, walked the same way) and of how it partitions rows (the partitioner's class and
 * count, a range partitioning's bounds). Beside it, the partition specs of every shuffle read in
 * the graph: which reducers (and, for a skew split, which map outputs) each post-shuffle
 * partition reads, as adaptive execution chose them from map-output sizes. No shuffle or
 * application id enters either: two applications whose digests and specs are equal read the same
 * input in partition i. sparkrecover/driver/tasks/partitions.py calls it once per write: walking a write
 * of 10,000 partitions through Py4J calls would cost seconds, here it costs milliseconds.
 *
 * Methods whose signatures mention Scala collections (RDD.dependencies, NarrowDependency
 * .getParents) are called by reflection and walked as scala.collection.Iterable, which Scala 2.12
 * and 2.13 share, so one class file runs on Spark 3.5 and 4.x.
 */
package sparkrecover.jvm.commit;

import java.lang.reflect.Field;
import java.lang.reflect.Method;
import java.lang.reflect.Modifier;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.IdentityHashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

import org.apache.spark.Dependency;
import org.apache.spark.OneToOneDependency;
import org.apache.spark.Partition;
import org.apache.spark.ShuffleDependency;
import org.apache.spark.rdd.RDD;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.execution.QueryExecution;
import org.apache.spark.sql.execution.SQLExecution;
import scala.Function0;
import scala.Option;

public final class WriteShapeProbe {
    private static final String FILE_SCAN = "org.apache.spark.sql.execution.datasources.FileScanRDD";
    private static final String RANGE_PARTITIONER = "org.apache.spark.RangePartitioner";
    // The integer fields of Spark's ShufflePartitionSpec case classes (dataSize left out: bytes
    // after compression, which need not repeat; the indices say which rows are read).
    private static final String[] SPEC_FIELDS = {
        "startReducerIndex", "endReducerIndex", "reducerIndex", "mapIndex", "startMapIndex", "endMapIndex",
        "numReducers",
    };

    private final Map<Integer, List<Dependency<?>>> dependencies = new HashMap<>();
    private final Map<String, List<String>> leaves = new HashMap<>();
    private final Map<Integer, String> mapSides = new HashMap<>();
    // Per shuffle: the digest of its range partitioning's bounds ("" when it has none).
    private final Map<Integer, String> bounds = new HashMap<>();
    // Per shuffle-reading RDD, in the order the walk meets them: its partitions' specs.
    private final Map<Integer, String> specs = new LinkedHashMap<>();
    private int rangePartitionings;
    private int rangeBoundsRead;

    private WriteShapeProbe() {
    }

    /**
     * The query's RDD ({@code toRdd}), computed inside a SQL execution of its own as a write's
     * would be: with adaptive execution this runs the map stages of its shuffles, and their jobs
     * belong to the query (the UI, and whatever reads {@code spark.sql.execution.id}, see them
     * there). The write then runs this RDD, so they run once.
     */
    public static RDD<InternalRow> execute(QueryExecution qe) {
        Function0<RDD<InternalRow>> body = () -> qe.toRdd();
        return SQLExecution.withNewExecutionId(qe, Option.<String>empty(), body);
    }

    /** One 16-hex-digit digest per partition of {@code rdd}, joined by newlines. */
    public static String slices(RDD<?> rdd) throws Exception {
        return new WriteShapeProbe().partitionDigests(rdd);
    }

    /**
     * The whole probe, one string: the per-partition digests (as {@link #slices}), a line
     * "--", one line per shuffle read (its partitions' specs, space-separated), a line "--" and a
     * line "range R B": R range partitionings met, B of them whose bounds were read.
     */
    public static String probe(RDD<?> rdd) throws Exception {
        WriteShapeProbe probe = new WriteShapeProbe();
        StringBuilder out = new StringBuilder(probe.partitionDigests(rdd));
        out.append("\n--");
        for (String line : probe.specs.values()) {
            out.append('\n').append(line);
        }
        out.append("\n--\nrange ").append(probe.rangePartitionings).append(' ').append(probe.rangeBoundsRead);
        return out.toString();
    }

    private String partitionDigests(RDD<?> rdd) throws Exception {
        int count = rdd.partitions().length;
        StringBuilder out = new StringBuilder(count * 17);
        for (int pid = 0; pid < count; pid++) {
            List<String> found = new ArrayList<>();
            walk(rdd, pid, found);
            if (pid > 0) {
                out.append('\n');
            }
            out.append(digest(String.join("\n", found)));
        }
        return out.toString();
    }

    private void walk(RDD<?> node, int pid, List<String> out) throws Exception {
        String key = node.id() + ":" + pid;
        List<String> known = leaves.get(key);
        if (known != null) {
            out.addAll(known);
            return;
        }
        List<String> mine = new ArrayList<>();
        List<Dependency<?>> found = dependenciesOf(node);
        if (found.isEmpty()) {
            mine.add(leaf(node, pid));
        }
        for (Dependency<?> dep : found) {
            if (dep instanceof ShuffleDependency) {
                ShuffleDependency<?, ?, ?> shuffle = (ShuffleDependency<?, ?, ?>) dep;
                String side = mapSide(shuffle);
                mine.add("shuffle:" + side + ":" + specsOf(node, bounds.get(shuffle.shuffleId())) + ":" + pid);
            } else if (dep instanceof OneToOneDependency) {
                walk(dep.rdd(), pid, mine);
            } else {
                Method parents = dep.getClass().getMethod("getParents", int.class);
                for (Object parent : iterate(parents.invoke(dep, pid))) {
                    walk(dep.rdd(), ((Number) parent).intValue(), mine);
                }
            }
        }
        leaves.put(key, mine);
        out.addAll(mine);
    }

    /** What every map partition of a shuffle reads, and how its rows are partitioned. */
    private String mapSide(ShuffleDependency<?, ?, ?> dep) throws Exception {
        String known = mapSides.get(dep.shuffleId());
        if (known != null) {
            return known;
        }
        RDD<?> map = dep.rdd();
        StringBuilder text = new StringBuilder();
        text.append("partitioner:").append(dep.partitioner().getClass().getName())
            .append(':').append(dep.partitioner().numPartitions()).append('\n');
        bounds.put(dep.shuffleId(), rangeBounds(map));
        text.append(partitionDigests(map));
        String side = digest(text.toString());
        mapSides.put(dep.shuffleId(), side);
        return side;
    }

    /**
     * The specs of a shuffle-reading RDD's partitions, recorded once; returns their index. A range
     * partitioning's bounds lead the line: Spark samples them with a seed made of an RDD id, which
     * another application need not repeat, and they decide which rows reducer i gets.
     */
    private int specsOf(RDD<?> node, String range) throws Exception {
        if (!specs.containsKey(node.id())) {
            Partition[] partitions = node.partitions();
            StringBuilder line = new StringBuilder(range == null || range.isEmpty() ? "" : "range " + range + ":");
            for (Partition partition : partitions) {
                if (line.length() > 0 && line.charAt(line.length() - 1) != ':') {
                    line.append(' ');
                }
                line.append(spec(partition));
            }
            specs.put(node.id(), line.toString());
        }
        int index = 0;
        for (Integer id : specs.keySet()) {
            if (id == node.id()) {
                return index;
            }
            index++;
        }
        return index;
    }

    /** "3" reads reducer 3, "3-5" reducers 3 and 4 (coalesced), "3[0-4]" map outputs 0-3 of
     * reducer 3 (a skew split); other specs by class and indices; a plain shuffle's partition by
     * its index. */
    private static String spec(Partition partition) throws Exception {
        Object spec;
        try {
            spec = partition.getClass().getMethod("spec").invoke(partition);
        } catch (NoSuchMethodException notSql) {
            return Integer.toString(partition.index());
        }
        Map<String, Object> values = new LinkedHashMap<>();
        for (String name : SPEC_FIELDS) {
            try {
                values.put(name, spec.getClass().getMethod(name).invoke(spec));
            } catch (NoSuchMethodException absent) {
                // not a field of this kind of spec
            }
        }
        String kind = spec.getClass().getSimpleName();
        if (kind.equals("CoalescedPartitionSpec")) {
            int start = ((Number) values.get("startReducerIndex")).intValue();
            int end = ((Number) values.get("endReducerIndex")).intValue();
            return end == start + 1 ? Integer.toString(start) : start + "-" + end;
        }
        if (kind.equals("PartialReducerPartitionSpec")) {
            return values.get("reducerIndex") + "[" + values.get("startMapIndex") + "-" + values.get("endMapIndex") + "]";
        }
        return kind + values.values();
    }

    /**
     * Spark SQL's range partitioning hides its RangePartitioner in the closure that computes each
     * row's partition id on the map side; its bounds come from a sample of the map side's rows, so
     * they enter the digest. Found by a bounded walk of the closure's captured fields; when one is
     * found but its bounds are not readable, the caller refuses (the counts say so).
     */
    private String rangeBounds(RDD<?> map) {
        StringBuilder text = new StringBuilder();
        ArrayDeque<Object[]> queue = new ArrayDeque<>();
        IdentityHashMap<Object, Boolean> seen = new IdentityHashMap<>();
        queue.add(new Object[] {map, 0});
        while (!queue.isEmpty()) {
            Object[] item = queue.poll();
            Object value = item[0];
            int depth = (Integer) item[1];
            if (value == null || seen.put(value, Boolean.TRUE) != null) {
                continue;
            }
            if (value.getClass().getName().equals(RANGE_PARTITIONER)) {
                rangePartitionings++;
                String bounds = boundsOf(value);
                if (bounds != null) {
                    rangeBoundsRead++;
                    text.append(bounds);
                }
                continue;
            }
            String name = value.getClass().getName();
            boolean closure = name.contains("$$Lambda") || name.contains("$anonfun$");
            if (depth >= 5 || value != map && !closure) {
                continue;  // only the RDD's closures, and what they capture directly
            }
            for (Class<?> type = value.getClass(); type != null && type != Object.class; type = type.getSuperclass()) {
                for (Field field : type.getDeclaredFields()) {
                    if (Modifier.isStatic(field.getModifiers()) || field.getType().isPrimitive()) {
                        continue;
                    }
                    try {
                        field.setAccessible(true);
                        queue.add(new Object[] {field.get(value), depth + 1});
                    } catch (RuntimeException | IllegalAccessException unreadable) {
                        // a module or hidden class that does not open its fields: not a closure of ours
                    }
                }
            }
        }
        return text.toString();
    }

    private static String boundsOf(Object partitioner) {
        for (Field field : partitioner.getClass().getDeclaredFields()) {
            if (field.getName().endsWith("rangeBounds")) {
                try {
                    field.setAccessible(true);
                    Object bounds = field.get(partitioner);
                    if (bounds instanceof Object[]) {
                        // UnsafeRow's text is its bytes in hex: equal rows, equal text, in any JVM.
                        return digest(Arrays.toString((Object[]) bounds));
                    }
                } catch (Exception unreadable) {
                    return null;
                }
            }
        }
        return null;
    }

    private List<Dependency<?>> dependenciesOf(RDD<?> node) throws Exception {
        List<Dependency<?>> found = dependencies.get(node.id());
        if (found == null) {
            found = new ArrayList<>();
            Method method = RDD.class.getMethod("dependencies");
            for (Object dep : iterate(method.invoke(node))) {
                found.add((Dependency<?>) dep);
            }
            dependencies.put(node.id(), found);
        }
        return found;
    }

    private static String leaf(RDD<?> node, int pid) throws Exception {
        Partition[] partitions = node.partitions();
        String name = node.getClass().getName();
        if (FILE_SCAN.equals(name)) {
            Object[] files = (Object[]) partitions[pid].getClass().getMethod("files").invoke(partitions[pid]);
            StringBuilder text = new StringBuilder();
            for (Object file : files) {
                Class<?> type = file.getClass();
                text.append("file:").append(type.getMethod("filePath").invoke(file))
                    .append(':').append(type.getMethod("start").invoke(file))
                    .append(':').append(type.getMethod("length").invoke(file))
                    .append(':').append(type.getMethod("modificationTime").invoke(file)).append('\n');
            }
            return text.length() > 0 ? text.toString() : "file:none:" + pid + "/" + partitions.length;
        }
        // Ranges, local relations, user RDDs: the plan (in the stage's fingerprint) says what they
        // hold; their slicing is the partition's index among the leaf's partitions.
        return name + ":" + pid + "/" + partitions.length;
    }

    /** The elements of a Scala collection, whichever Scala version made it. */
    private static List<Object> iterate(Object collection) throws Exception {
        // Through the public traits: the runtime classes are often private ones.
        List<Object> items = new ArrayList<>();
        Object iterator = Class.forName("scala.collection.Iterable").getMethod("iterator").invoke(collection);
        Class<?> iteratorTrait = Class.forName("scala.collection.Iterator");
        Method hasNext = iteratorTrait.getMethod("hasNext");
        Method next = iteratorTrait.getMethod("next");
        while ((Boolean) hasNext.invoke(iterator)) {
            items.add(next.invoke(iterator));
        }
        return items;
    }

    private static String digest(String text) throws Exception {
        byte[] hash = MessageDigest.getInstance("SHA-256").digest(text.getBytes(StandardCharsets.UTF_8));
        StringBuilder hex = new StringBuilder(16);
        for (int i = 0; i < 8; i++) {
            hex.append(String.format("%02x", hash[i] & 0xff));
        }
        return hex.toString();
    }
}
