/*
 * Which cached DataFrame a shuffle being registered is computed for, if any (docs/shuffles.md).
 *
 * A cache is filled by the first query that needs it: a count in one application, a write in the
 * next once that count's result is replayed (docs/replay.md). The shuffles of the cached plan (a
 * dropDuplicates before cache()) compute the same bytes either way, so their identity must not
 * name the query that happens to fill the cache: ShuffleIdentity takes the cached relation's plan
 * instead of the execution's for them.
 *
 * How a shuffle is found in a cached plan: an exchange plans its input RDD (its lazy inputRDD) and
 * only then makes the ShuffleDependency whose registration asks for this identity, over that RDD
 * (directly, or through the sort a round-robin repartition adds). So the exchange whose inputRDD
 * is the dependency's RDD or its parent is the shuffle's, and the cached plan holding that exchange
 * (its current plan under adaptive execution, whose new query stages are in it before they run, on
 * a thread of their own) is the cache it fills. Fields are read, never lazy values forced: nothing
 * is planned or run here. Found in no cached plan: the shuffle is the execution's own.
 */
package sparkrecover.jvm.shuffle;

import java.lang.reflect.Field;
import java.lang.reflect.Method;
import java.util.ArrayList;
import java.util.IdentityHashMap;
import java.util.List;
import java.util.Map;

import org.apache.spark.Dependency;
import org.apache.spark.ShuffleDependency;
import org.apache.spark.rdd.RDD;

final class CacheFilling {
    /** Plan nodes walked at most: a larger plan keeps the execution's plan as its identity. */
    static final int MAX_NODES = 20000;
    private static final String RELATION = "org.apache.spark.sql.execution.columnar.InMemoryRelation";

    private CacheFilling() {
    }

    /**
     * The InMemoryRelation whose cached plan computes this shuffle, among the caches {@code plan}
     * (an optimized plan) reads, directly or through other caches; null when none does.
     */
    static Object relationFilled(ShuffleDependency<?, ?, ?> dependency, Object plan) throws ShuffleIdentity.Refused {
        Map<Object, Boolean> inputs = new IdentityHashMap<>();
        RDD<?> rdd = dependency.rdd();
        for (int depth = 0; depth < 3 && rdd != null; depth++) {
            inputs.put(rdd, Boolean.TRUE);
            RDD<?> parent = null;
            for (Object next : ShuffleIdentity.iterable(ShuffleIdentity.call(rdd, "dependencies"))) {
                parent = next instanceof ShuffleDependency ? null : ((Dependency<?>) next).rdd();
                break;
            }
            rdd = parent;
        }
        List<Object> relations = new ArrayList<>();
        int[] budget = {MAX_NODES};
        if (!relations(plan, relations, new IdentityHashMap<Object, Boolean>(), budget, 0)) {
            return null;
        }
        for (Object relation : relations) {
            if (holdsExchange(ShuffleIdentity.call(relation, "cachedPlan"), inputs, budget, 0)) {
                return relation;
            }
        }
        return null;
    }

    /** Whether {@code owner} (an optimized plan, or a cached relation) computes the same rows every time. */
    static boolean deterministic(Object owner) throws ShuffleIdentity.Refused {
        if (!owner.getClass().getName().equals(RELATION)) {
            return Boolean.TRUE.equals(ShuffleIdentity.call(owner, "deterministic"));
        }
        Object cached = ShuffleIdentity.call(owner, "cachedPlan");
        // An adaptive plan is a leaf: its operators are those of the plan it started from.
        Object input = optional(cached, "inputPlan");
        return Boolean.TRUE.equals(ShuffleIdentity.call(input != null ? input : cached, "deterministic"));
    }

    /** Every cached relation reachable from {@code node}: its children, inner plans, an adaptive plan's input. */
    private static boolean relations(Object node, List<Object> found, Map<Object, Boolean> seen, int[] budget,
                                     int depth) throws ShuffleIdentity.Refused {
        if (--budget[0] < 0 || depth > ShuffleIdentity.MAX_PLAN_DEPTH) {
            return false;
        }
        if (node.getClass().getName().equals(RELATION) && seen.put(node, Boolean.TRUE) == null) {
            found.add(node);
        }
        Object input = optional(node, "inputPlan");
        if (input != null && !relations(input, found, seen, budget, depth + 1)) {
            return false;
        }
        for (String edges : new String[] {"innerChildren", "children"}) {
            for (Object next : ShuffleIdentity.iterable(ShuffleIdentity.call(node, edges))) {
                if (!relations(next, found, seen, budget, depth + 1)) {
                    return false;
                }
            }
        }
        return true;
    }

    /**
     * Whether a physical plan, as it runs now, holds the exchange planned over one of {@code inputs}.
     * A nested cache's scan is not entered: its exchanges are that cache's own.
     */
    private static boolean holdsExchange(Object node, Map<Object, Boolean> inputs, int[] budget, int depth)
        throws ShuffleIdentity.Refused {
        if (--budget[0] < 0 || depth > ShuffleIdentity.MAX_PLAN_DEPTH) {
            return false;
        }
        String kind = node.getClass().getSimpleName();
        if (kind.equals("InMemoryTableScanExec")) {
            return false;
        }
        Object planned = field(node, "inputRDD");
        if (planned != null && inputs.containsKey(planned)) {
            return true;
        }
        Object current = kind.equals("AdaptiveSparkPlanExec") ? ShuffleIdentity.call(node, "executedPlan")
            : node.getClass().getName().contains(".adaptive.") ? optional(node, "plan") : null;  // a query stage's
        if (current != null && holdsExchange(current, inputs, budget, depth + 1)) {
            return true;
        }
        for (Object next : ShuffleIdentity.iterable(ShuffleIdentity.call(node, "children"))) {
            if (holdsExchange(next, inputs, budget, depth + 1)) {
                return true;
            }
        }
        return false;
    }

    /** A field's value as it is (a lazy value not yet computed is null), or null without that field. */
    private static Object field(Object node, String name) {
        for (Class<?> cls = node.getClass(); cls != null && cls != Object.class; cls = cls.getSuperclass()) {
            try {
                Field field = cls.getDeclaredField(name);
                field.setAccessible(true);
                return field.get(node);
            } catch (NoSuchFieldException absent) {
                // a superclass may have it
            } catch (ReflectiveOperationException | RuntimeException error) {
                return null;
            }
        }
        return null;
    }

    /** {@code node.name()} when its class has that method, else null. */
    private static Object optional(Object node, String name) throws ShuffleIdentity.Refused {
        Method method;
        try {
            method = node.getClass().getMethod(name);
        } catch (NoSuchMethodException absent) {
            return null;
        }
        try {
            return method.invoke(node);
        } catch (ReflectiveOperationException | RuntimeException | LinkageError error) {
            throw new ShuffleIdentity.Refused("Spark internals differ on this version (" + node.getClass().getName()
                                              + "." + name + "): " + error);
        }
    }
}
