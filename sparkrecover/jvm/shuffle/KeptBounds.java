/*
 * A range-partitioned shuffle's bounds, kept beside its map outputs (docs/shuffles.md,
 * docs/decisions/0027-range-shuffle-bounds.md).
 *
 * Spark SQL's range partitioning (orderBy, repartitionByRange) builds a RangePartitioner whose
 * bounds come from a sampling job seeded with an RDD id, so another application may sample other
 * bounds from the same rows, and a map output partitioned by one set of bounds is not the map
 * output another set would give. So the first application that registers a range shuffle of an
 * identity saves the bounds it sampled to <identity>/bounds in the keep folder, before its map
 * tasks run (so before any map output of it is kept and journaled); every later registration of
 * that identity, in this application or a resumed one, gives its partitioner the saved bounds
 * instead of its own sample, before the map stage's tasks are serialized. Every map output of an
 * identity is then partitioned by the one set of bounds, kept or computed again, and a write after
 * the sort sees the partitions it saw before.
 *
 * Bounds that cannot be saved or read back, that are missing while map outputs of the identity
 * are kept, or that would give another partition count than this application's sample, are a
 * refusal (ShuffleIdentity.Refused): the shuffle is then neither reused nor kept, so no identity
 * ever holds map outputs of two sets of bounds.
 *
 * The file: a header line, the bound count, each bound as an UnsafeRow (field count, byte length,
 * bytes), then the SHA-256 of everything before it (a torn or truncated file is detected).
 */
package sparkrecover.jvm.shuffle;

import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.IOException;
import java.lang.reflect.Array;
import java.lang.reflect.Field;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.Arrays;

import org.apache.spark.RangePartitioner;
import org.apache.spark.sql.catalyst.expressions.UnsafeRow;

public final class KeptBounds {
    static final String FILE = "bounds";
    private static final byte[] HEADER = "sparkrecover-range-bounds v1\n".getBytes(StandardCharsets.UTF_8);
    private static final int MAX_BOUNDS = 1 << 20;
    private static final Object LOCK = new Object();

    /** The digests of the bounds this application sampled and of those its partitioner now uses. */
    static final class Applied {
        final String sampled;
        final String used;

        Applied(String sampled, String used) {
            this.sampled = sampled;
            this.used = used;
        }
    }

    private KeptBounds() {
    }

    /**
     * What registering a range shuffle does with its bounds (KeepingShuffleManager), for the map
     * side of a query's shuffle and an identity: "used sampled" (the two digests), or
     * "refused: reason". For the tests, which run it through Py4J in a session of their own.
     */
    public static String applyTo(String keepRoot, String identity, org.apache.spark.rdd.RDD<?> mapSide) {
        Object partitioner = ShuffleIdentity.capturedPartitioner(mapSide);
        if (!(partitioner instanceof RangePartitioner)) {
            return "refused: no range partitioner found";
        }
        try {
            Applied applied = apply(KeptStore.of(keepRoot, mapSide.context().getConf()), identity,
                                    (RangePartitioner<?, ?>) partitioner);
            return applied.used + " " + applied.sampled;
        } catch (ShuffleIdentity.Refused refused) {
            return "refused: " + refused.getMessage();
        }
    }

    /** The partition count a range partitioner was asked for (before sampling), or -1 when unreadable. */
    static int requestedPartitions(RangePartitioner<?, ?> partitioner) {
        for (Field field : RangePartitioner.class.getDeclaredFields()) {
            if (field.getType() == int.class && field.getName().endsWith("partitions")) {
                try {
                    field.setAccessible(true);
                    return field.getInt(partitioner);
                } catch (ReflectiveOperationException | RuntimeException error) {
                    return -1;
                }
            }
        }
        return -1;
    }

