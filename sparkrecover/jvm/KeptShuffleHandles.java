/*
 * Shuffle handles that carry the folder a shuffle's map outputs are kept in to the executors
 * (docs/shuffles.md). SortShuffleManager.getWriter chooses its writer by the handle's class
 * (instanceof), so a subclass of each of its three handles gets the same writer, and the handle
 * travels inside the serialized ShuffleDependency of every map task: no other channel is needed.
 *
 * Their constructors take no Scala collection, so one class file links on Scala 2.12 and 2.13.
 */
package sparkrecover.jvm;

import org.apache.spark.ShuffleDependency;
import org.apache.spark.shuffle.BaseShuffleHandle;
import org.apache.spark.shuffle.ShuffleHandle;
import org.apache.spark.shuffle.sort.BypassMergeSortShuffleHandle;
import org.apache.spark.shuffle.sort.SerializedShuffleHandle;

final class KeptShuffleHandles {
    private KeptShuffleHandles() {
    }

    /** A handle whose map outputs are kept under {@code <keep folder>/<keepId()>/}. */
    interface Kept {
        String keepId();
    }

    /** The same kind of handle as {@code handle}, carrying {@code keepId}; null for a kind not known. */
    @SuppressWarnings({"unchecked", "rawtypes"})
    static ShuffleHandle wrap(ShuffleHandle handle, ShuffleDependency dependency, String keepId) {
        int id = handle.shuffleId();
        if (handle instanceof SerializedShuffleHandle) {
            return new Serialized(id, dependency, keepId);
        }
        if (handle instanceof BypassMergeSortShuffleHandle) {
            return new Bypass(id, dependency, keepId);
        }
        if (handle.getClass() == BaseShuffleHandle.class) {
            return new Base(id, dependency, keepId);
        }
        return null;
    }

    @SuppressWarnings({"rawtypes", "unchecked"})
    static final class Base extends BaseShuffleHandle implements Kept {
        private static final long serialVersionUID = 1L;
        private final String keepId;

        Base(int shuffleId, ShuffleDependency dependency, String keepId) {
            super(shuffleId, dependency);
            this.keepId = keepId;
        }

        @Override
        public String keepId() {
            return keepId;
        }
    }

    @SuppressWarnings({"rawtypes", "unchecked"})
    static final class Serialized extends SerializedShuffleHandle implements Kept {
        private static final long serialVersionUID = 1L;
        private final String keepId;

        Serialized(int shuffleId, ShuffleDependency dependency, String keepId) {
            super(shuffleId, dependency);
            this.keepId = keepId;
        }

        @Override
        public String keepId() {
            return keepId;
        }
    }

    @SuppressWarnings({"rawtypes", "unchecked"})
    static final class Bypass extends BypassMergeSortShuffleHandle implements Kept {
        private static final long serialVersionUID = 1L;
        private final String keepId;

        Bypass(int shuffleId, ShuffleDependency dependency, String keepId) {
            super(shuffleId, dependency);
            this.keepId = keepId;
        }

        @Override
        public String keepId() {
            return keepId;
        }
    }
}
