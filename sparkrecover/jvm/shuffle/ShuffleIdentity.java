/*
 * A shuffle's identity across applications (docs/shuffles.md): what must be equal for a map output
 * kept by one application to hold exactly the bytes the same map task would write in another.
 *
 * SHA-256 over: the Spark version; the script's digest (plans name Python functions, never their
 * bodies); the settings that change the bytes written (compression codec and switches, serializer);
 * the canonicalized optimized plan of the SQL execution the shuffle belongs to, inner plans (a
 * cached relation's) canonicalized too, so no per-application id is in it (planText) -- or, for a
 * shuffle that fills a cache, the cached relation's plan alone, whichever query fills it
 * (CacheFilling); the map-side RDD graph down to its leaves (RDD
 * classes and partition counts, each file slice: path, start, length, size, modification time;
 * each range slice; each upstream shuffle's identity and the partition specs adaptive execution
 * read it with); the partitioner's class and partition count; the dependency's ordering,
 * aggregation and map-side combine. Two shuffles of one execution with the same digest (a
 * self-join whose sides differ only in generated code) are told apart by their order.
 *
 * A range partitioning's bounds are sampled per application: they are left out (with the partition
 * count they give; the count asked for is in), and kept beside the map outputs instead (KeptBounds).
 *
 * Anything it cannot see is a refusal, never a guess: a shuffle outside a SQL execution, a plan
 * Spark calls non-deterministic, an INDETERMINATE map stage, every shuffle of a query that
 * partitions by range when its own partitioner cannot be found, a leaf that is neither a file scan
 * nor a range, an upstream shuffle without identity, a reflective step that fails on this Spark
 * version.
 *
 * Scala collections are only walked through scala.collection.Iterable and called by reflection,
 * because their classes differ between Scala 2.12 and 2.13.
 */
package sparkrecover.jvm.shuffle;

import java.lang.reflect.Field;
import java.lang.reflect.Method;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.IdentityHashMap;
import java.util.Map;

import org.apache.spark.Dependency;
import org.apache.spark.Partition;
import org.apache.spark.ShuffleDependency;
import org.apache.spark.SparkConf;
import org.apache.spark.SparkContext;
import org.apache.spark.rdd.RDD;

final class ShuffleIdentity {
    static final String EXECUTION_ID = "spark.sql.execution.id";
    static final int MAX_VALUES_PER_SLICE = 100000;
    static final int MAX_FIELDS = 1000;
    static final int MAX_PLAN_DEPTH = 2000;
    /** Ids a node prints that are new with every copy of it: exchanges' and subqueries' plan ids, codegen stages. */
    private static final java.util.regex.Pattern PER_NODE_IDS =
        java.util.regex.Pattern.compile(" ?\\[plan_id=\\d+\\]| ?\\[id=#\\d+\\]|\\*\\(\\d+\\) ");
    /** Partition-spec accessors of adaptive execution's shuffle readers (sizes left out: they vary). */
    private static final String[] SPEC_FIELDS = {
        "startReducerIndex", "endReducerIndex", "reducerIndex", "startMapIndex", "endMapIndex",
        "mapIndex", "numReducers",
    };

    /** Why a shuffle has no identity; the message is shown to users. */
    static final class Refused extends Exception {
        private static final long serialVersionUID = 1L;

        Refused(String reason) {
            super(reason);
        }
    }

    private ShuffleIdentity() {
    }