    /**
     * Saves this application's bounds as the identity's when none are saved yet, else gives the
     * saved ones to {@code partitioner}. One registration at a time in this JVM: two of one
     * identity never both save.
     */
    static Applied apply(KeptStore store, String identity, RangePartitioner<?, ?> partitioner)
            throws ShuffleIdentity.Refused {
        Field field = boundsField();
        Object sampled;
        try {
            sampled = field.get(partitioner);
        } catch (ReflectiveOperationException | RuntimeException error) {
            throw new ShuffleIdentity.Refused("its range bounds cannot be read on this Spark: " + error);
        }
        if (!(sampled instanceof Object[])) {
            throw new ShuffleIdentity.Refused("its range bounds are not an array of rows on this Spark");
        }
        byte[] mine = encode((Object[]) sampled);
        String name = identity + "/" + FILE;
        synchronized (LOCK) {
            byte[] saved;
            try {
                saved = store.readIfPresent(name);
                if (saved == null && !store.sizes(identity).isEmpty()) {
                    // Map outputs kept under bounds now gone: saving this sample would let them
                    // be mixed with outputs partitioned by it.
                    throw new ShuffleIdentity.Refused("the range bounds its kept map outputs were partitioned by are "
                                                      + "missing from the keep folder: the map stage runs again, unkept");
                }
                if (saved == null) {
                    store.writeSmall(name, mine);
                    return new Applied(digest(mine), digest(mine));
                }
            } catch (IOException | RuntimeException error) {
                throw new ShuffleIdentity.Refused("its range bounds could not be saved or read in the keep folder ("
                                                  + error + "): the map stage runs again, unkept");
            }
            Object[] kept;
            try {
                kept = decode(saved, sampled.getClass().getComponentType());
            } catch (IOException | RuntimeException error) {
                throw new ShuffleIdentity.Refused("its kept range bounds cannot be read (" + error.getMessage()
                                                  + "): the map stage runs again, unkept");
            }
            int then = kept.length + 1;
            int now = ((Object[]) sampled).length + 1;
            if (then != now) {
                throw new ShuffleIdentity.Refused("its kept range bounds give " + then + " partitions, this "
                                                  + "application's sample " + now + ": the map stage runs again, unkept");
            }
            try {
                field.set(partitioner, kept);
            } catch (ReflectiveOperationException | RuntimeException error) {
                throw new ShuffleIdentity.Refused("its kept range bounds cannot be given to its partitioner on "
                                                  + "this Spark: " + error);
            }
            return new Applied(digest(mine), digest(saved));
        }
    }

    private static Field boundsField() throws ShuffleIdentity.Refused {
        for (Field field : RangePartitioner.class.getDeclaredFields()) {
            // The name Scala gives a private var differs between versions; its suffix does not.
            if (field.getName().endsWith("rangeBounds")) {
                try {
                    field.setAccessible(true);
                    return field;
                } catch (RuntimeException error) {
                    throw new ShuffleIdentity.Refused("its range bounds cannot be read on this Spark: " + error);
                }
            }
        }
        throw new ShuffleIdentity.Refused("no range bounds found in RangePartitioner on this Spark");
    }

    static byte[] encode(Object[] bounds) throws ShuffleIdentity.Refused {
        try {
            ByteArrayOutputStream bytes = new ByteArrayOutputStream();
            DataOutputStream out = new DataOutputStream(bytes);
            out.write(HEADER);
            out.writeInt(bounds.length);
            for (Object bound : bounds) {
                if (!(bound instanceof UnsafeRow)) {
                    throw new ShuffleIdentity.Refused("its range bounds are "
                        + (bound == null ? "null" : bound.getClass().getName()) + ", not rows Spark SQL sampled");
                }
                UnsafeRow row = (UnsafeRow) bound;
                byte[] data = row.getBytes();
                out.writeInt(row.numFields());
                out.writeInt(data.length);
                out.write(data);
            }
            out.flush();
            byte[] payload = bytes.toByteArray();
            byte[] whole = Arrays.copyOf(payload, payload.length + 32);
            System.arraycopy(sha256(payload), 0, whole, payload.length, 32);
            return whole;
        } catch (IOException error) {
            throw new IllegalStateException(error);  // an in-memory stream does not fail
        }
    }

    static Object[] decode(byte[] whole, Class<?> rowType) throws IOException {
        if (whole.length < HEADER.length + 4 + 32) {
            throw new IOException("a bounds file of " + whole.length + " bytes");
        }
        byte[] payload = Arrays.copyOf(whole, whole.length - 32);
        if (!Arrays.equals(sha256(payload), Arrays.copyOfRange(whole, payload.length, whole.length))
            || !Arrays.equals(HEADER, Arrays.copyOf(payload, HEADER.length))) {
            throw new IOException("the bounds file does not match its checksum");
        }
        DataInputStream in = new DataInputStream(new ByteArrayInputStream(payload, HEADER.length,
                                                                          payload.length - HEADER.length));
        int count = in.readInt();
        if (count < 0 || count > MAX_BOUNDS) {
            throw new IOException("a bounds file of " + count + " bounds");
        }
        Object[] rows = (Object[]) Array.newInstance(rowType, count);
        for (int i = 0; i < count; i++) {
            int fields = in.readInt();
            byte[] data = new byte[in.readInt()];
            in.readFully(data);
            UnsafeRow row = new UnsafeRow(fields);
            row.pointTo(data, data.length);
            rows[i] = row;
        }
        if (in.available() != 0) {
            throw new IOException("the bounds file has bytes after its last bound");
        }
        return rows;
    }

    /** A short digest of an encoded set of bounds, for the journal. */
    static String digest(byte[] encoded) {
        StringBuilder hex = new StringBuilder(16);
        byte[] hash = sha256(encoded);
        for (int i = 0; i < 8; i++) {
            hex.append(Character.forDigit((hash[i] >> 4) & 0xf, 16)).append(Character.forDigit(hash[i] & 0xf, 16));
        }
        return hex.toString();
    }

    private static byte[] sha256(byte[] bytes) {
        try {
            return MessageDigest.getInstance("SHA-256").digest(bytes);
        } catch (NoSuchAlgorithmException error) {
            throw new IllegalStateException(error);
        }
    }
}
