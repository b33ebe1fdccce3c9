/*
 * What each partition of a write reads (task-level resume, docs/design.md §4a): for every partition
 * of an RDD, a digest of the leaf inputs it reaches through narrow dependencies -- file slices
 * (path, start, length, modification time) for file scans, the partition's index for other leaves,
 * the shuffle and reduce partition for a shuffle. Two applications whose digests are equal read the
 * same input in partition i. sparkrecover/driver/partitions.py calls it once per write: walking a
 * write of 10,000 partitions through Py4J calls would cost seconds, here it costs milliseconds.
 *
 * Methods whose signatures mention Scala collections (RDD.dependencies, NarrowDependency
 * .getParents) are called by reflection and walked as scala.collection.Iterable, which Scala 2.12
 * and 2.13 share, so one class file runs on Spark 3.5 and 4.x.
 */
package sparkrecover.jvm;

import java.lang.reflect.Method;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

import org.apache.spark.Dependency;
import org.apache.spark.OneToOneDependency;
import org.apache.spark.Partition;
import org.apache.spark.ShuffleDependency;
import org.apache.spark.rdd.RDD;

public final class WriteShapeProbe {
    private static final String FILE_SCAN = "org.apache.spark.sql.execution.datasources.FileScanRDD";

    private final Map<Integer, List<Dependency<?>>> dependencies = new HashMap<>();
    private final Map<String, List<String>> leaves = new HashMap<>();

    private WriteShapeProbe() {
    }

    /** One 16-hex-digit digest per partition of {@code rdd}, joined by newlines. */
    public static String slices(RDD<?> rdd) throws Exception {
        WriteShapeProbe probe = new WriteShapeProbe();
        int count = rdd.partitions().length;
        StringBuilder out = new StringBuilder(count * 17);
        for (int pid = 0; pid < count; pid++) {
            List<String> found = new ArrayList<>();
            probe.walk(rdd, pid, found);
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
                mine.add("shuffle:" + ((ShuffleDependency<?, ?, ?>) dep).shuffleId() + ":" + pid);
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