    /**
     * The digest of a shuffle's content, before the per-execution ordinal is added.
     * {@code upstream} maps this application's shuffle ids to identities.
     */
    @SuppressWarnings("rawtypes")
    static String digest(ShuffleDependency dependency, SparkContext context, SparkConf conf, String script,
                         Map<Integer, String> upstream) throws Refused {
        String execution = context.getLocalProperty(EXECUTION_ID);
        if (execution == null) {
            throw new Refused("a shuffle planned outside a SQL execution (the RDD API, or a plan run directly): "
                              + "its query cannot be identified");
        }
        Object queryExecution = call(staticMethod("org.apache.spark.sql.execution.SQLExecution",
                                                  "getQueryExecution", long.class),
                                     null, Long.parseLong(execution));
        if (queryExecution == null) {
            throw new Refused("the SQL execution of this shuffle is not registered");
        }
        Object optimized = call(queryExecution, "optimizedPlan");
        // A shuffle inside a cached DataFrame's plan is computed for that cache, whichever query
        // fills it (an earlier count, or a write once that count is replayed): its plan is the
        // cache's, so its identity is the same either way (docs/decisions/0049-*).
        Object filling = CacheFilling.relationFilled(dependency, optimized);
        Object owner = filling != null ? filling : optimized;
        if (!CacheFilling.deterministic(owner)) {
            throw new Refused("the query is not deterministic (rand(), uuid(), a non-deterministic UDF, ...)");
        }
        RDD<?> rdd = dependency.rdd();
        Object partitioner = capturedPartitioner(rdd);
        String physical = String.valueOf(call(queryExecution, "executedPlan")).toLowerCase(java.util.Locale.ROOT);
        if (partitioner == null && physical.contains("rangepartitioning")) {
            throw new Refused("Spark shuffle " + dependency.shuffleId() + " belongs to a query that partitions by "
                              + "range (orderBy, repartitionByRange), and its partitioner could not be found: "
                              + "range bounds are sampled anew by each application");
        }
        String level = String.valueOf(call(rdd, "outputDeterministicLevel"));
        if ("INDETERMINATE".equals(level)) {
            throw new Refused("the map stage is INDETERMINATE (a round-robin repartition() after a shuffle, "
                              + "or another order-sensitive step): its rows may land elsewhere when run again");
        }
        StringBuilder text = new StringBuilder(4096);
        text.append("sparkrecover-shuffle-identity v2\n");
        text.append("spark ").append(context.version()).append('\n');
        text.append("script ").append(script).append('\n');
        for (String key : new String[] {
            "spark.io.compression.codec", "spark.shuffle.compress", "spark.shuffle.spill.compress",
            "spark.io.compression.zstd.level", "spark.io.compression.lz4.blockSize", "spark.serializer",
        }) {
            text.append(key).append('=').append(conf.get(key, "")).append('\n');
        }
        if (filling != null) {
            text.append("filling a cache\n");
        }
        text.append("plan\n").append(planText(owner));
        text.append("partitioner ").append(dependency.partitioner().getClass().getName()).append(' ');
        if (partitioner instanceof org.apache.spark.RangePartitioner) {
            // Its partition count comes from the sampled bounds, kept apart (KeptBounds): the
            // count it was asked for is what identifies it.
            text.append("range ").append(KeptBounds.requestedPartitions((org.apache.spark.RangePartitioner<?, ?>) partitioner));
        } else {
            text.append(dependency.partitioner().numPartitions());
        }
        text.append('\n');
        if (partitioner != null) {
            text.append("rows partitioned by ").append(partitioner.getClass().getName()).append('\n');
        }
        text.append("serializer ").append(dependency.serializer().getClass().getName()).append('\n');
        text.append("ordering ").append(dependency.keyOrdering().isDefined())
            .append(" aggregator ").append(dependency.aggregator().isDefined())
            .append(" combine ").append(dependency.mapSideCombine()).append('\n');
        walk(rdd, text, upstream, new IdentityHashMap<Object, Boolean>());
        return sha256(text.toString());
    }

    /**
     * The canonicalized plan as text, with nothing per application in it. Spark's own tree string
     * prints a node's inner plans as they are: a cached relation's physical plan (InMemoryRelation)
     * keeps this application's expression ids and plan ids, which shift whenever anything before it
     * made plans (a schema inferred in one attempt and reused in the next, another query), and its
     * adaptive plan prints how far its stages have run. So each inner plan is canonicalized too (an
     * adaptive plan's canonical form is the plan it started from), and the ids exchanges and
     * subqueries print (new with every copy of a node) are left out.
     */
    static String planText(Object plan) throws Refused {
        StringBuilder text = new StringBuilder(4096);
        appendTree(call(plan, "canonicalized"), 0, text);
        return PER_NODE_IDS.matcher(text).replaceAll("");
    }

    private static void appendTree(Object node, int depth, StringBuilder text) throws Refused {
        if (depth > MAX_PLAN_DEPTH) {
            throw new Refused("its query plan is too deep to identify");
        }
        text.append(depth).append(' ').append(simpleString(node)).append('\n');
        for (Object inner : iterable(call(node, "innerChildren"))) {
            text.append(depth + 1).append(" inner\n");
            appendTree(call(inner, "canonicalized"), depth + 1, text);
        }
        for (Object child : iterable(call(node, "children"))) {
            appendTree(child, depth + 1, text);
        }
    }

    private static String simpleString(Object node) throws Refused {
        try {
            Method method = node.getClass().getMethod("simpleString", int.class);
            return String.valueOf(method.invoke(node, MAX_FIELDS));
        } catch (ReflectiveOperationException | RuntimeException | LinkageError error) {
            throw new Refused("Spark internals differ on this version (" + node.getClass().getName()
                              + ".simpleString): " + error);
        }
    }

