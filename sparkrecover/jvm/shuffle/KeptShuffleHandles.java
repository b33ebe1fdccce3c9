/*
 * Shuffle handles that carry the folder a shuffle's map outputs are kept in to the executors, and
 * in a resumed application the folders of the kept map outputs it reuses, which its reducers read
 * (docs/shuffles.md). SortShuffleManager.getWriter chooses its writer by the handle's class
 * (instanceof), so a subclass of each of its three handles gets the same writer, and the handle
 * travels inside the serialized ShuffleDependency of every map and reduce task: no other channel
 * is needed.
 *
 * Their constructors take no Scala collection, so one class file links on Scala 2.12 and 2.13.
 */
package sparkrecover.jvm.shuffle;

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
        State state();

        default String keepId() {
            return state().keepId;
        }

        /** Per map index, the folder (under the keep folder) of the kept output reused, or null. */
        default String[] reused() {
            return state().reused;
        }

        default void setReused(String[] folders) {
            state().reused = folders;
        }
    }

    /** What a kept handle carries, beside Spark's fields. */
    static final class State implements java.io.Serializable {
        private static final long serialVersionUID = 1L;
        final String keepId;
        String[] reused;

        State(String keepId) {
            this.keepId = keepId;
        }
    }

    /** The same kind of handle as {@code handle}, carrying {@code keepId}; null for a kind not known. */
    @SuppressWarnings({"unchecked", "rawtypes"})
    static ShuffleHandle wrap(ShuffleHandle handle, ShuffleDependency dependency, String keepId) {
        int id = handle.shuffleId();
        State state = new State(keepId);
        if (handle instanceof SerializedShuffleHandle) {
            return new Serialized(id, dependency, state);
        }
        if (handle instanceof BypassMergeSortShuffleHandle) {
            return new Bypass(id, dependency, state);
        }
        if (handle.getClass() == BaseShuffleHandle.class) {
            return new Base(id, dependency, state);
        }
        return null;
    }

    @SuppressWarnings({"rawtypes", "unchecked"})
    static final class Base extends BaseShuffleHandle implements Kept {
        private static final long serialVersionUID = 1L;
        private final State state;

        Base(int shuffleId, ShuffleDependency dependency, State state) {
            super(shuffleId, dependency);
            this.state = state;
        }

        @Override
        public State state() {
            return state;
        }
    }

    @SuppressWarnings({"rawtypes", "unchecked"})
    static final class Serialized extends SerializedShuffleHandle implements Kept {
        private static final long serialVersionUID = 1L;
        private final State state;

        Serialized(int shuffleId, ShuffleDependency dependency, State state) {
            super(shuffleId, dependency);
            this.state = state;
        }

        @Override
        public State state() {
            return state;
        }
    }

    @SuppressWarnings({"rawtypes", "unchecked"})
    static final class Bypass extends BypassMergeSortShuffleHandle implements Kept {
        private static final long serialVersionUID = 1L;
        private final State state;

        Bypass(int shuffleId, ShuffleDependency dependency, State state) {
            super(shuffleId, dependency);
            this.state = state;
        }

        @Override
        public State state() {
            return state;
        }
    }
}