    /**
     * The Partitioner that chooses each row's reduce partition, or null when it cannot be found.
     * A SQL shuffle's dependency carries only a PartitionIdPassthrough: the partitioner itself is
     * captured by the map side's function (ShuffleExchangeExec.prepareShuffleDependency), a
     * MapPartitionsRDD whose function wraps the one that captured it. Null (not found) makes a
     * query that partitions by range anywhere refuse every shuffle: only a partitioner seen to be
     * another kind clears one shuffle of such a query.
     */
    static Object capturedPartitioner(RDD<?> rdd) {
        try {
            Object function = fieldOfType(rdd, scala.Function3.class, "f");
            return function == null ? null : capturedPartitioner(function, 0, new IdentityHashMap<Object, Boolean>());
        } catch (RuntimeException | LinkageError error) {
            return null;
        }
    }

    private static Object capturedPartitioner(Object value, int depth, IdentityHashMap<Object, Boolean> seen) {
        if (value == null || depth > 4 || seen.put(value, Boolean.TRUE) != null) {
            return null;
        }
        if (value instanceof org.apache.spark.Partitioner) {
            return value;
        }
        if (!(value instanceof scala.Function0 || value instanceof scala.Function1 || value instanceof scala.Function2
              || value instanceof scala.Function3)) {
            return null;  // only what closures capture is searched, not the objects they reach
        }
        for (Class<?> cls = value.getClass(); cls != null && cls != Object.class; cls = cls.getSuperclass()) {
            for (Field field : cls.getDeclaredFields()) {
                if (java.lang.reflect.Modifier.isStatic(field.getModifiers()) || field.getType().isPrimitive()) {
                    continue;
                }
                try {
                    field.setAccessible(true);
                    Object found = capturedPartitioner(field.get(value), depth + 1, seen);
                    if (found != null) {
                        return found;
                    }
                } catch (ReflectiveOperationException | RuntimeException error) {
                    // an inaccessible capture is not the one
                }
            }
        }
        return null;
    }

    /** The identity: the digest and its ordinal among equal digests of one execution. */
    static String identity(String digest, int ordinal) {
        return sha256(digest + "#" + ordinal).substring(0, 32);
    }

    private static void walk(RDD<?> rdd, StringBuilder text, Map<Integer, String> upstream,
                             IdentityHashMap<Object, Boolean> seen) throws Refused {
        if (seen.put(rdd, Boolean.TRUE) != null) {
            text.append("seen ").append(rdd.getClass().getName()).append('\n');
            return;
        }
        Partition[] partitions = rdd.partitions();
        String kind = rdd.getClass().getName();
        text.append("rdd ").append(kind).append(' ').append(partitions.length).append('\n');
        boolean leaf = true;
        for (Object dependency : iterable(call(rdd, "dependencies"))) {
            leaf = false;
            if (dependency instanceof ShuffleDependency) {
                int id = ((ShuffleDependency<?, ?, ?>) dependency).shuffleId();
                String identity = upstream.get(id);
                if (identity == null) {
                    throw new Refused("it reads another shuffle that has no identity");
                }
                text.append("shuffle ").append(identity).append('\n');
                for (Partition partition : partitions) {
                    spec(partition, text);
                }
            } else {
                walk(((Dependency<?>) dependency).rdd(), text, upstream, seen);
            }
        }
        if (!leaf) {
            return;
        }
        if (kind.endsWith(".FileScanRDD")) {
            for (Partition partition : partitions) {
                text.append("slice ").append(partition.index());
                for (Object file : (Object[]) call(partition, "files")) {
                    text.append(" [").append(String.valueOf(call(file, "filePath")))
                        .append(' ').append(call(file, "start")).append(' ').append(call(file, "length"))
                        .append(' ').append(call(file, "fileSize")).append(' ')
                        .append(call(file, "modificationTime")).append(']');
                }
                text.append('\n');
            }
        } else if (kind.endsWith(".ParallelCollectionRDD")) {
            // spark.range(): its slices are numbers; anything else a driver-side collection holds
            // (rows of createDataFrame) is not in the plan and cannot be identified cheaply.
            for (Partition partition : partitions) {
                text.append("range ").append(partition.index()).append(':');
                int count = 0;
                for (Object value : iterable(call(partition, "values"))) {
                    if (!(value instanceof Number) || ++count > MAX_VALUES_PER_SLICE) {
                        throw new Refused("it reads a driver-side collection (createDataFrame, parallelize)");
                    }
                    text.append(' ').append(value);
                }
                text.append('\n');
            }
        } else {
            throw new Refused("it reads " + kind + ", whose input cannot be identified");
        }
    }

    private static void spec(Partition partition, StringBuilder text) throws Refused {
        Object spec = null;
        try {
            Method method = partition.getClass().getMethod("spec");
            spec = method.invoke(partition);
        } catch (NoSuchMethodException error) {
            text.append("part ").append(partition.index()).append('\n');
            return;
        } catch (ReflectiveOperationException | RuntimeException error) {
            throw new Refused("reading a shuffle reader's partition spec failed on this Spark: " + error);
        }
        text.append("spec ").append(partition.index()).append(' ').append(spec.getClass().getSimpleName());
        for (String name : SPEC_FIELDS) {
            try {
                Method accessor = spec.getClass().getMethod(name);
                text.append(' ').append(name).append('=').append(accessor.invoke(spec));
            } catch (NoSuchMethodException absent) {
                // not a field of this kind of spec
            } catch (ReflectiveOperationException | RuntimeException error) {
                throw new Refused("reading a shuffle reader's partition spec failed on this Spark: " + error);
            }
        }
        text.append('\n');
    }

    // -- reflection, every failure a refusal -------------------------------------------------------

    static Object call(Object target, String name) throws Refused {
        try {
            Method method = target.getClass().getMethod(name);
            method.setAccessible(true);
            return method.invoke(target);
        } catch (ReflectiveOperationException | RuntimeException | LinkageError error) {
            throw new Refused("Spark internals differ on this version (" + target.getClass().getName()
                              + "." + name + "): " + error);
        }
    }

    private static Method staticMethod(String className, String name, Class<?>... types) throws Refused {
        try {
            return Class.forName(className, true, Thread.currentThread().getContextClassLoader() == null
                                 ? ShuffleIdentity.class.getClassLoader()
                                 : Thread.currentThread().getContextClassLoader()).getMethod(name, types);
        } catch (ReflectiveOperationException | RuntimeException | LinkageError error) {
            throw new Refused("Spark internals differ on this version (" + className + "." + name + "): " + error);
        }
    }

    private static Object call(Method method, Object target, Object... args) throws Refused {
        try {
            return method.invoke(target, args);
        } catch (ReflectiveOperationException | RuntimeException | LinkageError error) {
            throw new Refused("Spark internals differ on this version (" + method + "): " + error);
        }
    }

    static Iterable<Object> iterable(final Object scalaIterable) throws Refused {
        if (!(scalaIterable instanceof scala.collection.Iterable)) {
            throw new Refused("Spark internals differ on this version: expected a Scala collection, got "
                              + (scalaIterable == null ? "null" : scalaIterable.getClass().getName()));
        }
        return new Iterable<Object>() {
            @Override
            public java.util.Iterator<Object> iterator() {
                final scala.collection.Iterator<?> it = ((scala.collection.Iterable<?>) scalaIterable).iterator();
                return new java.util.Iterator<Object>() {
                    @Override
                    public boolean hasNext() {
                        return it.hasNext();
                    }

                    @Override
                    public Object next() {
                        return it.next();
                    }
                };
            }
        };
    }

    /** A field of {@code target}'s class or a superclass whose value is of {@code type}. */
    static Object fieldOfType(Object target, Class<?> type, String nameHint) {
        for (Class<?> cls = target.getClass(); cls != null; cls = cls.getSuperclass()) {
            for (Field field : cls.getDeclaredFields()) {
                if (nameHint != null && !field.getName().contains(nameHint)) {
                    continue;
                }
                try {
                    field.setAccessible(true);
                    Object value = field.get(target);
                    if (type.isInstance(value)) {
                        return value;
                    }
                } catch (ReflectiveOperationException | RuntimeException error) {
                    // an inaccessible field is simply not the one
                }
            }
        }
        return null;
    }

    static String sha256(String text) {
        try {
            byte[] hash = MessageDigest.getInstance("SHA-256").digest(text.getBytes(StandardCharsets.UTF_8));
            StringBuilder hex = new StringBuilder(64);
            for (byte b : hash) {
                hex.append(Character.forDigit((b >> 4) & 0xf, 16)).append(Character.forDigit(b & 0xf, 16));
            }
            return hex.toString();
        } catch (NoSuchAlgorithmException error) {
            throw new IllegalStateException(error);
        }
    }
}
